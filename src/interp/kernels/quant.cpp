// Interpreter kernels: QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear. Scales and zero points are per tensor, per axis (a
// 1-d tensor along `axis`) or blocked (shaped like the input with `axis` cut
// into blocks of block_size); ParamLayout maps each element to its own.
// Division and rounding happen in f32 for f32/f16/bf16/i32 inputs (f64 for
// f64), rounding half to even, as numpy and ONNX Runtime do.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"
#include "interp/kernels/quantize.h"

namespace kiln {

namespace {

// Where element i of the data tensor finds its scale and zero point.
struct ParamLayout {
  enum class Kind { Tensor, Axis, Blocked } kind = Kind::Tensor;
  int64_t dim = 1;       // the size of the quantization axis
  int64_t inner = 1;     // elements per step along that axis
  int64_t blockSize = 1; // Blocked only
  int64_t blocks = 1;    // Blocked only: the param's size along the axis

  int64_t at(int64_t i) const {
    switch (kind) {
    case Kind::Tensor:
      return 0;
    case Kind::Axis:
      return (i / inner) % dim;
    case Kind::Blocked: {
      int64_t outer = i / (dim * inner), a = (i / inner) % dim, in = i % inner;
      return (outer * blocks + a / blockSize) * inner + in;
    }
    }
    return 0;
  }
};

Expected<ParamLayout> paramLayout(const KernelContext &ctx, const Shape64 &x,
                                  const Shape64 &scale) {
  ParamLayout p;
  int64_t blockSize = ctx.node().getInt("block_size");
  if (numelOf(scale) == 1 && scale.size() <= 1 && blockSize <= 0) return p;
  KILN_ASSIGN_OR_RETURN(
      int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), static_cast<int64_t>(x.size())));
  p.dim = x[axis];
  p.inner = numelOf(Shape64(x.begin() + axis + 1, x.end()));
  if (blockSize <= 0) {
    if (scale.size() != 1 || scale[0] != p.dim)
      return ctx.error("scale has shape ", shapeToString(scale), ", expected one value or ", p.dim,
                       " (the size of axis ", axis, ")");
    p.kind = ParamLayout::Kind::Axis;
    return p;
  }
  Shape64 want = x;
  want[axis] = (x[axis] + blockSize - 1) / blockSize;
  if (scale != want)
    return ctx.error("scale has shape ", shapeToString(scale), ", expected ", shapeToString(want),
                     " for block_size ", blockSize);
  p.kind = ParamLayout::Kind::Blocked;
  p.blockSize = blockSize;
  p.blocks = want[axis];
  return p;
}

// The zero point values (0 when absent), checked to have the scale's shape.
Expected<std::vector<double>> zeroPointValues(const KernelContext &ctx, int input,
                                              const Tensor &scale) {
  if (!ctx.has(input)) return std::vector<double>(scale.numel(), 0.0);
  const Tensor &z = ctx.in(input);
  if (z.numel() != scale.numel())
    return ctx.error("zero point has shape ", shapeToString(z.shape()),
                     ", expected the scale's shape ", shapeToString(scale.shape()));
  return toDoubles(z);
}

bool isQuantizedType(DType d) {
  return d == DType::U8 || d == DType::I8 || d == DType::U16 || d == DType::I16;
}

// The output dtype: the zero point's, else output_dtype, else u8.
Expected<DType> quantizedType(const KernelContext &ctx) {
  DType d = DType::U8;
  if (ctx.has(2)) {
    d = ctx.in(2).dtype();
  } else if (int64_t code = ctx.node().getInt("output_dtype"); code != 0) {
    auto t = dtypeFromOnnx(static_cast<int>(code));
    if (!t) return ctx.error("output_dtype ", code, " is not a supported type");
    d = *t;
  }
  if (!isQuantizedType(d))
    return ctx.error("quantizing to ", dtypeName(d), " is not supported (u8, i8, u16, i16 are)");
  return d;
}

