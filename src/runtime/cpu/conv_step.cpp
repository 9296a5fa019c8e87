#include "runtime/cpu/conv_step.h"

#include "runtime/cpu/steps.h"

#include <algorithm>

namespace kiln::cpu {

Status ConvStep::prepare() {
  const kernels::ConvShape &cs = shape_;
  const int64_t spatialTaps = cs.R * cs.S;
  if (!cs.valid() || cs.groups < 1 || cs.C % cs.groups != 0 || cs.K % cs.groups != 0 ||
      (oneD_ && cs.R != 1))
    return makeError(label_, ": invalid conv shape");
  if (!weights_.defined() || weights_.dtype() != DType::F32 ||
      weights_.numel() != cs.K * (cs.C / cs.groups) * spatialTaps)
    return makeError(label_, ": weights do not match the conv shape");
  if (biasT_.defined() && (biasT_.dtype() != DType::F32 || biasT_.numel() != cs.K))
    return makeError(label_, ": bias does not match the conv shape");
  if (in_.empty() || out_ < 0 || plan_.residualInput >= int(in_.size()) ||
      (plan_.residualOp >= 0) != (plan_.residualInput >= 0) ||
      (plan_.residualInput >= 0 && in_[plan_.residualInput] < 0))
    return makeError(label_, ": corrupt slots");
  const float *b = biasT_.defined() ? biasT_.data<float>() : nullptr;
  packed_ = kernels::PackedConv::pack(cs, weights_.data<float>(), b);
  if (b) bias_.assign(b, b + cs.K);
  // Every input, weights included: the general variant (program.h) reads
  // them all.
  reads = presentSlots(in_);
  writes = {out_};
  return Status::success();
}

const kernels::PackedB &ConvStep::transposedWeights() const {
  std::call_once(transposed_->once, [&] {
    const int64_t taps = shape_.C * shape_.R * shape_.S;
    transposed_->weights =
        kernels::PackedB::pack(/*transB=*/true, taps, shape_.K, weights_.data<float>(), taps);
  });
  return transposed_->weights;
}

void ConvStep::runSmallSpatial(const kernels::ConvShape &s, const float *x, float *y,
                               const kernels::Epilogue &ep, ExecContext &ctx) const {
  const int64_t P = s.outH() * s.outW(), taps = s.C * s.R * s.S;
  std::vector<float> yt(static_cast<size_t>(s.N * P * s.K));
  kernels::GemmOptions opts;
  opts.pool = ctx.pool;
  const bool pointwise = s.R == 1 && s.S == 1 && s.strideH == 1 && s.strideW == 1 &&
                         s.padTop + s.padLeft + s.padBottom + s.padRight == 0;
  if (pointwise) {
    // im2col(X)^T is X^T: image n's [C x P] read transposed.
    for (int64_t n = 0; n < s.N; ++n)
      kernels::sgemmPackedB(true, P, 1.0f, x + n * s.C * P, P, transposedWeights(), 0.0f,
                            yt.data() + n * P * s.K, s.K, opts);
  } else {
    std::vector<float> col(static_cast<size_t>(s.N * P * taps));
    im2colRows(s, x, col.data());
    kernels::sgemmPackedB(false, s.N * P, 1.0f, col.data(), taps, transposedWeights(), 0.0f,
                          yt.data(), s.K, opts);
  }
  transposeOut(s, yt.data(), y, ep);
}

// im2col, one row of taps per output pixel (zeros in the padding).
void ConvStep::im2colRows(const kernels::ConvShape &s, const float *x, float *col) {
  const int64_t taps = s.C * s.R * s.S;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t oh = 0; oh < s.outH(); ++oh)
      for (int64_t ow = 0; ow < s.outW(); ++ow) {
        float *row = col + ((n * s.outH() + oh) * s.outW() + ow) * taps;
        for (int64_t c = 0; c < s.C; ++c)
          for (int64_t r = 0; r < s.R; ++r) {
            const int64_t ih = oh * s.strideH - s.padTop + r * s.dilationH;
            for (int64_t q = 0; q < s.S; ++q) {
              const int64_t iw = ow * s.strideW - s.padLeft + q * s.dilationW;
              const bool inside = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
              *row++ = inside ? x[((n * s.C + c) * s.H + ih) * s.W + iw] : 0.0f;
            }
          }
      }
}

