// Kernel IR lowerings of reductions and the softmax family (lower/ops.h).
// This file holds the family's lookup and the Reduce* ops; the ops along
// one axis (ArgMax, ArgMin, CumSum, Softmax, LogSoftmax, Hardmax) are in
// axis_ops.cpp.
//
// Reduce* follow the interpreter (interp/kernels/reduce.cpp): floats
// accumulate in f32 (f64 for f64), integers in their own type (sums and
// products wrap exactly as they would in 64 bits and then narrowed), the
// integer mean in 64 bits, and the integer L2/LogSum/LogSumExp in f64. The
// axes may be a constant, a run-time input (the nest of reduce_nest.h then
// takes trip counts from the shape program) or absent (all axes, or the
// identity with noop_with_empty_axes).
#include "lower/axis_ops.h"
#include "lower/ops.h"
#include "lower/reduce_nest.h"

#include <limits>

namespace kiln::lower {

namespace {

using kir::Affine;
using kir::Opcode;
using kir::Schedule;

Status lowerReduce(DispatchBuilder &d);

} // namespace

LowerFn reduceLowering(OpKind op) {
  switch (op) {
  case OpKind::ReduceSum:
  case OpKind::ReduceMean:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::ReduceProd:
  case OpKind::ReduceL1:
  case OpKind::ReduceL2:
  case OpKind::ReduceLogSum:
  case OpKind::ReduceLogSumExp:
  case OpKind::ReduceSumSquare:
    return lowerReduce;
  case OpKind::ArgMax:
  case OpKind::ArgMin:
    return lowerArgExtreme;
  case OpKind::CumSum:
    return lowerCumSum;
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return lowerSoftmax;
  case OpKind::Hardmax:
    return lowerHardmax;
  default:
    return nullptr;
  }
}

namespace {

// ---- the arithmetic of one Reduce* op -------------------------------------------

// The smallest and largest values of integer type `t` (the identities of
// max and min), as the bits of an i64.
int64_t lowestOf(DType t) {
  switch (t) {
  case DType::I8:
    return std::numeric_limits<int8_t>::min();
  case DType::I16:
    return std::numeric_limits<int16_t>::min();
  case DType::I32:
    return std::numeric_limits<int32_t>::min();
  case DType::I64:
    return std::numeric_limits<int64_t>::min();
  default:
    return 0; // unsigned and bool
  }
}
int64_t highestOf(DType t) {
  switch (t) {
  case DType::I8:
    return std::numeric_limits<int8_t>::max();
  case DType::I16:
    return std::numeric_limits<int16_t>::max();
  case DType::I32:
    return std::numeric_limits<int32_t>::max();
  case DType::I64:
    return std::numeric_limits<int64_t>::max();
  case DType::U8:
    return std::numeric_limits<uint8_t>::max();
  case DType::U16:
    return std::numeric_limits<uint16_t>::max();
  case DType::U32:
    return std::numeric_limits<uint32_t>::max();
  case DType::U64:
    return -1; // all bits
  default:
    return 1; // bool
  }
}

// A float result as integer type `t` the way the interpreter's
// static_cast<T>(double) does on x86: 8- and 16-bit types go through a
// 32-bit conversion and wrap (an L2 norm of i8 values above 127 wraps), u32
// through a 64-bit one.
int floatToInt(kir::KernelBuilder &b, DType t, DType from, int v) {
  switch (t) {
  case DType::I8:
  case DType::U8:
  case DType::I16:
  case DType::U16:
    return b.cast(t, DType::I32, b.cast(DType::I32, from, v));
  case DType::U32:
    return b.cast(t, DType::I64, b.cast(DType::I64, from, v));
  default:
    return b.cast(t, from, v);
  }
}

// The accumulator `v` of type `acc` as the output's type `t`.
int narrow(kir::KernelBuilder &b, DType t, DType acc, int v) {
  if (isFloat(acc) && isInt(t)) return floatToInt(b, t, acc, v);
  return convert(b, t, acc, v);
}

// acc = combine(acc, element(x)) over the reduced elements, from init;
// the result is finish(acc) stored as the input's type.
struct ReduceMath {
  OpKind op;
  DType type; // the input's (and output's)
  DType acc;  // the accumulator's

  static Expected<ReduceMath> of(OpKind op, DType t) {
    if (t == DType::String) return makeError("string tensors cannot be reduced");
    const bool maxMin = op == OpKind::ReduceMax || op == OpKind::ReduceMin;
    if (t == DType::Bool && !maxMin)
      return makeError("bool tensors can only be reduced by ReduceMax and ReduceMin");
    DType acc = t;
    if (isFloat(t))
      acc = floatAccType(t);
    else if (op == OpKind::ReduceMean)
      acc = isSignedInt(t) ? DType::I64 : DType::U64;
    else if (op == OpKind::ReduceL2 || op == OpKind::ReduceLogSum || op == OpKind::ReduceLogSumExp)
      acc = DType::F64;
    return ReduceMath{op, t, acc};
  }

