// Helpers shared by the quantized kernels (QLinearConv and ConvInteger in
// conv.cpp, QLinearMatMul and MatMulInteger in matmul.cpp, the quantize ops
// in quant.cpp): reading scales and zero points that are per tensor or per
// channel, and rounding to a saturated integer the way ONNX defines it (to
// nearest, ties to even).
#pragma once

#include "interp/kernels/common.h"

#include <algorithm>
#include <limits>

namespace kiln {

// Saturates an already rounded value to Q's range (NaN becomes 0).
template <class Q> Q saturate(double v) {
  if (v != v) return Q(0);
  return static_cast<Q>(std::clamp(v, static_cast<double>(std::numeric_limits<Q>::lowest()),
                                   static_cast<double>(std::numeric_limits<Q>::max())));
}

// A zero point that is one value for the whole tensor or one per channel
// (`count` of them); an absent input means 0.
inline Expected<std::vector<int32_t>> zeroPoints(const KernelContext &ctx, int input, int64_t count,
                                                 const char *what) {
  if (!ctx.has(input)) return std::vector<int32_t>(count, 0);
  const Tensor &z = ctx.in(input);
  if (!isInt(z.dtype())) return ctx.error(what, " must be an integer tensor");
  if (z.numel() == 1) return std::vector<int32_t>(count, static_cast<int32_t>(z.getInt(0)));
  if (z.numel() != count)
    return ctx.error(what, " has ", z.numel(), " values, expected 1 or ", count);
  std::vector<int32_t> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>(z.getInt(i));
  return v;
}

// (t - zp[channel]) as int32, where channel = (index / channelSize) %
// zp.size(): per-tensor, per-leading-axis or per-column zero points alike.
inline Tensor minusZeroPoint(const Tensor &t, const std::vector<int32_t> &zp, int64_t channelSize) {
  Tensor out(DType::I32, t.shape());
  int32_t *o = out.data<int32_t>();
  int64_t channels = static_cast<int64_t>(zp.size());
  channelSize = std::max<int64_t>(1, channelSize);
  for (int64_t i = 0; i < t.numel(); ++i)
    o[i] = static_cast<int32_t>(t.getInt(i)) - zp[(i / channelSize) % channels];
  return out;
}

// A float scale that is one value for the whole tensor or one per channel.
inline Expected<std::vector<double>> quantScales(const KernelContext &ctx, int input, int64_t count,
                                                 const char *what) {
  const Tensor &s = ctx.in(input);
  if (!isFloat(s.dtype())) return ctx.error(what, " must be a float tensor");
  if (s.numel() == 1) return std::vector<double>(count, s.getDouble(0));
  if (s.numel() != count)
    return ctx.error(what, " has ", s.numel(), " values, expected 1 or ", count);
  return toDoubles(s);
}

// The combined scale in_scale * w_scale / out_scale of a quantized product,
// formed in float as ONNX Runtime does unless the f64 oracle is asked for.
inline double combinedScale(double a, double b, double out, bool f64) {
  if (f64) return a * b / out;
  return static_cast<float>(static_cast<float>(a) * static_cast<float>(b) /
                            static_cast<float>(out));
}

// Requantizes an integer accumulator: round(acc * scale) + zp, saturated.
template <class Q> Q requantize(int64_t acc, double scale, int32_t zp, bool f64) {
  double v = f64 ? std::nearbyint(static_cast<double>(acc) * scale)
                 : std::nearbyint(static_cast<float>(acc) * static_cast<float>(scale));
  return saturate<Q>(v + zp);
}

} // namespace kiln
