// Interpreter kernel: ConvTranspose, the gradient of Conv with respect to its
// input. Written as a scatter: every input row, weighted by each kernel tap,
// is added into the output row that tap lands on, so the innermost loop runs
// over contiguous input columns. Output size and padding follow the ONNX
// spec, including output_shape (padding derived from it) and auto_pad.
#include "interp/kernels/common.h"
#include "interp/kernels/window.h"

#include <algorithm>

namespace kiln {

namespace {

int64_t floorDiv2(int64_t v) {
  return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

// The transposed window: `in` is the input's spatial dims, `out` the output's;
// output position = input position * stride + tap * dilation - padBegin.
Expected<Window> transposeWindow(const KernelContext &ctx, const Shape64 &in,
                                 const Shape64 &kernel) {
  size_t n = in.size();
  Window w;
  w.in = in;
  w.kernel = kernel;
  KILN_ASSIGN_OR_RETURN(w.strides, spatialAttr(ctx, "strides", n, 1));
  KILN_ASSIGN_OR_RETURN(w.dilations, spatialAttr(ctx, "dilations", n, 1));
  KILN_ASSIGN_OR_RETURN(Shape64 pads, spatialAttr(ctx, "pads", 2 * n, 0));
  KILN_ASSIGN_OR_RETURN(Shape64 outPad, spatialAttr(ctx, "output_padding", n, 0));
  for (size_t i = 0; i < n; ++i)
    if (w.strides[i] <= 0 || w.dilations[i] <= 0 || kernel[i] <= 0)
      return ctx.error("strides, dilations and kernel dims must be > 0");
  std::string autoPad = ctx.node().getString("auto_pad");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return ctx.error("unknown auto_pad '", autoPad, "'");
  Shape64 outShape = ctx.node().getInts("output_shape");
  // output_shape may list only the spatial dims or all of them.
  if (outShape.size() == n + 2) outShape.erase(outShape.begin(), outShape.begin() + 2);
  if (!outShape.empty() && outShape.size() != n)
    return ctx.error("output_shape has ", outShape.size(), " values, expected ", n);

  w.padBegin.assign(pads.begin(), pads.begin() + n);
  w.padEnd.assign(pads.begin() + n, pads.end());
  w.out.resize(n);
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  for (size_t i = 0; i < n; ++i) {
    int64_t full = w.strides[i] * (in[i] - 1) + outPad[i] + w.span(i);
    if (!outShape.empty() || same) {
      // The padding is whatever makes the full result the requested size;
      // the odd element goes to the end for SAME_UPPER, else to the start.
      w.out[i] = !outShape.empty() ? outShape[i] : in[i] * w.strides[i];
      int64_t total = full - w.out[i];
      int64_t half = floorDiv2(total);
      w.padBegin[i] = autoPad == "SAME_UPPER" ? half : total - half;
      w.padEnd[i] = total - w.padBegin[i];
    } else {
      if (autoPad == "VALID") w.padBegin[i] = w.padEnd[i] = 0;
      w.out[i] = full - w.padBegin[i] - w.padEnd[i];
    }
    if (w.out[i] < 0) return ctx.error("spatial axis ", i, " has negative output size ", w.out[i]);
  }
  return w;
}

struct TransposePlan {
  int64_t batch = 0, inChannels = 0, outChannels = 0, group = 1;
  Window win;
  int64_t inPlane = 0, outPlane = 0, kernelSize = 0;
  int64_t inW = 0, kW = 0, strideW = 1; // the innermost spatial axis
  RowMap rows;                          // input rows -> output rows
};

void planRows(TransposePlan &p) {
  const Window &w = p.win;
  p.inPlane = numelOf(w.in);
  p.outPlane = numelOf(w.out);
  p.kernelSize = numelOf(w.kernel);
  p.inW = w.in.back();
  p.kW = w.kernel.back();
  p.strideW = w.strides.back();
  p.rows = mapRows(w, w.in, w.out);
}

// y[n, m, ...] = bias[m] + sum over the group's input channels c, input
// positions i and taps k of x[n, c, i...] * w[c, m % (M/group), k...] where
// i * stride + k * dilation - padBegin is the output position.
template <class T, class Acc>
void transposeLoops(const TransposePlan &p, const T *x, const T *w, const std::vector<Acc> &bias,
                    T *y) {
  int64_t cPerGroup = p.inChannels / p.group, mPerGroup = p.outChannels / p.group;
  std::vector<Acc> acc(p.outPlane);
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t m = 0; m < p.outChannels; ++m) {
      int64_t g = m / mPerGroup, mg = m % mPerGroup;
      std::fill(acc.begin(), acc.end(), bias.empty() ? Acc(0) : bias[m]);
      for (int64_t c = g * cPerGroup; c < (g + 1) * cPerGroup; ++c) {
        const T *xc = x + (n * p.inChannels + c) * p.inPlane;
        const T *wcm = w + (c * mPerGroup + mg) * p.kernelSize;
        for (size_t r = 0; r < p.rows.rowTaps.size(); ++r) {
          const T *xrow = xc + static_cast<int64_t>(r) * p.inW;
          for (auto [tap, outOff] : p.rows.rowTaps[r]) {
            Acc *yrow = acc.data() + outOff;
            for (int64_t kx = 0; kx < p.kW; ++kx) {
              Acc wv = static_cast<Acc>(wcm[tap * p.kW + kx]);
              Acc *dst = yrow + p.rows.colOff[kx];
              for (int64_t ix = p.rows.colLo[kx]; ix < p.rows.colHi[kx]; ++ix)
                dst[ix * p.strideW] += wv * static_cast<Acc>(xrow[ix]);
            }
          }
        }
      }
      T *ym = y + (n * p.outChannels + m) * p.outPlane;
      for (int64_t o = 0; o < p.outPlane; ++o) ym[o] = static_cast<T>(acc[o]);
    }
  }
}

Expected<TransposePlan> makePlan(const KernelContext &ctx, const Tensor &x, const Tensor &w) {
  KILN_ASSIGN_OR_RETURN(Shape64 in, spatialDims(ctx, x, "input X"));
  if (w.rank() != x.rank())
    return ctx.error("weight has shape ", shapeToString(w.shape()), ", expected rank ", x.rank());
  TransposePlan p;
  p.batch = x.dim(0);
  p.inChannels = x.dim(1);
  p.group = ctx.node().getInt("group");
  if (p.group <= 0 || p.inChannels % p.group != 0)
    return ctx.error("group ", p.group, " does not divide the ", p.inChannels, " input channels");
  if (w.dim(0) != p.inChannels)
    return ctx.error("weight has ", w.dim(0), " input channels, input X has ", p.inChannels);
  p.outChannels = w.dim(1) * p.group;
  Shape64 kernel(w.shape().begin() + 2, w.shape().end());
  if (ctx.node().hasAttr("kernel_shape") && ctx.node().getInts("kernel_shape") != kernel)
    return ctx.error("kernel_shape ", shapeToString(ctx.node().getInts("kernel_shape")),
                     " does not match the weight's spatial dims ", shapeToString(kernel));
  KILN_ASSIGN_OR_RETURN(p.win, transposeWindow(ctx, in, kernel));
  planRows(p);
  return p;
}

template <class T, class Acc>
Tensor runTranspose(const TransposePlan &p, const Tensor &x, const Tensor &w,
                    const std::vector<double> &b) {
  std::vector<Acc> bias(b.begin(), b.end());
  Shape64 shape = {p.batch, p.outChannels};
  shape.insert(shape.end(), p.win.out.begin(), p.win.out.end());
  Tensor y(DTypeOf<T>::value, shape);
  transposeLoops<T, Acc>(p, x.data<T>(), w.data<T>(), bias, y.data<T>());
  return y;
}

} // namespace

Status convTransposeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (!isFloat(x.dtype())) return ctx.error("expects a float input, got ", dtypeName(x.dtype()));
  KILN_ASSIGN_OR_RETURN(TransposePlan p, makePlan(ctx, x, ctx.in(1)));
  std::vector<double> bias;
  if (ctx.has(2)) {
    if (ctx.in(2).numel() != p.outChannels)
      return ctx.error("bias has ", ctx.in(2).numel(), " values, expected ", p.outChannels);
    bias = toDoubles(ctx.in(2));
  }
  // Half types run in f32 and are rounded once at the end.
  DType compute = x.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Tensor xc = convertTensor(x, compute), wc = convertTensor(ctx.in(1), compute);
  Tensor y;
  if (compute == DType::F64)
    y = runTranspose<double, double>(p, xc, wc, bias);
  else if (ctx.options().accumulateF64)
    y = runTranspose<float, double>(p, xc, wc, bias);
  else
    y = runTranspose<float, float>(p, xc, wc, bias);
  ctx.setOutput(0, convertTensor(y, x.dtype()));
  return Status::success();
}

} // namespace kiln
