// Interpreter kernels: Conv, ConvInteger and QLinearConv (ConvTranspose lives
// in conv_transpose.cpp). All three run one direct-convolution loop nest: for
// each output channel and output row, every (input channel, kernel tap) pair
// adds a weighted, shifted input row into a row accumulator, so the innermost
// loop runs over contiguous output columns and the compiler can vectorize it.
// The integer ops subtract their zero points up front and run the same loops
// on int32 values with an int64 accumulator.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"
#include "interp/kernels/quantize.h"
#include "interp/kernels/window.h"

#include <algorithm>

namespace kiln {

namespace {

// A grouped convolution's sizes plus the loop tables derived from its window.
struct ConvPlan {
  int64_t batch = 0, inChannels = 0, outChannels = 0, group = 1;
  Window win;
  int64_t inPlane = 0, outPlane = 0, kernelSize = 0;
  int64_t outW = 0, kW = 0, strideW = 1; // the innermost spatial axis
  RowMap rows;                           // output rows -> input rows
};

// True for a 1x1 kernel with unit strides and no padding: a plain matrix
// product over the plane.
bool isPointwise(const Window &w) {
  for (size_t i = 0; i < w.rank(); ++i)
    if (w.kernel[i] != 1 || w.strides[i] != 1 || w.padBegin[i] != 0 || w.padEnd[i] != 0)
      return false;
  return true;
}

void planRows(ConvPlan &p) {
  Window w = p.win;
  // A pointwise conv is planned as one long row per plane, so that the
  // inner loop is long even when the planes' rows are short.
  if (isPointwise(w)) w = Window{{numelOf(w.in)}, {1}, {1}, {1}, {0}, {0}, {numelOf(w.out)}};
  p.inPlane = numelOf(w.in);
  p.outPlane = numelOf(w.out);
  p.kernelSize = numelOf(w.kernel);
  p.outW = w.out.back();
  p.kW = w.kernel.back();
  p.strideW = w.strides.back();
  p.rows = mapRows(w, w.out, w.in);
}

// acc[o] += wv * x[o * stride + off] for o in [lo, hi). The stride-1 case is
// split out and written in blocks of 8 so that compilers vectorize it even
// at -O2 (GCC's cheap cost model rejects a plain loop with a run-time trip
// count, but packs the unrolled block).
template <class T, class Acc>
inline void addRow(Acc *__restrict acc, const T *__restrict x, Acc wv, int64_t lo, int64_t hi,
                   int64_t off, int64_t stride) {
  if (stride == 1) {
    const T *src = x + off;
    int64_t o = lo;
    for (; o + 8 <= hi; o += 8)
      for (int u = 0; u < 8; ++u) acc[o + u] += wv * static_cast<Acc>(src[o + u]);
    for (; o < hi; ++o) acc[o] += wv * static_cast<Acc>(src[o]);
  } else {
    for (int64_t o = lo; o < hi; ++o) acc[o] += wv * static_cast<Acc>(x[o * stride + off]);
  }
}

// y[n, m, ...] = bias[m] + sum over the group's input channels and the kernel
// of w[m, c, k...] * x[n, c, pos(k)...]. x is [N, C, in...], w is
// [M, C/group, kernel...], y is [N, M, out...]; bias may be empty.
template <class T, class Acc, class Out>
void convLoops(const ConvPlan &p, const T *x, const T *w, const std::vector<Acc> &bias, Out *y) {
  int64_t cPerGroup = p.inChannels / p.group, mPerGroup = p.outChannels / p.group;
  std::vector<Acc> acc(p.outW);
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t m = 0; m < p.outChannels; ++m) {
      int64_t g = m / mPerGroup;
      const T *xGroup = x + (n * p.inChannels + g * cPerGroup) * p.inPlane;
      const T *wm = w + m * cPerGroup * p.kernelSize;
      Out *ym = y + (n * p.outChannels + m) * p.outPlane;
      for (size_t r = 0; r < p.rows.rowTaps.size(); ++r) {
        std::fill(acc.begin(), acc.end(), bias.empty() ? Acc(0) : bias[m]);
        for (int64_t c = 0; c < cPerGroup; ++c) {
          const T *xc = xGroup + c * p.inPlane;
          const T *wc = wm + c * p.kernelSize;
          for (auto [tap, inOff] : p.rows.rowTaps[r]) {
            const T *wrow = wc + tap * p.kW;
            for (int64_t kx = 0; kx < p.kW; ++kx)
              addRow(acc.data(), xc + inOff, static_cast<Acc>(wrow[kx]), p.rows.colLo[kx],
                     p.rows.colHi[kx], p.rows.colOff[kx], p.strideW);
          }
        }
        Out *yrow = ym + r * p.outW;
        for (int64_t o = 0; o < p.outW; ++o) yrow[o] = static_cast<Out>(acc[o]);
      }
    }
  }
}

