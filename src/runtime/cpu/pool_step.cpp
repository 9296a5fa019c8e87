#include "runtime/cpu/pool_step.h"

#include "runtime/cpu/steps.h"

namespace kiln::cpu {

namespace {

// ONNX pooling output size along one axis (ceil_mode drops a last window
// that would start in the end padding).
int64_t outSize(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t padBegin,
                int64_t padEnd, bool ceilMode) {
  const int64_t room = in + padBegin + padEnd - dil * (k - 1) - 1;
  if (room < 0) return 0;
  int64_t out = (ceilMode ? (room + stride - 1) / stride : room / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padBegin) --out;
  return out;
}

} // namespace

Status PoolStep::prepare() {
  const bool global = kind_ == PoolKind::GlobalAverage || kind_ == PoolKind::GlobalMax;
  if (in_ < 0 || out_ < 0 || static_cast<int>(kind_) < 0 || kind_ > PoolKind::GlobalMax ||
      rank_ < 3 || rank_ > 8 || (!global && rank_ > 4))
    return makeError(label_, ": corrupt pool step");
  const kernels::PoolShape &w = window_;
  if (!global && (w.kernelH < 1 || w.kernelW < 1 || w.strideH < 1 || w.strideW < 1 ||
                  w.dilationH < 1 || w.dilationW < 1 || w.padTop < 0 || w.padLeft < 0 ||
                  w.padBottom < 0 || w.padRight < 0))
    return makeError(label_, ": corrupt pool window");
  reads = {in_};
  writes = {out_};
  return Status::success();
}

Status PoolStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &xv = frame.slots[in_];
  // Runs the pooling kernels do not fit go to the general variant, which
  // computes them or reports the error as the op defines it.
  if (!xv.isTensor() || xv.tensor.dtype() != DType::F32 || xv.tensor.rank() != rank_)
    return runFallback(generalVariant.get(), frame, ctx, label_,
                       "input must be an f32 tensor of rank " + std::to_string(rank_) + ", got " +
                           xv.describe());
  const Tensor &x = xv.tensor;
  const int64_t N = x.dim(0), C = x.dim(1);
  if (kind_ == PoolKind::GlobalAverage || kind_ == PoolKind::GlobalMax) {
    int64_t spatial = 1;
    for (int64_t i = 2; i < x.rank(); ++i) spatial *= x.dim(i);
    Shape64 outShape(static_cast<size_t>(x.rank()), 1);
    outShape[0] = N;
    outShape[1] = C;
    if (spatial == 0 && N * C != 0)
      return runFallback(generalVariant.get(), frame, ctx, label_,
                         "global pooling of empty planes");
    Tensor y = frame.allocate(out_, DType::F32, outShape);
    if (N * C == 0) { // an empty batch or no channels: an empty output
      frame.slots[out_] = RtValue(std::move(y));
      return Status::success();
    }
    if (kind_ == PoolKind::GlobalAverage)
      kernels::globalAveragePool(N, C, spatial, x.data<float>(), y.data<float>(), ctx.pool);
    else
      kernels::globalMaxPool(N, C, spatial, x.data<float>(), y.data<float>(), ctx.pool);
    frame.slots[out_] = RtValue(std::move(y));
    return Status::success();
  }
  kernels::PoolShape s = window_;
  s.N = N;
  s.C = C;
  s.H = rank_ == 3 ? 1 : x.dim(2);
  s.W = x.dim(rank_ - 1);
  s.outH = rank_ == 3 ? 1
                      : outSize(s.H, s.kernelH, s.strideH, s.dilationH, s.padTop, s.padBottom,
                                ceilMode_);
  s.outW = outSize(s.W, s.kernelW, s.strideW, s.dilationW, s.padLeft, s.padRight, ceilMode_);
  if (s.outH <= 0 || s.outW <= 0 || !s.valid())
    return runFallback(generalVariant.get(), frame, ctx, label_,
                       "input of shape " + shapeToString(x.shape()) +
                           " is too small for the window");
  Shape64 outShape = rank_ == 3 ? Shape64{N, C, s.outW} : Shape64{N, C, s.outH, s.outW};
  Tensor y = frame.allocate(out_, DType::F32, outShape);
  if (kind_ == PoolKind::Max)
    kernels::maxPool2d(s, x.data<float>(), y.data<float>(), ctx.pool);
  else
    kernels::averagePool2d(s, countIncludePad_, x.data<float>(), y.data<float>(), ctx.pool);
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
