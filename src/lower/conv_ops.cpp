// Kernel IR lowerings of Conv and ConvTranspose in every form (lower/ops.h),
// the family's lookup (pools in pool_ops.cpp, MatMul in matmul_ops.cpp)
// and the lowering of Fused conv/matmul nodes (the core op, then its
// epilogue on each finished row).
//
// Both convolutions accumulate into memory a row (Conv) or a plane
// (ConvTranspose) at a time, in the order the interpreter sums: bias, then
// each input channel, kernel tap by kernel tap, a weighted input row added
// into the accumulator row (Conv adds the taps of a short static last
// kernel axis in a register first, in the same order). The innermost loop
// runs over contiguous positions of the window's last axis; its interior
// (every tap inside the input) needs no bounds checks and is vectorized,
// the borders on either side check each element. The accumulator is output 0 itself for f32 and
// f64, an f32 scratch buffer for the 16-bit floats (rounded once at the
// end, as the interpreter does).
#include "lower/conv_common.h"
#include "lower/ops.h"

namespace kiln::lower {

using convlower::Epilogue;
using convlower::I64;
using convlower::WindowAxis;
using kir::Affine;
using kir::Opcode;
using kir::Schedule;

// The family's other files (pool_ops.cpp, matmul_ops.cpp).
namespace convlower {
Status lowerMaxPool(DispatchBuilder &d);
Status lowerAveragePool(DispatchBuilder &d);
Status lowerLpPool(DispatchBuilder &d);
Status lowerGlobalAveragePool(DispatchBuilder &d);
Status lowerGlobalMaxPool(DispatchBuilder &d);
Status lowerGlobalLpPool(DispatchBuilder &d);
Status lowerMatMul(DispatchBuilder &d);
Status emitMatMul(DispatchBuilder &d, int a, int b);
} // namespace convlower

namespace {

Status lowerConv(DispatchBuilder &d);
Status lowerConvTranspose(DispatchBuilder &d);

} // namespace

LowerFn convLowering(OpKind op) {
  using namespace convlower;
  switch (op) {
  case OpKind::Conv:
    return lowerConv;
  case OpKind::ConvTranspose:
    return lowerConvTranspose;
  case OpKind::MaxPool:
    return lowerMaxPool;
  case OpKind::AveragePool:
    return lowerAveragePool;
  case OpKind::LpPool:
    return lowerLpPool;
  case OpKind::GlobalAveragePool:
    return lowerGlobalAveragePool;
  case OpKind::GlobalMaxPool:
    return lowerGlobalMaxPool;
  case OpKind::GlobalLpPool:
    return lowerGlobalLpPool;
  case OpKind::MatMul:
    return lowerMatMul;
  default:
    return nullptr;
  }
}

namespace {

Affine plus(Affine a, const Affine &b) {
  a.terms.insert(a.terms.end(), b.terms.begin(), b.terms.end());
  return a;
}

// Conv unrolls a static last kernel axis up to this many taps.
constexpr int64_t kMaxUnrolledTaps = 16;

// The affine constant c (empty for 0).
Affine constantAffine(int64_t c) {
  return c == 0 ? Affine{} : Affine::constant(c);
}

bool isZero(DispatchBuilder &d, SVal v) {
  auto k = d.constant(v);
  return k && *k == 0;
}

// Product of dims[from..].
SVal productFrom(DispatchBuilder &d, const std::vector<SVal> &dims, size_t from) {
  return d.product(std::vector<SVal>(dims.begin() + long(std::min(from, dims.size())), dims.end()));
}

// Row-major strides of dims.
std::vector<SVal> stridesOf(DispatchBuilder &d, const std::vector<SVal> &dims) {
  std::vector<SVal> s(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) s[i] = productFrom(d, dims, i + 1);
  return s;
}

// Checks an explicit kernel_shape attribute against the weight's spatial dims.
Status checkKernelShape(DispatchBuilder &d, const Node &node, const std::vector<SVal> &kernel) {
  if (!node.hasAttr("kernel_shape")) return Status::success();
  const std::vector<int64_t> ks = node.getInts("kernel_shape");
  if (ks.size() != kernel.size())
    return makeError("kernel_shape has ", ks.size(), " values, the weight has ", kernel.size(),
                     " spatial dims");
  for (size_t i = 0; i < ks.size(); ++i)
    d.check(d.eq(kernel[i], d.c(ks[i])),
            "kernel_shape does not match the weight's spatial dims (axis " + std::to_string(i) +
                ": {} vs {})",
            {d.c(ks[i]), kernel[i]});
  return Status::success();
}

// The buffer products accumulate in: output 0 when it has the
// accumulator's type, else a scratch buffer of `numel` elements (declared
// here, before the kernels).
int accumulatorBuffer(DispatchBuilder &d, DType acc, SVal numel) {
  if (d.outputType(0) == acc) return d.out(0);
  return d.scratch(d.addScratch(acc, numel));
}

// The operand checks and sizes both convolutions share.
struct ConvShape {
  int rank = 0;
  size_t n = 0; // spatial axes
  DType type = DType::F32, acc = DType::F32;
  std::vector<SVal> x, w; // dims of input and weight
  SVal group;
};

Expected<ConvShape> convShape(DispatchBuilder &d, const Node &node, int xi, int wi,
                              const char *op) {
  ConvShape s;
  s.rank = d.inputRank(xi);
  if (s.rank < 3) return makeError(op, " needs an input of known rank >= 3 ([N, C, spatial...])");
  if (d.inputRank(wi) != s.rank)
    return makeError(op, " weight has rank ", d.inputRank(wi), ", expected ", s.rank,
                     " like input X");
  s.type = d.inputType(xi);
  if (!isFloat(s.type)) return makeError(op, " of ", dtypeName(s.type), " is not supported");
  s.acc = convlower::accumulatorType(s.type);
  s.n = size_t(s.rank - 2);
  const int64_t group = node.getInt("group");
  if (group <= 0) return makeError("group must be > 0, got ", group);
  s.group = d.c(group);
  s.x = d.dims(xi);
  s.w = d.dims(wi);
  return s;
}

// ---- Conv ---------------------------------------------------------------------------

// Emits Conv `conv` reading node inputs xi, wi and bi (-1: no bias), with
// the epilogue of a Fused node.
Status emitConv(DispatchBuilder &d, const Node &conv, int xi, int wi, int bi) {
  KILN_ASSIGN_OR_RETURN(ConvShape s, convShape(d, conv, xi, wi, "Conv"));
  const SVal N = s.x[0], C = s.x[1], M = s.w[0];
  d.check(d.land(d.eq(d.floorMod(C, s.group), d.c(0)), d.eq(d.floorMod(M, s.group), d.c(0))),
          "group {} does not divide the {} input and {} output channels", {s.group, C, M});
  const SVal Cg = d.floorDiv(C, s.group), Mg = d.floorDiv(M, s.group);
  d.check(d.eq(d.mul(s.w[1], s.group), C),
          "weight has {} input channels per group, expected {} (input X has {} channels, group {})",
          {s.w[1], Cg, C, s.group});
  const std::vector<SVal> in(s.x.begin() + 2, s.x.end()), kernel(s.w.begin() + 2, s.w.end());
  KILN_RETURN_IF_ERROR(checkKernelShape(d, conv, kernel));
  KILN_ASSIGN_OR_RETURN(std::vector<WindowAxis> win,
                        convlower::convWindow(d, conv, in, kernel, false));

  std::vector<SVal> outDims = {N, M}, out;
  for (const WindowAxis &a : win) out.push_back(a.out);
  outDims.insert(outDims.end(), out.begin(), out.end());
  KILN_ASSIGN_OR_RETURN(Epilogue ep, convlower::planEpilogue(d, outDims));
  if (bi >= 0) d.check(d.eq(d.numel(bi), M), "bias has {} values, expected {}", {d.numel(bi), M});
  d.setOutput(0, outDims);
  const int acc = accumulatorBuffer(d, s.acc, d.product(outDims));

  const size_t n = s.n, last = n - 1;
  const SVal inPlane = d.product(in), kSize = d.product(kernel);
  const SVal outW = out[last], inW = in[last], kW = kernel[last];
  const std::vector<SVal> inStride = stridesOf(d, in), kStride = stridesOf(d, kernel);
  std::vector<SVal> rowDims = {N, M};
  rowDims.insert(rowDims.end(), out.begin(), out.end() - 1);
  const SVal rows = d.product(rowDims);
  const WindowAxis &wl = win[last];
  const convlower::Interior mid =
      convlower::interiorRange(d, outW, inW, kW, wl.stride, wl.dilation, wl.padBegin);
  const DType xt = s.type, wt = d.inputType(wi);

  // One parallel iteration per output row (n, m, outer output position).
  kir::KernelBuilder &b = d.beginKernel(rows, d.mul(d.mul(Cg, kSize), outW));
  I64 i{b};
  const int r = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int rv = b.index(Affine{}.add(1, -1, r));
  const std::vector<int> coords = convlower::unflatten(d, rv, rowDims);
  const int nIdx = coords[0], mIdx = coords[1];
  const int g = i.div(mIdx, d.value(Mg));
  const int xBase = i.mul(i.add(i.mul(nIdx, d.value(C)), i.mul(g, d.value(Cg))), d.value(inPlane));
  const int wBase = i.mul(mIdx, d.value(d.mul(Cg, kSize)));
  const int accRow = i.mul(rv, d.value(outW));

  // The row starts at the bias.
  const int init =
      bi >= 0 ? convlower::convert(b, s.acc, d.inputType(bi), b.load(d.in(bi), Affine{}, mIdx))
              : b.constant(s.acc, 0);
  int j = d.loop(outW, {Schedule::Kind::Vector, 8});
  b.store(acc, Affine{}.add(1, -1, j), init, accRow);
  b.endLoop();

  const int c = d.loop(Cg);
  // Outer kernel axes: input rows inside the input (the padding adds 0).
  int xRow = xBase;
  Affine wTap = d.term(kSize, c);
  for (size_t a = 0; a < last; ++a) {
    const int k = d.loop(win[a].kernel);
    Affine pos = Affine{}.add(win[a].dilation, -1, k);
    d.addTerm(pos, win[a].padBegin, -1, -1);
    const int iy = i.add(b.index(pos), i.mul(coords[2 + a], i.c(win[a].stride)));
    b.beginIf(i.inRange(iy, d.value(win[a].in)));
    xRow = i.add(xRow, i.mul(iy, d.value(inStride[a])));
    d.addTerm(wTap, kStride[a], k);
  }
  // The taps of the last kernel axis, each as its weight and its column
  // offset (kx * dilation). A short static axis is unrolled, so each
  // output element sums its taps in a register; a long or symbolic one
  // loops over kx outside the row loops.
  std::vector<std::pair<int, Affine>> lastTaps;
  const std::optional<int64_t> kWidth = d.constant(kW);
  const bool unrolled = kWidth && *kWidth <= kMaxUnrolledTaps;
  if (unrolled) {
    for (int64_t u = 0; u < *kWidth; ++u)
      lastTaps.emplace_back(
          convlower::convert(b, s.acc, wt, b.load(d.in(wi), plus(wTap, constantAffine(u)), wBase)),
          constantAffine(u * wl.dilation));
  } else {
    const int kx = d.loop(kW);
    lastTaps.emplace_back(
        convlower::convert(b, s.acc, wt,
                           b.load(d.in(wi), plus(wTap, Affine{}.add(1, -1, kx)), wBase)),
        Affine{}.add(wl.dilation, -1, kx));
  }
  const Affine xChannel = d.term(inPlane, c);
  // acc[ox] += sum over the taps of w * x[ox * stride + offset - padBegin]
  // for ox in [start, start + count).
  auto taps = [&](SVal start, SVal count, bool checked) {
    if (isZero(d, count)) return;
    const int jj = d.loop(count, checked ? Schedule{} : Schedule{Schedule::Kind::Vector, 8});
    Affine ox = d.term(start);
    ox.add(1, -1, jj);
    Affine first; // the column of the tap at offset 0
    d.addTerm(first, start, -1, wl.stride);
    first.add(wl.stride, -1, jj);
    d.addTerm(first, wl.padBegin, -1, -1);
    int sum = b.load(acc, ox, accRow);
    for (const auto &[wv, offset] : lastTaps) {
      const Affine col = plus(first, offset);
      int xv;
      if (checked) {
        const int ic = b.index(col);
        const int valid = i.inRange(ic, d.value(inW));
        const int safe = i.select(valid, ic, i.c(0));
        xv = convlower::convert(b, s.acc, xt, b.load(d.in(xi), xChannel, i.add(xRow, safe)));
        xv = b.select(s.acc, valid, xv, b.constant(s.acc, 0));
      } else {
        xv = convlower::convert(b, s.acc, xt, b.load(d.in(xi), plus(xChannel, col), xRow));
      }
      sum = b.binary(Opcode::Add, s.acc, sum, b.binary(Opcode::Mul, s.acc, wv, xv));
    }
    b.store(acc, ox, sum, accRow);
    b.endLoop();
  };
  taps(d.c(0), mid.lo, true);
  taps(mid.lo, d.sub(mid.hi, mid.lo), false);
  taps(mid.hi, d.sub(outW, mid.hi), true);
  if (!unrolled) b.endLoop(); // kx
  for (size_t a = 0; a < last; ++a) {
    b.endIf();
    b.endLoop();
  }
  b.endLoop(); // c
  KILN_RETURN_IF_ERROR(convlower::emitRowOutput(d, ep, acc, s.acc, accRow, accRow, outW,
                                                std::vector<int>(coords.begin(), coords.end())));
  b.endLoop(); // r
  d.endKernel();
  return Status::success();
}

Status lowerConv(DispatchBuilder &d) {
  return emitConv(d, d.node(), 0, 1, d.input(2) ? 2 : -1);
}

// ---- ConvTranspose ------------------------------------------------------------------

// The transposed window of one axis: output position = input position *
// stride + tap * dilation - padBegin (window.h's WindowAxis, roles swapped).
Expected<std::vector<WindowAxis>> transposeWindow(DispatchBuilder &d, const Node &node,
                                                  const std::vector<SVal> &in,
                                                  const std::vector<SVal> &kernel) {
  const size_t n = in.size();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, convlower::intsAttr(node, "strides", n, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dilations,
                        convlower::intsAttr(node, "dilations", n, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, convlower::intsAttr(node, "pads", 2 * n, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> outPad,
                        convlower::intsAttr(node, "output_padding", n, 0));
  const std::string autoPad = node.getString("auto_pad");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return makeError("unknown auto_pad '", autoPad, "'");
  std::vector<int64_t> outShape = node.getInts("output_shape");
  // output_shape may list only the spatial dims or all of them.
  if (outShape.size() == n + 2) outShape.erase(outShape.begin(), outShape.begin() + 2);
  if (!outShape.empty() && outShape.size() != n)
    return makeError("output_shape has ", outShape.size(), " values, expected ", n);
  const bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  std::vector<WindowAxis> axes(n);
  for (size_t i = 0; i < n; ++i) {
    WindowAxis &a = axes[i];
    if (strides[i] <= 0 || dilations[i] <= 0) return makeError("strides and dilations must be > 0");
    if (auto k = d.constant(kernel[i]); k && *k <= 0)
      return makeError("kernel dims must be > 0, got ", *k, " on spatial axis ", i);
    d.check(d.lt(d.c(0), kernel[i]), "kernel dims must be > 0, got {}", {kernel[i]});
    a.in = in[i];
    a.kernel = kernel[i];
    a.stride = strides[i];
    a.dilation = dilations[i];
    a.span = d.add(d.mul(d.sub(kernel[i], d.c(1)), d.c(a.dilation)), d.c(1));
    const SVal full =
        d.add(d.add(d.mul(d.c(a.stride), d.sub(in[i], d.c(1))), d.c(outPad[i])), a.span);
    if (!outShape.empty() || same) {
      // The padding is whatever makes the full result the requested size;
      // the odd element goes to the end for SAME_UPPER, else to the start.
      a.out = !outShape.empty() ? d.c(outShape[i]) : d.mul(in[i], d.c(a.stride));
      const SVal total = d.sub(full, a.out);
      const SVal half = d.floorDiv(total, d.c(2));
      a.padBegin = autoPad == "SAME_UPPER" ? half : d.sub(total, half);
      a.padEnd = d.sub(total, a.padBegin);
    } else {
      a.padBegin = d.c(autoPad == "VALID" ? 0 : pads[i]);
      a.padEnd = d.c(autoPad == "VALID" ? 0 : pads[i + n]);
      a.out = d.sub(d.sub(full, a.padBegin), a.padEnd);
    }
    d.check(d.le(d.c(0), a.out),
            "spatial axis " + std::to_string(i) + " has negative output size {}", {a.out});
  }
  return axes;
}

// y[n, m] = bias[m] + the sum over the group's input channels c, input
// positions and taps of x[n, c, pos] * w[c, m mod M/group, tap], scattered
// to pos * stride + tap * dilation - padBegin. One parallel iteration owns
// one output plane.
Status lowerConvTranspose(DispatchBuilder &d) {
  const Node &node = d.node();
  const int bi = d.input(2) ? 2 : -1;
  KILN_ASSIGN_OR_RETURN(ConvShape s, convShape(d, node, 0, 1, "ConvTranspose"));
  const SVal N = s.x[0], C = s.x[1], Mg = s.w[1];
  d.check(d.eq(d.floorMod(C, s.group), d.c(0)), "group {} does not divide the {} input channels",
          {s.group, C});
  d.check(d.eq(s.w[0], C), "weight has {} input channels, input X has {}", {s.w[0], C});
  const SVal M = d.mul(Mg, s.group), Cg = d.floorDiv(C, s.group);
  const std::vector<SVal> in(s.x.begin() + 2, s.x.end()), kernel(s.w.begin() + 2, s.w.end());
  KILN_RETURN_IF_ERROR(checkKernelShape(d, node, kernel));
  KILN_ASSIGN_OR_RETURN(std::vector<WindowAxis> win, transposeWindow(d, node, in, kernel));
  std::vector<SVal> outDims = {N, M}, out;
  for (const WindowAxis &a : win) out.push_back(a.out);
  outDims.insert(outDims.end(), out.begin(), out.end());
  if (bi >= 0) d.check(d.eq(d.numel(bi), M), "bias has {} values, expected {}", {d.numel(bi), M});
  d.setOutput(0, outDims);
  const int acc = accumulatorBuffer(d, s.acc, d.product(outDims));
  KILN_ASSIGN_OR_RETURN(Epilogue ep, convlower::planEpilogue(d, outDims));

  const size_t n = s.n, last = n - 1;
  const SVal inPlane = d.product(in), kSize = d.product(kernel), outPlane = d.product(out);
  const SVal inW = in[last], outW = out[last], kW = kernel[last];
  const std::vector<SVal> inStride = stridesOf(d, in), kStride = stridesOf(d, kernel),
                          outStride = stridesOf(d, out);
  const SVal planes = d.mul(N, M);
  const WindowAxis &wl = win[last];
  const convlower::Interior mid =
      convlower::interiorRange(d, inW, outW, kW, wl.stride, wl.dilation, wl.padBegin);
  const DType xt = s.type, wt = d.inputType(1);

  kir::KernelBuilder &b = d.beginKernel(planes, d.mul(d.mul(Cg, inPlane), kSize));
  I64 i{b};
  const int p = d.loop(planes, {Schedule::Kind::Parallel, 1});
  const int pv = b.index(Affine{}.add(1, -1, p));
  const int mIdx = i.mod(pv, d.value(M)), nIdx = i.div(pv, d.value(M));
  const int g = i.div(mIdx, d.value(Mg)), mg = i.mod(mIdx, d.value(Mg));
  const int xBase = i.mul(i.add(i.mul(nIdx, d.value(C)), i.mul(g, d.value(Cg))), d.value(inPlane));
  const int wBase = i.mul(i.add(i.mul(i.mul(g, d.value(Cg)), d.value(Mg)), mg), d.value(kSize));
  const int accPlane = i.mul(pv, d.value(outPlane));

  const int init =
      bi >= 0 ? convlower::convert(b, s.acc, d.inputType(bi), b.load(d.in(bi), Affine{}, mIdx))
              : b.constant(s.acc, 0);
  int j = d.loop(outPlane, {Schedule::Kind::Vector, 8});
  b.store(acc, Affine{}.add(1, -1, j), init, accPlane);
  b.endLoop();

  const int c = d.loop(Cg);
  Affine xRow = d.term(inPlane, c);
  Affine wTap = d.term(d.mul(Mg, kSize), c);
  std::vector<int> iy(last);
  for (size_t a = 0; a < last; ++a) {
    iy[a] = d.loop(in[a]);
    d.addTerm(xRow, inStride[a], iy[a]);
  }
  int yRow = accPlane;
  for (size_t a = 0; a < last; ++a) {
    const int k = d.loop(win[a].kernel);
    d.addTerm(wTap, kStride[a], k);
    Affine pos = Affine{}.add(win[a].stride, -1, iy[a]).add(win[a].dilation, -1, k);
    d.addTerm(pos, win[a].padBegin, -1, -1);
    const int oy = b.index(pos);
    b.beginIf(i.inRange(oy, d.value(win[a].out)));
    yRow = i.add(yRow, i.mul(oy, d.value(outStride[a])));
  }
  const int kx = d.loop(kW);
  const int wv =
      convlower::convert(b, s.acc, wt, b.load(d.in(1), plus(wTap, Affine{}.add(1, -1, kx)), wBase));
  // acc[ix * stride + kx * dilation - padBegin] += w * x[ix] for ix in
  // [start, start + count).
  auto taps = [&](SVal start, SVal count, bool checked) {
    if (isZero(d, count)) return;
    const int jj = d.loop(count, checked ? Schedule{} : Schedule{Schedule::Kind::Vector, 8});
    Affine ix = d.term(start);
    ix.add(1, -1, jj);
    const int xv = convlower::convert(b, s.acc, xt, b.load(d.in(0), plus(xRow, ix), xBase));
    const int prod = b.binary(Opcode::Mul, s.acc, wv, xv);
    Affine col;
    d.addTerm(col, start, -1, wl.stride);
    col.add(wl.stride, -1, jj).add(wl.dilation, -1, kx);
    d.addTerm(col, wl.padBegin, -1, -1);
    if (checked) {
      const int oc = b.index(col);
      b.beginIf(i.inRange(oc, d.value(outW)));
      const int at = i.add(yRow, oc);
      b.store(acc, Affine{}, b.binary(Opcode::Add, s.acc, b.load(acc, Affine{}, at), prod), at);
      b.endIf();
    } else {
      b.store(acc, col, b.binary(Opcode::Add, s.acc, b.load(acc, col, yRow), prod), yRow);
    }
    b.endLoop();
  };
  taps(d.c(0), mid.lo, true);
  taps(mid.lo, d.sub(mid.hi, mid.lo), false);
  taps(mid.hi, d.sub(inW, mid.hi), true);
  b.endLoop(); // kx
  for (size_t a = 0; a < last; ++a) {
    b.endIf();
    b.endLoop();
  }
  for (size_t a = 0; a < last; ++a) b.endLoop(); // input rows
  b.endLoop();                                   // c
  KILN_RETURN_IF_ERROR(
      convlower::emitRowOutput(d, ep, acc, s.acc, accPlane, accPlane, outPlane, {}));
  b.endLoop(); // p
  d.endKernel();
  return Status::success();
}

} // namespace

// ---- Fused conv / matmul ------------------------------------------------------------

Status lowerFusedConvOrMatMul(DispatchBuilder &d) {
  const Node &node = d.node();
  const Graph *body = node.op() == OpKind::Fused ? node.getGraph("body") : nullptr;
  if (!body || body->nodes().empty()) return makeError("not a fused conv/matmul node");
  const std::string kind = node.getString("kind");
  const Node &core = *body->nodes().front();
  auto inputOf = [&](int i) {
    const Value *v = core.input(i);
    for (size_t k = 0; v && k < body->inputs().size(); ++k)
      if (body->inputs()[k] == v) return int(k);
    return -1;
  };
  for (int i = 0; i < core.numInputs(); ++i)
    if (core.input(i) && inputOf(i) < 0)
      return makeError("the fused ", kind, "'s operand ", i, " is not a region input");
  if (kind == "conv" && core.op() == OpKind::Conv)
    return emitConv(d, core, inputOf(0), inputOf(1), core.input(2) ? inputOf(2) : -1);
  if (kind == "matmul" && core.op() == OpKind::MatMul)
    return convlower::emitMatMul(d, inputOf(0), inputOf(1));
  return makeError("fused kind '", kind, "' with ", core.describe(),
                   " is not a conv or matmul region");
}

} // namespace kiln::lower
