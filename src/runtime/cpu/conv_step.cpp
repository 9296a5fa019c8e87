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
  // Every input, weights included: the general variant (program.h) reads
  // them all.
  reads = presentSlots(in_);
  writes = {out_};
  return Status::success();
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
  if (s.N > 0) packed_.run(s, x.data<float>(), y.data<float>(), ep, nullptr, ctx.pool);
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