// Checks x [N, C, ...] against w [M, C/group, kernel...] and builds the plan.
Expected<ConvPlan> makeConvPlan(const KernelContext &ctx, const Tensor &x, const Tensor &w) {
  KILN_ASSIGN_OR_RETURN(Shape64 in, spatialDims(ctx, x, "input X"));
  if (w.rank() != x.rank())
    return ctx.error("weight has shape ", shapeToString(w.shape()), ", expected rank ", x.rank(),
                     " like input X ", shapeToString(x.shape()));
  ConvPlan p;
  p.batch = x.dim(0);
  p.inChannels = x.dim(1);
  p.outChannels = w.dim(0);
  p.group = ctx.node().getInt("group");
  if (p.group <= 0 || p.inChannels % p.group != 0 || p.outChannels % p.group != 0)
    return ctx.error("group ", p.group, " does not divide the ", p.inChannels, " input and ",
                     p.outChannels, " output channels");
  if (w.dim(1) * p.group != p.inChannels)
    return ctx.error("weight has ", w.dim(1), " input channels per group, expected ",
                     p.inChannels / p.group, " (input X has ", p.inChannels, " channels, group ",
                     p.group, ")");
  Shape64 kernel(w.shape().begin() + 2, w.shape().end());
  if (ctx.node().hasAttr("kernel_shape") && ctx.node().getInts("kernel_shape") != kernel)
    return ctx.error("kernel_shape ", shapeToString(ctx.node().getInts("kernel_shape")),
                     " does not match the weight's spatial dims ", shapeToString(kernel));
  KILN_ASSIGN_OR_RETURN(p.win, makeWindow(ctx, in, kernel, false));
  planRows(p);
  return p;
}

Shape64 convOutShape(const ConvPlan &p) {
  Shape64 s = {p.batch, p.outChannels};
  s.insert(s.end(), p.win.out.begin(), p.win.out.end());
  return s;
}

// Reads an optional per-output-channel bias input.
Expected<std::vector<double>> readBias(const KernelContext &ctx, int input, int64_t channels) {
  if (!ctx.has(input)) return std::vector<double>{};
  const Tensor &b = ctx.in(input);
  if (b.numel() != channels)
    return ctx.error("bias has ", b.numel(), " values, expected ", channels);
  return toDoubles(b);
}

template <class T, class Acc>
Tensor runConv(const ConvPlan &p, const Tensor &x, const Tensor &w, const std::vector<double> &b) {
  std::vector<Acc> bias(b.begin(), b.end());
  Tensor y(DTypeOf<T>::value, convOutShape(p));
  convLoops<T, Acc, T>(p, x.data<T>(), w.data<T>(), bias, y.data<T>());
  return y;
}

// Conv on any float type: f16/bf16 are computed in f32 and rounded once at
// the end; f32 accumulates in float unless the f64 oracle is asked for.
Status convKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (!isFloat(x.dtype())) return ctx.error("expects a float input, got ", dtypeName(x.dtype()));
  KILN_ASSIGN_OR_RETURN(ConvPlan p, makeConvPlan(ctx, x, ctx.in(1)));
  KILN_ASSIGN_OR_RETURN(std::vector<double> bias, readBias(ctx, 2, p.outChannels));
  DType compute = x.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Tensor xc = convertTensor(x, compute), wc = convertTensor(ctx.in(1), compute);
  Tensor y;
  if (compute == DType::F64)
    y = runConv<double, double>(p, xc, wc, bias);
  else if (ctx.options().accumulateF64)
    y = runConv<float, double>(p, xc, wc, bias);
  else
    y = runConv<float, float>(p, xc, wc, bias);
  ctx.setOutput(0, convertTensor(y, x.dtype()));
  return Status::success();
}

