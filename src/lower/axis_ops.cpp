// Lowerings of ArgMax/ArgMin, CumSum, Softmax/LogSoftmax and Hardmax
// (axis_ops.h), matching interp/kernels/reduce.cpp and softmax.cpp. The
// input is viewed as [outer, len, inner] around the axis. Two loop shapes:
//   rows     (inner is statically 1): parallel over outer, each line walked
//            with scalar variables, vectorized where the op allows;
//   columns  (otherwise): parallel over outer; for each position along the
//            axis, a vectorized loop over the contiguous inner dim updates a
//            row of per-line state (the output itself, or scratch).
#include "lower/axis_ops.h"

#include "lower/reduce_nest.h"

#include <limits>

namespace kiln::lower {

namespace {

using kir::Affine;
using kir::Opcode;
using kir::Schedule;

constexpr double kInf = std::numeric_limits<double>::infinity();

// [outer, len, inner] around `axis` (a shape value in [0, rank)).
struct AxisView {
  SVal outer, len, inner, line; // line = len * inner, the stride of outer
};

AxisView viewAround(DispatchBuilder &d, SVal axis) {
  AxisView v{d.c(1), d.c(1), d.c(1), {}};
  const std::vector<SVal> dims = d.dims(0);
  for (int i = 0; i < int(dims.size()); ++i) {
    const SVal at = d.c(i), one = d.c(1);
    v.outer = d.mul(v.outer, d.select(d.lt(at, axis), dims[size_t(i)], one));
    v.len = d.mul(v.len, d.select(d.eq(at, axis), dims[size_t(i)], one));
    v.inner = d.mul(v.inner, d.select(d.lt(axis, at), dims[size_t(i)], one));
  }
  v.line = d.mul(v.len, v.inner);
  return v;
}

// The `axis` attribute resolved against the input's known rank >= 1.
Expected<int> axisAttribute(DispatchBuilder &d) {
  const int rank = d.inputRank(0);
  if (rank < 1) return makeError("the input needs a known rank of at least 1");
  const int64_t a = d.node().getInt("axis");
  if (a < -rank || a >= rank) return makeError("axis ", a, " is out of range for rank ", rank);
  return int(a < 0 ? a + rank : a);
}

// x[o * line + k * inner + j] (k or j may be -1: left out).
Affine lineAt(DispatchBuilder &d, const AxisView &v, int o, int k, int j) {
  Affine a = d.term(v.line, o);
  if (k >= 0) d.addTerm(a, v.inner, k);
  if (j >= 0) a.add(1, -1, j);
  return a;
}

Schedule vectorOf(DType t) {
  return {Schedule::Kind::Vector, vectorWidth(t)};
}

// ---- ArgMax / ArgMin --------------------------------------------------------------

// Whether x replaces the best so far: strictly better, or equal with
// select_last_index; a NaN counts as the extreme (the first one wins unless
// select_last_index), as in the interpreter.
int beats(kir::KernelBuilder &b, DType t, int x, int best, bool wantMax, bool last) {
  const Opcode strict = wantMax ? Opcode::Gt : Opcode::Lt;
  const Opcode orEqual = wantMax ? Opcode::Ge : Opcode::Le;
  const int normal = b.compare(last ? orEqual : strict, t, x, best);
  if (!isFloat(t)) return normal;
  const int xNan = b.compare(Opcode::Ne, t, x, x), bestNan = b.compare(Opcode::Ne, t, best, best);
  const int nanCase =
      last ? xNan
           : b.binary(Opcode::And, DType::Bool, xNan, b.unary(Opcode::Not, DType::Bool, bestNan));
  const int anyNan = b.binary(Opcode::Or, DType::Bool, xNan, bestNan);
  return b.select(DType::Bool, anyNan, nanCase, normal);
}

} // namespace

Status lowerArgExtreme(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(const int axis, axisAttribute(d));
  const DType t = d.inputType(0);
  if (t == DType::String) return makeError("string tensors are not supported");
  const bool wantMax = d.node().op() == OpKind::ArgMax;
  const bool last = d.node().getInt("select_last_index") != 0;
  const AxisView v = viewAround(d, d.c(axis));
  d.check(d.lnot(d.land(d.eq(v.len, d.c(0)), d.lt(d.c(0), d.mul(v.outer, v.inner)))),
          std::string("cannot take ") + (wantMax ? "argmax" : "argmin") + " over axis {} of size 0",
          {d.c(axis)});
  std::vector<SVal> dims = d.dims(0);
  if (d.node().getInt("keepdims") != 0)
    dims[size_t(axis)] = d.c(1);
  else
    dims.erase(dims.begin() + axis);
  d.setOutput(0, dims, DType::I64);
  // Compare in the type the interpreter computes in (f32 for f16/bf16);
  // bools as bytes (ordered comparisons are numeric only).
  const DType ct = isFloat(t) ? floatAccType(t) : t == DType::Bool ? DType::U8 : t;
  const SVal rest = d.max(d.sub(v.len, d.c(1)), d.c(0)); // positions after the first
  kir::KernelBuilder &b = d.beginKernel(v.outer, v.line);
  const int o = d.loop(v.outer, {Schedule::Kind::Parallel, 1});
  auto value = [&](Affine at, int dyn = -1) { return convert(b, ct, t, b.load(d.in(0), at, dyn)); };
  if (d.constant(v.inner) == 1) {
    const int bestIdx = b.addVar("best", DType::I64), bestVal = b.addVar("value", ct);
    b.varWrite(bestIdx, b.intConstant(DType::I64, 0));
    b.varWrite(bestVal, value(lineAt(d, v, o, -1, -1)));
    const int k = d.loop(rest);
    Affine at = lineAt(d, v, o, k, -1);
    at.add(1, -1, -1); // position k + 1
    const int x = value(at), cur = b.varRead(bestVal);
    const int replace = beats(b, ct, x, cur, wantMax, last);
    b.varWrite(bestVal, b.select(ct, replace, x, cur));
    b.varWrite(bestIdx,
               b.select(DType::I64, replace, b.index(Affine{}.add(1, -1, k).add(1, -1, -1)),
                        b.varRead(bestIdx)));
    b.endLoop();
    b.store(d.out(0), Affine{}.add(1, -1, o), b.varRead(bestIdx));
  } else {
    // The best index so far lives in the output row; its value is read back
    // from the input.
    int j = d.loop(v.inner, vectorOf(ct));
    b.store(d.out(0), rowMajor(d, o, v.inner, j), b.intConstant(DType::I64, 0));
    b.endLoop();
    const int k = d.loop(rest);
    j = d.loop(v.inner, vectorOf(ct));
    const Affine outAt = rowMajor(d, o, v.inner, j);
    const int best = b.load(d.out(0), outAt);
    const int bestVal =
        value(lineAt(d, v, o, -1, j), b.binary(Opcode::Mul, DType::I64, best, d.value(v.inner)));
    Affine at = lineAt(d, v, o, k, j);
    d.addTerm(at, v.inner); // position k + 1
    const int replace = beats(b, ct, value(at), bestVal, wantMax, last);
    const int next = b.index(Affine{}.add(1, -1, k).add(1, -1, -1));
    b.store(d.out(0), outAt, b.select(DType::I64, replace, next, best));
    b.endLoop();
    b.endLoop();
  }
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// ---- CumSum ------------------------------------------------------------------------

Status lowerCumSum(DispatchBuilder &d) {
  const int rank = d.inputRank(0);
  if (rank < 1) return makeError("the input needs a known rank of at least 1");
  const DType t = d.inputType(0);
  if (t == DType::Bool || t == DType::String)
    return makeError("CumSum does not accept ", dtypeName(t), " tensors");
  if (!isInt(d.inputType(1)))
    return makeError("axis must be an integer tensor, got ", dtypeName(d.inputType(1)));
  d.check(d.eq(d.numel(1), d.c(1)), "axis must hold exactly one value, got {}", {d.numel(1)});
  const SVal a = d.elem(1, 0), r = d.c(rank);
  d.check(d.land(d.le(d.c(-rank), a), d.lt(a, r)), "axis {} is out of range for rank {}", {a, r});
  const AxisView v = viewAround(d, d.select(d.lt(a, d.c(0)), d.add(a, r), a));
  d.setOutput(0, d.dims(0));
  // Integers accumulate in their own type: wrapping there is what the
  // interpreter's 64-bit sum gives once narrowed.
  const DType acc = isFloat(t) ? floatAccType(t) : t;
  const bool exclusive = d.node().getInt("exclusive") != 0;
  const bool reverse = d.node().getInt("reverse") != 0;
  const bool rows = d.constant(v.inner) == 1;
  const int sums = rows ? -1 : d.addScratch(acc, d.mul(v.outer, v.inner));
  kir::KernelBuilder &b = d.beginKernel(v.outer, v.line);
  const int o = d.loop(v.outer, {Schedule::Kind::Parallel, 1});
  // Element k of the walk along the axis, from the back when reversed.
  auto position = [&](int k, int j) {
    Affine at = d.term(v.line, o);
    if (reverse) {
      d.addTerm(at, d.mul(d.sub(v.len, d.c(1)), v.inner));
      d.addTerm(at, v.inner, k, -1);
    } else {
      d.addTerm(at, v.inner, k);
    }
    if (j >= 0) at.add(1, -1, j);
    return at;
  };
  // Stores the running sum at `at` and returns the new one.
  auto step = [&](const Affine &at, int running) {
    const int x = convert(b, acc, t, b.load(d.in(0), at));
    const int next = b.binary(Opcode::Add, acc, running, x);
    b.store(d.out(0), at, convert(b, t, acc, exclusive ? running : next));
    return next;
  };
  if (rows) {
    const int sum = b.addVar("sum", acc);
    b.varWrite(sum, b.constant(acc, 0));
    const int k = d.loop(v.len);
    b.varWrite(sum, step(position(k, -1), b.varRead(sum)));
    b.endLoop();
  } else {
    const int buf = d.scratch(sums);
    int j = d.loop(v.inner, vectorOf(acc));
    b.store(buf, rowMajor(d, o, v.inner, j), b.constant(acc, 0));
    b.endLoop();
    const int k = d.loop(v.len);
    j = d.loop(v.inner, vectorOf(acc));
    const Affine row = rowMajor(d, o, v.inner, j);
    b.store(buf, row, step(position(k, j), b.load(buf, row)));
    b.endLoop();
    b.endLoop();
  }
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// ---- Softmax, LogSoftmax -------------------------------------------------------------

// Per line: the maximum m, the sum s of e^(x - m), then e^(x - m) / s or
// x - m - log(s), in f32 (f64 for f64).
Status lowerSoftmax(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(const int axis, axisAttribute(d));
  const DType t = d.inputType(0);
  if (!isFloat(t)) return makeError("expects a float tensor, got ", dtypeName(t));
  const bool log = d.node().op() == OpKind::LogSoftmax;
  const AxisView v = viewAround(d, d.c(axis));
  d.setOutput(0, d.dims(0));
  const DType acc = floatAccType(t);
  const bool rows = d.constant(v.inner) == 1;
  const int maxRow = rows ? -1 : d.addScratch(acc, d.mul(v.outer, v.inner));
  const int sumRow = rows ? -1 : d.addScratch(acc, d.mul(v.outer, v.inner));
  kir::KernelBuilder &b = d.beginKernel(v.outer, v.line);
  const int o = d.loop(v.outer, {Schedule::Kind::Parallel, 1});
  auto x = [&](int k, int j) { return convert(b, acc, t, b.load(d.in(0), lineAt(d, v, o, k, j))); };
  auto shifted = [&](int k, int j, int m) { return b.binary(Opcode::Sub, acc, x(k, j), m); };
  auto result = [&](int k, int j, int m, int s) {
    const int z = shifted(k, j, m);
    const int y = log ? b.binary(Opcode::Sub, acc, z, b.unary(Opcode::Log, acc, s))
                      : b.binary(Opcode::Div, acc, b.unary(Opcode::Exp, acc, z), s);
    b.store(d.out(0), lineAt(d, v, o, k, j), convert(b, t, acc, y));
  };
  if (rows) {
    const int mx = b.addVar("max", acc), sum = b.addVar("sum", acc);
    b.varWrite(mx, b.constant(acc, -kInf));
    int k = d.loop(v.len, vectorOf(acc));
    b.varWrite(mx, b.binary(Opcode::Max, acc, b.varRead(mx), x(k, -1)));
    b.endLoop();
    const int m = b.varRead(mx);
    b.varWrite(sum, b.constant(acc, 0));
    k = d.loop(v.len, vectorOf(acc));
    b.varWrite(sum, b.binary(Opcode::Add, acc, b.varRead(sum),
                             b.unary(Opcode::Exp, acc, shifted(k, -1, m))));
    b.endLoop();
    const int s = b.varRead(sum);
    k = d.loop(v.len, vectorOf(acc));
    result(k, -1, m, s);
    b.endLoop();
  } else {
    const int maxBuf = d.scratch(maxRow), sumBuf = d.scratch(sumRow);
    int j = d.loop(v.inner, vectorOf(acc));
    Affine row = rowMajor(d, o, v.inner, j);
    b.store(maxBuf, row, b.constant(acc, -kInf));
    b.store(sumBuf, row, b.constant(acc, 0));
    b.endLoop();
    int k = d.loop(v.len);
    j = d.loop(v.inner, vectorOf(acc));
    row = rowMajor(d, o, v.inner, j);
    b.store(maxBuf, row, b.binary(Opcode::Max, acc, b.load(maxBuf, row), x(k, j)));
    b.endLoop();
    b.endLoop();
    k = d.loop(v.len);
    j = d.loop(v.inner, vectorOf(acc));
    row = rowMajor(d, o, v.inner, j);
    const int e = b.unary(Opcode::Exp, acc, shifted(k, j, b.load(maxBuf, row)));
    b.store(sumBuf, row, b.binary(Opcode::Add, acc, b.load(sumBuf, row), e));
    b.endLoop();
    b.endLoop();
    k = d.loop(v.len);
    j = d.loop(v.inner, vectorOf(acc));
    row = rowMajor(d, o, v.inner, j);
    result(k, j, b.load(maxBuf, row), b.load(sumBuf, row));
    b.endLoop();
    b.endLoop();
  }
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// ---- Hardmax -----------------------------------------------------------------------

// 1 at the first maximum of each line (the first NaN when there is one),
// 0 elsewhere.
Status lowerHardmax(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(const int axis, axisAttribute(d));
  const DType t = d.inputType(0);
  if (!isFloat(t)) return makeError("expects a float tensor, got ", dtypeName(t));
  const AxisView v = viewAround(d, d.c(axis));
  d.setOutput(0, d.dims(0));
  const DType acc = floatAccType(t);
  const bool rows = d.constant(v.inner) == 1;
  const int valRow = rows ? -1 : d.addScratch(acc, d.mul(v.outer, v.inner));
  const int idxRow = rows ? -1 : d.addScratch(DType::I64, d.mul(v.outer, v.inner));
  kir::KernelBuilder &b = d.beginKernel(v.outer, v.line);
  const int o = d.loop(v.outer, {Schedule::Kind::Parallel, 1});
  // Whether x at position k takes over from the best so far: once the best
  // is NaN nothing does.
  auto replaces = [&](int x, int best) {
    const int better = b.binary(Opcode::Or, DType::Bool, b.compare(Opcode::Gt, acc, x, best),
                                b.compare(Opcode::Ne, acc, x, x));
    return b.binary(Opcode::And, DType::Bool, b.compare(Opcode::Eq, acc, best, best), better);
  };
  auto x = [&](int k, int j) { return convert(b, acc, t, b.load(d.in(0), lineAt(d, v, o, k, j))); };
  auto oneHot = [&](int k, int j, int best) {
    const int hit = b.compare(Opcode::Eq, DType::I64, b.index(Affine{}.add(1, -1, k)), best);
    b.store(d.out(0), lineAt(d, v, o, k, j), b.select(t, hit, b.constant(t, 1), b.constant(t, 0)));
  };
  if (rows) {
    const int bestIdx = b.addVar("best", DType::I64), bestVal = b.addVar("value", acc);
    b.varWrite(bestIdx, b.intConstant(DType::I64, 0));
    b.varWrite(bestVal, b.constant(acc, -kInf));
    int k = d.loop(v.len);
    const int xv = x(k, -1), cur = b.varRead(bestVal);
    const int rep = replaces(xv, cur);
    b.varWrite(bestVal, b.select(acc, rep, xv, cur));
    b.varWrite(bestIdx,
               b.select(DType::I64, rep, b.index(Affine{}.add(1, -1, k)), b.varRead(bestIdx)));
    b.endLoop();
    const int best = b.varRead(bestIdx);
    k = d.loop(v.len, vectorOf(t));
    oneHot(k, -1, best);
    b.endLoop();
  } else {
    const int valBuf = d.scratch(valRow), idxBuf = d.scratch(idxRow);
    int j = d.loop(v.inner, vectorOf(acc));
    Affine row = rowMajor(d, o, v.inner, j);
    b.store(valBuf, row, b.constant(acc, -kInf));
    b.store(idxBuf, row, b.intConstant(DType::I64, 0));
    b.endLoop();
    int k = d.loop(v.len);
    j = d.loop(v.inner, vectorOf(acc));
    row = rowMajor(d, o, v.inner, j);
    const int xv = x(k, j), cur = b.load(valBuf, row);
    const int rep = replaces(xv, cur);
    b.store(valBuf, row, b.select(acc, rep, xv, cur));
    b.store(idxBuf, row,
            b.select(DType::I64, rep, b.index(Affine{}.add(1, -1, k)), b.load(idxBuf, row)));
    b.endLoop();
    b.endLoop();
    k = d.loop(v.len);
    j = d.loop(v.inner, vectorOf(t));
    oneHot(k, j, b.load(idxBuf, rowMajor(d, o, v.inner, j)));
    b.endLoop();
    b.endLoop();
  }
  b.endLoop();
  d.endKernel();
  return Status::success();
}

} // namespace kiln::lower