// y = saturate(round(x / scale) + zero_point).
Status quantizeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0), &scale = ctx.in(1);
  if (!isFloat(x.dtype()) && x.dtype() != DType::I32)
    return ctx.error("expects a float or i32 input, got ", dtypeName(x.dtype()));
  KILN_ASSIGN_OR_RETURN(DType out, quantizedType(ctx));
  KILN_ASSIGN_OR_RETURN(ParamLayout layout, paramLayout(ctx, x.shape(), scale.shape()));
  KILN_ASSIGN_OR_RETURN(auto zp, zeroPointValues(ctx, 2, scale));
  std::vector<double> scales = toDoubles(scale);
  bool inF64 = x.dtype() == DType::F64;
  Tensor y(out, x.shape());
  visitDType(out, [&](auto tag) {
    using Q = decltype(tag);
    if constexpr (std::is_integral_v<Q>) {
      Q *dst = y.data<Q>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t p = layout.at(i);
        double q = inF64 ? std::nearbyint(x.getDouble(i) / scales[p])
                         : std::nearbyint(static_cast<float>(x.getDouble(i)) /
                                          static_cast<float>(scales[p]));
        dst[i] = saturate<Q>(q + zp[p]);
      }
    }
  });
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// y = (x - zero_point) * scale, in the scale's dtype.
Status dequantizeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0), &scale = ctx.in(1);
  if (!isInt(x.dtype())) return ctx.error("expects an integer input, got ", dtypeName(x.dtype()));
  if (!isFloat(scale.dtype()))
    return ctx.error("scale must be a float tensor, got ", dtypeName(scale.dtype()));
  if (ctx.has(2) && ctx.in(2).dtype() != x.dtype())
    return ctx.error("zero point is ", dtypeName(ctx.in(2).dtype()), ", input is ",
                     dtypeName(x.dtype()));
  KILN_ASSIGN_OR_RETURN(ParamLayout layout, paramLayout(ctx, x.shape(), scale.shape()));
  KILN_ASSIGN_OR_RETURN(auto zp, zeroPointValues(ctx, 2, scale));
  std::vector<double> scales = toDoubles(scale);
  bool f64 = scale.dtype() == DType::F64;
  Tensor y(scale.dtype(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t p = layout.at(i);
    double v = static_cast<double>(x.getInt(i)) - zp[p];
    y.setDouble(i, f64 ? v * scales[p] : static_cast<float>(v) * static_cast<float>(scales[p]));
  }
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// u8 quantization of a float tensor with a scale and zero point chosen so
// that [min(x, 0), max(x, 0)] maps onto [0, 255].
Status dynamicQuantizeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (!isFloat(x.dtype())) return ctx.error("expects a float input, got ", dtypeName(x.dtype()));
  Tensor xf = convertTensor(x, DType::F32);
  const float *src = xf.data<float>();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < xf.numel(); ++i) {
    lo = std::min(lo, src[i]);
    hi = std::max(hi, src[i]);
  }
  // An all-zero input would get scale 0; ONNX Runtime uses 1 instead, which
  // quantizes every value to the zero point 0.
  float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  uint8_t zp = saturate<uint8_t>(std::nearbyint((0.0f - lo) / scale));
  Tensor y(DType::U8, x.shape());
  for (int64_t i = 0; i < xf.numel(); ++i)
    y.data<uint8_t>()[i] = saturate<uint8_t>(std::nearbyint(src[i] / scale) + double(zp));
  ctx.setOutput(0, std::move(y));
  if (ctx.numOutputs() > 1) ctx.setOutput(1, Tensor::scalar<float>(scale));
  if (ctx.numOutputs() > 2) ctx.setOutput(2, Tensor::scalar<uint8_t>(zp));
  return Status::success();
}

} // namespace

void registerQuantKernels(KernelTable &t) {
  t.add(OpKind::QuantizeLinear, quantizeKernel);
  t.add(OpKind::DequantizeLinear, dequantizeKernel);
  t.add(OpKind::DynamicQuantizeLinear, dynamicQuantizeKernel);
}

} // namespace kiln
