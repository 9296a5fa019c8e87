// Kernel IR lowerings of the pools (lower/ops.h, conv family): MaxPool
// (with its optional argmax Indices in either storage order), AveragePool,
// LpPool, and GlobalAveragePool, GlobalMaxPool, GlobalLpPool over any rank.
//
// A windowed pool runs one parallel iteration per output row; each output
// position reduces its window's taps in registers (vars). Taps of the outer
// axes outside the input are skipped once per position; along the last
// axis the row splits into an interior, where every tap is inside the
// input, and the borders, which check each tap. Accumulation follows the
// interpreter: f32 for f32 and the 16-bit floats, f64 for f64 and for
// LpPool's sums of powers, the element type for integer MaxPool.
#include "lower/conv_common.h"
#include "lower/ops.h"

#include <limits>

namespace kiln::lower::convlower {

using kir::Affine;
using kir::Opcode;
using kir::Schedule;

namespace {

enum class PoolKind { Max, Average, Lp };

bool isZeroSVal(DispatchBuilder &d, SVal v) {
  auto k = d.constant(v);
  return k && *k == 0;
}

// The smallest value of `t` (numeric_limits::lowest).
int lowestOf(kir::KernelBuilder &b, DType t) {
  switch (t) {
  case DType::F32:
    return b.constant(t, -double(std::numeric_limits<float>::max()));
  case DType::F64:
    return b.constant(t, -std::numeric_limits<double>::max());
  case DType::I8:
    return b.intConstant(t, std::numeric_limits<int8_t>::lowest());
  case DType::I16:
    return b.intConstant(t, std::numeric_limits<int16_t>::lowest());
  case DType::I32:
    return b.intConstant(t, std::numeric_limits<int32_t>::lowest());
  case DType::I64:
    return b.intConstant(t, std::numeric_limits<int64_t>::lowest());
  default:
    return b.intConstant(t, 0); // unsigned
  }
}

// x^p for a non-negative f64 x: exact products for p = 1 and 2 (what pow
// gives there), pow otherwise.
int powerOf(kir::KernelBuilder &b, int x, int64_t p) {
  if (p == 1) return x;
  if (p == 2) return b.binary(Opcode::Mul, DType::F64, x, x);
  return b.binary(Opcode::Pow, DType::F64, x, b.constant(DType::F64, double(p)));
}

// sum^(1/p) for the f64 sum of powers.
int rootOf(kir::KernelBuilder &b, int sum, int64_t p) {
  if (p == 1) return sum;
  if (p == 2) return b.unary(Opcode::Sqrt, DType::F64, sum);
  return b.binary(Opcode::Pow, DType::F64, sum, b.constant(DType::F64, 1.0 / double(p)));
}

// The LpPool result of the f64 `root` as the interpreter rounds it: to the
// compute type (f32 unless f64), then to `t`.
int lpResult(kir::KernelBuilder &b, DType t, int root) {
  const DType compute = t == DType::F64 ? DType::F64 : DType::F32;
  return convert(b, t, compute, convert(b, compute, DType::F64, root));
}

// The number of taps k in [0, kernel) of a window at output position `o`
// (an i64 value) that fall inside the input or its padding, i.e. before
// in + padEnd (none falls before -padBegin).
int paddedTaps(DispatchBuilder &d, I64 &i, const WindowAxis &a, int o) {
  const int room =
      i.sub(d.value(d.add(d.add(a.in, a.padEnd), a.padBegin)), i.mul(o, i.c(a.stride)));
  const int taps = i.floorDivConst(i.add(room, i.c(a.dilation - 1)), a.dilation);
  const int k = d.value(a.kernel);
  const int atMost = i.select(i.lt(taps, k), taps, k);
  return i.select(i.lt(atMost, i.c(0)), i.c(0), atMost);
}

class WindowPool {
public:
  WindowPool(DispatchBuilder &d, PoolKind kind) : d_(d), kind_(kind) {}
  Status lower();

private:
  // The output positions [start, start + count) of the current row.
  void positions(SVal start, SVal count, bool checked);
  // Folds tap value v (of the accumulator type; valid: a bool value or -1
  // for always) with flat input index `flat` (for Indices) into the vars.
  void fold(int v, int valid, int flat);
  void finish(int ox);