  int init(kir::KernelBuilder &b) const {
    switch (op) {
    case OpKind::ReduceProd:
      return b.constant(acc, 1);
    case OpKind::ReduceMax:
      if (isFloat(acc)) return b.constant(acc, -std::numeric_limits<double>::infinity());
      return b.intConstant(acc, lowestOf(acc));
    case OpKind::ReduceMin:
      if (isFloat(acc)) return b.constant(acc, std::numeric_limits<double>::infinity());
      return b.intConstant(acc, highestOf(acc));
    default:
      return b.constant(acc, 0);
    }
  }
  // The contribution of input element x (of the input's type).
  int element(kir::KernelBuilder &b, int x) const {
    const int v = convert(b, acc, type, x);
    switch (op) {
    case OpKind::ReduceL1:
      return b.unary(Opcode::Abs, acc, v);
    case OpKind::ReduceL2:
    case OpKind::ReduceSumSquare:
      return b.binary(Opcode::Mul, acc, v, v);
    default:
      return v;
    }
  }
  int combine(kir::KernelBuilder &b, int a, int e) const {
    switch (op) {
    case OpKind::ReduceProd:
      return b.binary(Opcode::Mul, acc, a, e);
    case OpKind::ReduceMax:
      return b.binary(acc == DType::Bool ? Opcode::Or : Opcode::Max, acc, a, e);
    case OpKind::ReduceMin:
      return b.binary(acc == DType::Bool ? Opcode::And : Opcode::Min, acc, a, e);
    default:
      return b.binary(Opcode::Add, acc, a, e);
    }
  }
  // The output value from the accumulator; `count` is the number of
  // reduced elements (an i64 value).
  int finish(kir::KernelBuilder &b, int a, int count) const {
    int r = a;
    if (op == OpKind::ReduceMean) // the integer division gives 0 for no elements
      r = b.binary(Opcode::Div, acc, a, convert(b, acc, DType::I64, count));
    else if (op == OpKind::ReduceL2)
      r = b.unary(Opcode::Sqrt, acc, a);
    else if (op == OpKind::ReduceLogSum)
      r = b.unary(Opcode::Log, acc, a);
    return narrow(b, type, acc, r);
  }
  // LogSumExp: the shift applied before exponentiating, the maximum when it
  // is finite, else 0 (an infinite or NaN maximum gives its own result).
  int lseShift(kir::KernelBuilder &b, int max) const {
    const int inf = b.constant(acc, std::numeric_limits<double>::infinity());
    const int finite = b.compare(Opcode::Lt, acc, b.unary(Opcode::Abs, acc, max), inf);
    return b.select(acc, finite, max, b.constant(acc, 0));
  }
  int lseTerm(kir::KernelBuilder &b, int x, int shift) const {
    return b.unary(Opcode::Exp, acc, b.binary(Opcode::Sub, acc, convert(b, acc, type, x), shift));
  }
  int lseFinish(kir::KernelBuilder &b, int sum, int shift) const {
    const int r = b.binary(Opcode::Add, acc, shift, b.unary(Opcode::Log, acc, sum));
    return narrow(b, type, acc, r);
  }
  bool isLse() const { return op == OpKind::ReduceLogSumExp; }
};

// ---- which axes are reduced ----------------------------------------------------

// Per input dim, a shape value that is 1 when the dim is reduced; nullopt
// when the op is the identity (noop_with_empty_axes and no axes).
Expected<std::optional<std::vector<SVal>>> reducedDims(DispatchBuilder &d, int rank) {
  const Node &n = d.node();
  int64_t count = 0;
  if (d.input(1)) {
    if (!isInt(d.inputType(1)))
      return makeError("axes must be an integer tensor, got ", dtypeName(d.inputType(1)));
    const std::optional<int64_t> k = d.constant(d.numel(1));
    if (!k) return makeError("axes of a length known only at run time are not supported");
    count = *k;
  }
  if (count == 0) {
    if (n.getInt("noop_with_empty_axes") != 0) return std::optional<std::vector<SVal>>();
    return std::optional<std::vector<SVal>>(std::vector<SVal>(size_t(rank), d.c(1)));
  }
  const SVal r = d.c(rank);
  std::vector<SVal> axes;
  for (int64_t k = 0; k < count; ++k) {
    const SVal a = d.elem(1, k);
    d.check(d.land(d.le(d.c(-rank), a), d.lt(a, r)), "axis {} is out of range for rank {}", {a, r});
    axes.push_back(d.select(d.lt(a, d.c(0)), d.add(a, r), a));
  }
  for (size_t i = 0; i < axes.size(); ++i)
    for (size_t j = i + 1; j < axes.size(); ++j)
      d.check(d.ne(axes[i], axes[j]), "axis {} appears more than once in axes", {axes[i]});
  std::vector<SVal> reduced;
  for (int i = 0; i < rank; ++i) {
    SVal any = d.c(0);
    for (SVal a : axes) any = d.lor(any, d.eq(a, d.c(i)));
    reduced.push_back(any);
  }
  return std::optional<std::vector<SVal>>(std::move(reduced));
}

// The output dims: each input dim, 1 where reduced (keepdims), or only the
// kept dims in order. Without keepdims and with axes known only at run
// time, output dim j is the j-th kept input dim.
std::vector<SVal> outputDims(DispatchBuilder &d, const std::vector<SVal> &reduced, bool keepdims) {
  const std::vector<SVal> in = d.dims(0);
  std::vector<SVal> out;
  if (keepdims) {
    for (size_t i = 0; i < in.size(); ++i) out.push_back(d.select(reduced[i], d.c(1), in[i]));
    return out;
  }
  bool known = true;
  for (SVal r : reduced) known = known && d.constant(r).has_value();
  if (known) {
    for (size_t i = 0; i < in.size(); ++i)
      if (d.constant(reduced[i]) == 0) out.push_back(in[i]);
    return out;
  }
  // Axes from data: their count is static, so the output rank is.
  const int64_t numAxes = *d.constant(d.numel(1));
  std::vector<SVal> before; // kept dims before dim i
  SVal kept = d.c(0);
  for (SVal r : reduced) {
    before.push_back(kept);
    kept = d.add(kept, d.lnot(r));
  }
  for (int64_t j = 0; j < int64_t(in.size()) - numAxes; ++j) {
    SVal dim = d.c(0);
    for (size_t i = 0; i < in.size(); ++i)
      dim = d.select(d.land(d.lnot(reduced[i]), d.eq(before[i], d.c(j))), in[i], dim);
    out.push_back(dim);
  }
  return out;
}

// ---- kernels --------------------------------------------------------------------

// A kernel's extent: `n`, or 0 (the launch is skipped) unless `enabled`
// holds; an invalid `enabled` always holds.
SVal onlyIf(DispatchBuilder &d, SVal enabled, SVal n) {
  return enabled.valid() ? d.select(enabled, n, d.c(0)) : n;
}

// Parallel over output elements; each reduces its elements into a scalar.
void emitRows(DispatchBuilder &d, ReduceNest &nest, const ReduceMath &m, SVal enabled) {
  kir::KernelBuilder &b = d.beginKernel(onlyIf(d, enabled, nest.outCount()), nest.redCount());
  const int o = d.loop(nest.outCount(), {Schedule::Kind::Parallel, 1});
  const Offset base = nest.base(o);
  auto loadAt = [&](const Affine &off) {
    Affine at = base.affine;
    return b.load(d.in(0), append(at, off), base.dyn);
  };
  const int acc = b.addVar("acc", m.acc);
  int result;
  if (m.isLse()) {
    b.varWrite(acc, b.constant(m.acc, -std::numeric_limits<double>::infinity()));
    Affine off = nest.openReduced(true);
    b.varWrite(
        acc, b.binary(Opcode::Max, m.acc, b.varRead(acc), convert(b, m.acc, m.type, loadAt(off))));
    nest.closeReduced();
    const int shift = m.lseShift(b, b.varRead(acc));
    b.varWrite(acc, b.constant(m.acc, 0));
    off = nest.openReduced(true);
    b.varWrite(acc, b.binary(Opcode::Add, m.acc, b.varRead(acc), m.lseTerm(b, loadAt(off), shift)));
    nest.closeReduced();
    result = m.lseFinish(b, b.varRead(acc), shift);
  } else {
    b.varWrite(acc, m.init(b));
    const Affine off = nest.openReduced(true);
    b.varWrite(acc, m.combine(b, b.varRead(acc), m.element(b, loadAt(off))));
    nest.closeReduced();
    result = m.finish(b, b.varRead(acc), d.value(nest.redCount()));
  }
  b.store(d.out(0), Affine{}.add(1, -1, o), result);
  b.endLoop();
  d.endKernel();
}

// Parallel over output rows; the last (kept, contiguous) dim is a vector
// loop over a row of accumulators in scratch `accRow` (and the maximum in
// `maxRow` for LogSumExp).
void emitColumns(DispatchBuilder &d, ReduceNest &nest, const ReduceMath &m, int accRow, int maxRow,
                 SVal enabled) {
  kir::KernelBuilder &b =
      d.beginKernel(onlyIf(d, enabled, nest.outerCount()), d.mul(nest.redCount(), nest.inner()));
  const int o = d.loop(nest.outerCount(), {Schedule::Kind::Parallel, 1});
  const Offset base = nest.base(o);
  const Schedule vec{Schedule::Kind::Vector, vectorWidth(m.acc)};
  const int accBuf = d.scratch(accRow);
  // Runs body(j, x) for every reduced position, j over the row.
  auto overInput = [&](auto body) {
    const Affine off = nest.openReduced(false);
    const int j = d.loop(nest.inner(), vec);
    Affine at = base.affine;
    append(at, off).add(1, -1, j);
    body(j, b.load(d.in(0), at, base.dyn));
    b.endLoop();
    nest.closeReduced();
  };
  auto overRow = [&](auto body) {
    const int j = d.loop(nest.inner(), vec);
    body(j, rowMajor(d, o, nest.inner(), j));
    b.endLoop();
  };
  if (m.isLse()) {
    const int maxBuf = d.scratch(maxRow);
    overRow([&](int, const Affine &at) {
      b.store(maxBuf, at, b.constant(m.acc, -std::numeric_limits<double>::infinity()));
      b.store(accBuf, at, b.constant(m.acc, 0));
    });
    overInput([&](int j, int x) {
      const Affine at = rowMajor(d, o, nest.inner(), j);
      b.store(maxBuf, at,
              b.binary(Opcode::Max, m.acc, b.load(maxBuf, at), convert(b, m.acc, m.type, x)));
    });
    overInput([&](int j, int x) {
      const Affine at = rowMajor(d, o, nest.inner(), j);
      const int shift = m.lseShift(b, b.load(maxBuf, at));
      b.store(accBuf, at, b.binary(Opcode::Add, m.acc, b.load(accBuf, at), m.lseTerm(b, x, shift)));
    });
    overRow([&](int, const Affine &at) {
      const int shift = m.lseShift(b, b.load(maxBuf, at));
      b.store(d.out(0), at, m.lseFinish(b, b.load(accBuf, at), shift));
    });
  } else {
    overRow([&](int, const Affine &at) { b.store(accBuf, at, m.init(b)); });
    overInput([&](int j, int x) {
      const Affine at = rowMajor(d, o, nest.inner(), j);
      b.store(accBuf, at, m.combine(b, b.load(accBuf, at), m.element(b, x)));
    });
    const int count = d.value(nest.redCount());
    overRow([&](int, const Affine &at) {
      b.store(d.out(0), at, m.finish(b, b.load(accBuf, at), count));
    });
  }
  b.endLoop();
  d.endKernel();
}

Status lowerReduce(DispatchBuilder &d) {
  const int rank = d.inputRank(0);
  if (rank < 0) return makeError("the input's rank is not known");
  KILN_ASSIGN_OR_RETURN(ReduceMath m, ReduceMath::of(d.node().op(), d.inputType(0)));
  KILN_ASSIGN_OR_RETURN(auto reduced, reducedDims(d, rank));
  if (!reduced) { // noop_with_empty_axes: the input unchanged
    d.setOutput(0, d.dims(0));
    emitCopy(d, 0, 0);
    return Status::success();
  }
  d.setOutput(0, outputDims(d, *reduced, d.node().getInt("keepdims") != 0));
  ReduceNest nest(d, 0, *reduced);
  if (nest.columns()) {
    const int accRow = d.addScratch(m.acc, nest.outCount());
    const int maxRow = m.isLse() ? d.addScratch(m.acc, nest.outCount()) : -1;
    emitColumns(d, nest, m, accRow, maxRow, {});
    return Status::success();
  }
  // When only the run knows whether the last dim is reduced (axes from
  // data), a columns kernel for the runs where it is kept joins the rows
  // kernel: the shape program gives one of the two no iterations (and its
  // scratch no elements), so a kept contiguous dim is still walked by
  // vector loops rather than by strided reductions.
  if (rank > 0 && !d.constant(reduced->back())) {
    std::vector<SVal> lastKept = *reduced;
    lastKept.back() = d.c(0);
    ReduceNest cols(d, 0, lastKept);
    if (cols.columns()) {
      const SVal kept = d.lnot(reduced->back());
      const SVal rowElems = d.select(kept, cols.outCount(), d.c(0));
      const int accRow = d.addScratch(m.acc, rowElems);
      const int maxRow = m.isLse() ? d.addScratch(m.acc, rowElems) : -1;
      emitRows(d, nest, m, d.lnot(kept));
      emitColumns(d, cols, m, accRow, maxRow, kept);
      return Status::success();
    }
  }
  emitRows(d, nest, m, {});
  return Status::success();
}

} // namespace
} // namespace kiln::lower