// Y^T [N*P x K] back to [N][K][P], then bias and the epilogue on each
// image's K x P.
void ConvStep::transposeOut(const kernels::ConvShape &s, const float *yt, float *y,
                            const kernels::Epilogue &ep) const {
  const int64_t P = s.outH() * s.outW();
  for (int64_t n = 0; n < s.N; ++n) {
    float *img = y + n * s.K * P;
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t p = 0; p < P; ++p)
        img[k * P + p] = yt[(n * P + p) * s.K + k] + (bias_.empty() ? 0.0f : bias_[k]);
    kernels::Epilogue imageEp = ep;
    for (int i = 0; i < imageEp.count; ++i)
      if (imageEp.ops[i].kind == kernels::EpilogueKind::kAddTensor)
        imageEp.ops[i].data += n * s.K * P;
    if (!imageEp.empty()) kernels::applyEpilogue(imageEp, img, P, 0, 0, s.K, P);
  }
}

Status ConvStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &xv = frame.slots[in_[0]];
  // Runs the packed kernel does not fit go to the general variant, which
  // computes them or reports the error as the op defines it.
  if (!xv.isTensor() || xv.tensor.dtype() != DType::F32)
    return runFallback(generalVariant.get(), frame, ctx, label_,
                       "input must be an f32 tensor, got " + xv.describe());
  const Tensor &x = xv.tensor;
  const int64_t rank = oneD_ ? 3 : 4;
  if (x.rank() != rank || x.dim(1) != shape_.C)
    return runFallback(generalVariant.get(), frame, ctx, label_,
                       "input of shape " + shapeToString(x.shape()) + " does not match " +
                           std::to_string(shape_.C) + " input channels (rank " +
                           std::to_string(rank) + ")");
  kernels::ConvShape s = shape_;
  s.N = x.dim(0);
  s.H = oneD_ ? 1 : x.dim(2);
  s.W = x.dim(rank - 1);
  if (s.N == 0) { // an empty batch gives an empty output (the kernels want N >= 1)
    kernels::ConvShape one = s;
    one.N = 1;
    if (one.valid()) {
      frame.slots[out_] = RtValue(
          frame.allocate(out_, DType::F32,
                         oneD_ ? Shape64{0, s.K, s.outW()} : Shape64{0, s.K, s.outH(), s.outW()}));
      return Status::success();
    }
  }
  if (!s.valid())
    return runFallback(generalVariant.get(), frame, ctx, label_,
                       "input of shape " + shapeToString(x.shape()) +
                           " is too small for the kernel");
  Shape64 outShape = oneD_ ? Shape64{s.N, s.K, s.outW()} : Shape64{s.N, s.K, s.outH(), s.outW()};
  kernels::Epilogue ep = plan_.epilogue;
  if (plan_.residualOp >= 0) {
    const RtValue &r = frame.slots[in_[plan_.residualInput]];
    if (!r.isTensor() || r.tensor.dtype() != DType::F32 || r.tensor.shape() != outShape)
      return runFallback(generalVariant.get(), frame, ctx, label_,
                         "residual must be f32" + shapeToString(outShape) + ", got " +
                             r.describe());
    ep.ops[plan_.residualOp].data = r.tensor.data<float>();
    ep.ops[plan_.residualOp].ld = s.outH() * s.outW();
  }
  Tensor y = frame.allocate(out_, DType::F32, outShape);
  if (s.N > 0 && s.groups == 1 && s.outH() * s.outW() <= kSmallPixels)
    runSmallSpatial(s, x.data<float>(), y.data<float>(), ep, ctx);
  else if (s.N > 0)
    packed_.run(s, x.data<float>(), y.data<float>(), ep, nullptr, ctx.pool);
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