  DispatchBuilder &d_;
  PoolKind kind_;
  DType t_ = DType::F32, acc_ = DType::F32;
  size_t n_ = 0;
  std::vector<WindowAxis> win_;
  std::vector<SVal> inStride_, cmStride_;
  bool indices_ = false, columnMajor_ = false, countPad_ = false;
  int64_t p_ = 2;
  // Kernel state.
  std::vector<int> coords_;
  int xPlane_ = -1, cmPlane_ = -1, yRow_ = -1, padOuter_ = -1;
  int accVar_ = -1, countVar_ = -1, idxVar_ = -1;
};

Status WindowPool::lower() {
  const Node &node = d_.node();
  const int rank = d_.inputRank(0);
  const char *op = kind_ == PoolKind::Max       ? "MaxPool"
                   : kind_ == PoolKind::Average ? "AveragePool"
                                                : "LpPool";
  if (rank < 3) return makeError(op, " needs an input of known rank >= 3 ([N, C, spatial...])");
  t_ = d_.inputType(0);
  if (kind_ == PoolKind::Max ? (t_ == DType::Bool || t_ == DType::String) : !isFloat(t_))
    return makeError(op, " of ", dtypeName(t_), " is not supported");
  acc_ = kind_ == PoolKind::Lp ? DType::F64 : accumulatorType(t_);
  n_ = size_t(rank - 2);
  const std::vector<int64_t> ks = node.getInts("kernel_shape");
  if (ks.size() != n_)
    return makeError("kernel_shape has ", ks.size(), " values, input X has ", n_, " spatial dims");
  if (kind_ == PoolKind::Lp) {
    p_ = node.getInt("p");
    if (p_ <= 0) return makeError("p must be positive, got ", p_);
  }
  countPad_ = kind_ == PoolKind::Average && node.getInt("count_include_pad") != 0;
  indices_ = kind_ == PoolKind::Max && node.numOutputs() > 1 && node.output(1);
  columnMajor_ = kind_ == PoolKind::Max && node.getInt("storage_order") != 0;
  const std::vector<SVal> xd = d_.dims(0);
  const std::vector<SVal> in(xd.begin() + 2, xd.end());
  std::vector<SVal> kernel;
  for (int64_t k : ks) kernel.push_back(d_.c(k));
  const bool ceil = node.getInt("ceil_mode") != 0;
  KILN_ASSIGN_OR_RETURN(win_, convWindow(d_, node, in, kernel, ceil));

  std::vector<SVal> outDims = {xd[0], xd[1]}, rowDims = {xd[0], xd[1]};
  for (size_t a = 0; a < n_; ++a) {
    outDims.push_back(win_[a].out);
    if (a + 1 < n_) rowDims.push_back(win_[a].out);
  }
  d_.setOutput(0, outDims);
  // An Indices output nobody reads is still declared (and left unwritten).
  if (kind_ == PoolKind::Max && node.numOutputs() > 1) d_.setOutput(1, outDims, DType::I64);
  for (size_t a = 0; a < n_; ++a) {
    inStride_.push_back(d_.product(std::vector<SVal>(in.begin() + long(a) + 1, in.end())));
    cmStride_.push_back(d_.product(std::vector<SVal>(in.begin(), in.begin() + long(a))));
  }
  const WindowAxis &wl = win_.back();
  const SVal outW = wl.out, rows = d_.product(rowDims);
  const Interior mid =
      interiorRange(d_, outW, wl.in, wl.kernel, wl.stride, wl.dilation, wl.padBegin);

  kir::KernelBuilder &b = d_.beginKernel(rows, d_.mul(outW, d_.product(kernel)));
  I64 i{b};
  accVar_ = b.addVar("acc", acc_);
  countVar_ = b.addVar("count", DType::I64);
  if (indices_) idxVar_ = b.addVar("best", DType::I64);
  const int r = d_.loop(rows, {Schedule::Kind::Parallel, 1});
  const int rv = b.index(Affine{}.add(1, -1, r));
  coords_ = unflatten(d_, rv, rowDims);
  const SVal inPlane = d_.product(in);
  const int plane = i.add(i.mul(coords_[0], d_.value(xd[1])), coords_[1]);
  xPlane_ = i.mul(plane, d_.value(inPlane));
  cmPlane_ = xPlane_;
  yRow_ = i.mul(rv, d_.value(outW));
  if (countPad_) {
    padOuter_ = i.c(1);
    for (size_t a = 0; a + 1 < n_; ++a)
      padOuter_ = i.mul(padOuter_, paddedTaps(d_, i, win_[a], coords_[2 + a]));
  }
  positions(d_.c(0), mid.lo, true);
  positions(mid.lo, d_.sub(mid.hi, mid.lo), false);
  positions(mid.hi, d_.sub(outW, mid.hi), true);
  b.endLoop();
  d_.endKernel();
  return Status::success();
}

void WindowPool::positions(SVal start, SVal count, bool checked) {
  if (isZeroSVal(d_, count)) return;
  kir::KernelBuilder &b = d_.kb();
  I64 i{b};
  const WindowAxis &wl = win_.back();
  const int j = d_.loop(count);
  Affine oxAt = d_.term(start);
  oxAt.add(1, -1, j);
  // The vars start empty.
  if (kind_ == PoolKind::Max && isFloat(t_))
    b.varWrite(accVar_, b.constant(acc_, -std::numeric_limits<double>::infinity()));
  else if (kind_ == PoolKind::Max)
    b.varWrite(accVar_, lowestOf(b, acc_));
  else
    b.varWrite(accVar_, b.constant(acc_, 0));
  b.varWrite(countVar_, i.c(0));
  if (indices_) b.varWrite(idxVar_, i.c(-1));

  int xRow = xPlane_, cmRow = cmPlane_;
  for (size_t a = 0; a + 1 < n_; ++a) {
    const int k = d_.loop(win_[a].kernel);
    Affine pos = Affine{}.add(win_[a].dilation, -1, k);
    d_.addTerm(pos, win_[a].padBegin, -1, -1);
    const int iy = i.add(b.index(pos), i.mul(coords_[2 + a], i.c(win_[a].stride)));
    b.beginIf(i.inRange(iy, d_.value(win_[a].in)));
    xRow = i.add(xRow, i.mul(iy, d_.value(inStride_[a])));
    if (columnMajor_) cmRow = i.add(cmRow, i.mul(iy, d_.value(cmStride_[a])));
  }
  const int kx = d_.loop(wl.kernel);
  Affine col;
  d_.addTerm(col, start, -1, wl.stride);
  col.add(wl.stride, -1, j).add(wl.dilation, -1, kx);
  d_.addTerm(col, wl.padBegin, -1, -1);
  int v, valid = -1, ic = -1;
  if (checked || indices_) ic = b.index(col);
  if (checked) {
    valid = i.inRange(ic, d_.value(wl.in));
    const int safe = i.select(valid, ic, i.c(0));
    v = b.load(d_.in(0), Affine{}, i.add(xRow, safe));
  } else {
    v = b.load(d_.in(0), col, xRow);
  }
  int flat = -1;
  if (indices_)
    flat = columnMajor_ ? i.add(cmRow, i.mul(ic, d_.value(cmStride_.back()))) : i.add(xRow, ic);
  fold(convert(b, acc_, t_, v), valid, flat);
  b.endLoop(); // kx
  for (size_t a = 0; a + 1 < n_; ++a) {
    b.endIf();
    b.endLoop();
  }
  finish(b.index(oxAt));
  b.endLoop(); // j
}

void WindowPool::fold(int v, int valid, int flat) {
  kir::KernelBuilder &b = d_.kb();
  I64 i{b};
  const int one = valid < 0 ? i.c(1) : i.select(valid, i.c(1), i.c(0));
  b.varWrite(countVar_, i.add(b.varRead(countVar_), one));
  const int acc = b.varRead(accVar_);
  int next = acc;
  switch (kind_) {
  case PoolKind::Max:
    if (indices_) {
      // The first maximum wins; a NaN replaces a number, so it propagates.
      const int best = b.varRead(idxVar_);
      int take = b.binary(Opcode::Or, DType::Bool, i.lt(best, i.c(0)),
                          b.compare(Opcode::Gt, acc_, v, acc));
      if (isFloat(acc_))
        take = b.binary(Opcode::Or, DType::Bool, take,
                        b.binary(Opcode::And, DType::Bool, b.compare(Opcode::Ne, acc_, v, v),
                                 b.compare(Opcode::Eq, acc_, acc, acc)));
      if (valid >= 0) take = i.land(valid, take);
      b.varWrite(idxVar_, i.select(take, flat, best));
      next = b.select(acc_, take, v, acc);
      b.varWrite(accVar_, next);
      return;
    }
    next = b.binary(Opcode::Max, acc_, acc, v);
    break;
  case PoolKind::Average:
    next = b.binary(Opcode::Add, acc_, acc, v);
    break;
  case PoolKind::Lp:
    next = b.binary(Opcode::Add, acc_, acc, powerOf(b, b.unary(Opcode::Abs, acc_, v), p_));
    break;
  }
  b.varWrite(accVar_, valid < 0 ? next : b.select(acc_, valid, next, acc));
}

void WindowPool::finish(int ox) {
  kir::KernelBuilder &b = d_.kb();
  I64 i{b};
  const int acc = b.varRead(accVar_), count = b.varRead(countVar_);
  const int zero = b.constant(acc_, 0);
  int result = acc;
  switch (kind_) {
  case PoolKind::Max: {
    // A window with no tap inside the input gives the lowest value.
    const int any = indices_ ? i.ge(b.varRead(idxVar_), i.c(0)) : i.lt(i.c(0), count);
    result = convert(b, t_, acc_, b.select(acc_, any, acc, lowestOf(b, acc_)));
    if (indices_) b.store(d_.out(1), Affine{}, b.varRead(idxVar_), i.add(yRow_, ox));
    break;
  }
  case PoolKind::Average: {
    int divisor = count;
    if (countPad_) divisor = i.mul(padOuter_, paddedTaps(d_, i, win_.back(), ox));
    const int mean = b.binary(Opcode::Div, acc_, acc, b.cast(acc_, DType::I64, divisor));
    result = convert(b, t_, acc_, b.select(acc_, i.lt(i.c(0), divisor), mean, zero));
    break;
  }
  case PoolKind::Lp:
    result = lpResult(b, t_, rootOf(b, acc, p_));
    break;
  }
  b.store(d_.out(0), Affine{}, result, i.add(yRow_, ox));
}

enum class GlobalKind { Average, Max, Lp };

// The reduction over every spatial position of each (batch, channel)
// plane, one plane per parallel iteration, in a vectorized loop.
Status lowerGlobalPool(DispatchBuilder &d, GlobalKind kind) {
  const int rank = d.inputRank(0);
  if (rank < 2) return makeError("global pooling needs an input of known rank >= 2");
  const DType t = d.inputType(0);
  if (!isFloat(t)) return makeError("global pooling of ", dtypeName(t), " is not supported");
  const DType acc = kind == GlobalKind::Lp ? DType::F64 : accumulatorType(t);
  int64_t p = 2;
  if (kind == GlobalKind::Lp) {
    p = d.node().getInt("p");
    if (p <= 0) return makeError("p must be positive, got ", p);
  }
  const std::vector<SVal> xd = d.dims(0);
  const SVal planes = d.mul(xd[0], xd[1]);
  const SVal size = d.product(std::vector<SVal>(xd.begin() + 2, xd.end()));
  if (kind != GlobalKind::Lp)
    d.check(d.lor(d.eq(planes, d.c(0)), d.ne(size, d.c(0))),
            "input X has empty spatial dims (the mean or max of nothing)");
  std::vector<SVal> outDims(xd.size(), d.c(1));
  outDims[0] = xd[0];
  outDims[1] = xd[1];
  d.setOutput(0, outDims);

  kir::KernelBuilder &b = d.beginKernel(planes, size);
  const int sum = b.addVar("acc", acc);
  const int plane = d.loop(planes, {Schedule::Kind::Parallel, 1});
  b.varWrite(sum, kind == GlobalKind::Max
                      ? b.constant(acc, -std::numeric_limits<double>::infinity())
                      : b.constant(acc, 0));
  const int k = d.loop(size, {Schedule::Kind::Vector, 8});
  Affine at = d.term(size, plane);
  at.add(1, -1, k);
  const int v = convert(b, acc, t, b.load(d.in(0), at));
  const int cur = b.varRead(sum);
  switch (kind) {
  case GlobalKind::Max:
    b.varWrite(sum, b.binary(Opcode::Max, acc, cur, v));
    break;
  case GlobalKind::Average:
    b.varWrite(sum, b.binary(Opcode::Add, acc, cur, v));
    break;
  case GlobalKind::Lp:
    b.varWrite(sum, b.binary(Opcode::Add, acc, cur, powerOf(b, b.unary(Opcode::Abs, acc, v), p)));
    break;
  }
  b.endLoop();
  const int total = b.varRead(sum);
  int result;
  if (kind == GlobalKind::Average)
    result = convert(b, t, acc,
                     b.binary(Opcode::Div, acc, total, b.cast(acc, DType::I64, d.value(size))));
  else if (kind == GlobalKind::Lp)
    result = lpResult(b, t, rootOf(b, total, p));
  else
    result = convert(b, t, acc, total);
  b.store(d.out(0), Affine{}.add(1, -1, plane), result);
  b.endLoop();
  d.endKernel();
  return Status::success();
}

} // namespace

Status lowerMaxPool(DispatchBuilder &d) {
  return WindowPool(d, PoolKind::Max).lower();
}
Status lowerAveragePool(DispatchBuilder &d) {
  return WindowPool(d, PoolKind::Average).lower();
}
Status lowerLpPool(DispatchBuilder &d) {
  return WindowPool(d, PoolKind::Lp).lower();
}
Status lowerGlobalAveragePool(DispatchBuilder &d) {
  return lowerGlobalPool(d, GlobalKind::Average);
}
Status lowerGlobalMaxPool(DispatchBuilder &d) {
  return lowerGlobalPool(d, GlobalKind::Max);
}
Status lowerGlobalLpPool(DispatchBuilder &d) {
  return lowerGlobalPool(d, GlobalKind::Lp);
}

} // namespace kiln::lower::convlower