// ---- integer convolutions ---------------------------------------------------

// The int32 convolution of ConvInteger and QLinearConv: inputs at `xIn` and
// `wIn`, zero points at `xZp` and `wZp`. Padding acts as the x zero point,
// i.e. as 0 once the zero point is subtracted.
Expected<Tensor> integerConv(KernelContext &ctx, ConvPlan &p, int xIn, int wIn, int xZp, int wZp,
                             const std::vector<int64_t> &bias) {
  const Tensor &x = ctx.in(xIn), &w = ctx.in(wIn);
  if (!is8Bit(x.dtype()) || !is8Bit(w.dtype()))
    return ctx.error("expects u8 or i8 inputs, got ", dtypeName(x.dtype()), " and ",
                     dtypeName(w.dtype()));
  KILN_ASSIGN_OR_RETURN(p, makeConvPlan(ctx, x, w));
  KILN_ASSIGN_OR_RETURN(auto xz, zeroPoints(ctx, xZp, 1, "x zero point"));
  KILN_ASSIGN_OR_RETURN(auto wz, zeroPoints(ctx, wZp, p.outChannels, "w zero point"));
  Tensor xi = minusZeroPoint(x, xz, 1);
  Tensor wi = minusZeroPoint(w, wz, w.numel() / std::max<int64_t>(1, p.outChannels));
  Tensor y(DType::I32, convOutShape(p));
  convLoops<int32_t, int64_t, int32_t>(p, xi.data<int32_t>(), wi.data<int32_t>(), bias,
                                       y.data<int32_t>());
  return y;
}

Status convIntegerKernel(KernelContext &ctx) {
  ConvPlan p;
  KILN_ASSIGN_OR_RETURN(Tensor y, integerConv(ctx, p, 0, 1, 2, 3, {}));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B).
Status qlinearConvKernel(KernelContext &ctx) {
  const Tensor &w = ctx.in(3);
  if (w.rank() < 1) return ctx.error("weight must have rank 3 or more");
  int64_t channels = w.dim(0);
  std::vector<int64_t> bias;
  if (ctx.has(8)) {
    if (ctx.in(8).numel() != channels)
      return ctx.error("bias has ", ctx.in(8).numel(), " values, expected ", channels);
    bias = toInt64s(ctx.in(8));
  }
  ConvPlan p;
  KILN_ASSIGN_OR_RETURN(Tensor acc, integerConv(ctx, p, 0, 3, 2, 5, bias));
  KILN_ASSIGN_OR_RETURN(auto xs, quantScales(ctx, 1, 1, "x scale"));
  KILN_ASSIGN_OR_RETURN(auto ws, quantScales(ctx, 4, channels, "w scale"));
  KILN_ASSIGN_OR_RETURN(auto ys, quantScales(ctx, 6, 1, "y scale"));
  KILN_ASSIGN_OR_RETURN(auto yz, zeroPoints(ctx, 7, 1, "y zero point"));
  DType outType = ctx.has(7) ? ctx.in(7).dtype() : ctx.in(0).dtype();
  if (!is8Bit(outType)) return ctx.error("y zero point must be u8 or i8");
  bool f64 = ctx.options().accumulateF64;
  Tensor y(outType, acc.shape());
  const int32_t *a = acc.data<int32_t>();
  for (int64_t i = 0; i < acc.numel(); ++i) {
    int64_t m = (i / p.outPlane) % channels;
    double scale = combinedScale(xs[0], ws[m], ys[0], f64);
    if (outType == DType::U8)
      y.data<uint8_t>()[i] = requantize<uint8_t>(a[i], scale, yz[0], f64);
    else
      y.data<int8_t>()[i] = requantize<int8_t>(a[i], scale, yz[0], f64);
  }
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

} // namespace

void registerConvKernels(KernelTable &t) {
  t.add(OpKind::Conv, convKernel);
  t.add(OpKind::ConvTranspose, convTransposeKernel);
  t.add(OpKind::ConvInteger, convIntegerKernel);
  t.add(OpKind::QLinearConv, qlinearConvKernel);
}

} // namespace kiln
