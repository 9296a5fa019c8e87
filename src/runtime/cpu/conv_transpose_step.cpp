#include "runtime/cpu/conv_transpose_step.h"

#include <algorithm>

namespace kiln::cpu {

namespace {

int64_t floorDiv2(int64_t v) {
  return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

} // namespace

Status ConvTransposeStep::prepare() {
  const size_t n = oneD_ ? 1 : 2;
  if (in_ < 0 || out_ < 0 || axes_.size() != n || groups_ < 1 || C_ < 1 || K_ < 1 ||
      C_ % groups_ != 0 || K_ % groups_ != 0)
    return makeError(label_, ": corrupt conv transpose");
  for (const Axis &a : axes_)
    if (a.kernel < 1 || a.stride < 1 || a.dilation < 1 || a.kernel > (1 << 20))
      return makeError(label_, ": corrupt conv transpose axis");
  const int64_t taps = axes_[0].kernel * (oneD_ ? 1 : axes_[1].kernel);
  if (!weights_.defined() || weights_.dtype() != DType::F32 ||
      weights_.numel() != C_ * (K_ / groups_) * taps)
    return makeError(label_, ": weights do not match the conv transpose");
  if (biasT_.defined() && (biasT_.dtype() != DType::F32 || biasT_.numel() != K_))
    return makeError(label_, ": bias does not match the output channels");
  // A 1-D op runs with its sequence along H (see conv_transpose.h).
  kernels::ConvTransposeShape ks;
  ks.C = C_, ks.K = K_, ks.groups = groups_;
  ks.R = axes_[0].kernel, ks.S = oneD_ ? 1 : axes_[1].kernel;
  const float *b = biasT_.defined() ? biasT_.data<float>() : nullptr;
  packed_ = kernels::PackedConvTranspose::pack(ks, weights_.data<float>(), b);
  bias_.clear();
  if (b) bias_.assign(b, b + K_);
  reads = {in_};
  writes = {out_};
  return Status::success();
}

std::pair<int64_t, int64_t> ConvTransposeStep::geometry(const Axis &a, int64_t in) const {
  const int64_t full = a.stride * (in - 1) + a.outputPadding + (a.kernel - 1) * a.dilation + 1;
  const bool same = autoPad_ == "SAME_UPPER" || autoPad_ == "SAME_LOWER";
  if (a.requestedOut >= 0 || same) {
    // As the interpreter: the padding makes the full result the requested
    // size; the odd element goes to the end for SAME_UPPER, else the start.
    const int64_t out = a.requestedOut >= 0 ? a.requestedOut : in * a.stride;
    const int64_t total = full - out, half = floorDiv2(total);
    return {out, autoPad_ == "SAME_UPPER" ? half : total - half};
  }
  if (autoPad_ == "VALID") return {full, 0};
  return {full - a.padBegin - a.padEnd, a.padBegin};
}

Status ConvTransposeStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &xv = frame.slots[in_];
  if (!xv.isTensor() || xv.tensor.dtype() != DType::F32)
    return makeError(label_, ": input must be an f32 tensor, got ", xv.describe());
  const Tensor &x = xv.tensor;
  const int64_t rank = oneD_ ? 3 : 4;
  if (x.rank() != rank || x.dim(1) != C_)
    return makeError(label_, ": input of shape ", shapeToString(x.shape()), " does not match ", C_,
                     " input channels (rank ", rank, ")");
  kernels::ConvTransposeShape s;
  s.N = x.dim(0), s.C = C_, s.K = K_, s.groups = groups_;
  Shape64 outShape = {s.N, K_};
  std::vector<std::pair<int64_t, int64_t>> geo;
  for (size_t i = 0; i < axes_.size(); ++i) {
    geo.push_back(geometry(axes_[i], x.dim(2 + int64_t(i))));
    if (geo.back().first < 0)
      return makeError(label_, ": spatial axis ", i, " has negative output size ",
                       geo.back().first);
    outShape.push_back(geo.back().first);
  }
  const Axis &ah = axes_[0];
  s.H = x.dim(2), s.R = ah.kernel, s.strideH = ah.stride, s.dilationH = ah.dilation;
  s.padTop = geo[0].second, s.outH = geo[0].first;
  if (!oneD_) {
    const Axis &aw = axes_[1];
    s.W = x.dim(3), s.S = aw.kernel, s.strideW = aw.stride, s.dilationW = aw.dilation;
    s.padLeft = geo[1].second, s.outW = geo[1].first;
  }
  Tensor y(DType::F32, outShape);
  if (s.valid()) {
    packed_.run(s, x.data<float>(), y.data<float>(), ctx.pool);
  } else if (!bias_.empty() && y.numel() > 0) { // no input pixels: just the bias
    const int64_t plane = y.numel() / (s.N * K_);
    for (int64_t p = 0; p < s.N * K_; ++p)
      std::fill_n(y.data<float>() + p * plane, plane, bias_[size_t(p % K_)]);
  }
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
