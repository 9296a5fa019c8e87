#include "runtime/cpu/int_matmul_step.h"

#include "runtime/cpu/steps.h"

namespace kiln::cpu {

namespace {

// Beyond this depth an exact sum of (a - za) * (b - zb) may not fit in i32
// (|each term| <= 255 * 255), which QLinearMatMul's requantization needs.
constexpr int64_t kMaxExactDepth = 33025;

} // namespace

Status IntMatMulStep::prepare() {
  const size_t inputs = qlinear_ ? 8 : 2;
  if (in_.size() < inputs || out_ < 0 || in_[0] < 0)
    return makeError(label_, ": corrupt slots");
  if (!weights_.defined() || weights_.rank() != 2 || !is8Bit(weights_.dtype()))
    return makeError(label_, ": weights must be 2-D u8 or i8");
  const kernels::Int8Matrix b{weights_.raw(), weights_.dim(1), weights_.dtype() == DType::I8,
                              false};
  packed_ = kernels::PackedInt8::packB(weights_.dim(0), weights_.dim(1), b);
  // Every input, weights included: the general variant reads them all.
  reads = presentSlots(in_);
  writes = {out_};
  return Status::success();
}

Status IntMatMulStep::run(Frame &frame, ExecContext &ctx) const {
  auto fallback = [&](const std::string &why) {
    return runFallback(generalVariant.get(), frame, ctx, label_, why);
  };
  const RtValue &av = frame.slots[size_t(in_[0])];
  if (!av.isTensor() || !is8Bit(av.tensor.dtype())) return fallback("A must be a u8 or i8 tensor");
  const Tensor &a = av.tensor;
  const int64_t K = packed_->depth(), N = packed_->outer();
  if (a.rank() < 1 || a.dim(a.rank() - 1) != K)
    return fallback("A of shape " + shapeToString(a.shape()) + " does not match weights [" +
                    std::to_string(K) + "," + std::to_string(N) + "]");
  const int64_t M = numelOf(Shape64(a.shape().begin(), a.shape().end() - 1));

  kernels::IgemmProblem p;
  p.M = M, p.N = N, p.K = K;
  p.a = {a.raw(), K, a.dtype() == DType::I8, false};
  p.packedB = &*packed_;
  p.pool = ctx.pool;
  if (const Tensor *za = optionalTensor(frame, in_, 2)) {
    if (za->numel() != 1) return fallback("A's zero point is not one value");
    p.za.scalar = int32_t(za->getInt(0));
  }
  // Per-column values live in thread-local buffers: no allocation per run.
  thread_local std::vector<int32_t> zbValues;
  thread_local std::vector<float> scales;
  if (const Tensor *zb = optionalTensor(frame, in_, bZpInput())) {
    if (zb->numel() == 1) {
      p.zb.scalar = int32_t(zb->getInt(0));
    } else if (zb->numel() == N) {
      zbValues.resize(size_t(N));
      for (int64_t j = 0; j < N; ++j) zbValues[size_t(j)] = int32_t(zb->getInt(j));
      p.zb.values = zbValues.data();
    } else {
      return fallback("B's zero point is neither one value nor one per column");
    }
  }
  Shape64 outShape = a.shape();
  outShape.back() = N;

  if (!qlinear_) {
    Tensor y = frame.allocate(out_, DType::I32, outShape);
    kernels::StoreI32 store{y.data<int32_t>(), N};
    p.finish = kernels::storeI32(&store);
    kernels::igemm(p);
    frame.slots[size_t(out_)] = RtValue(std::move(y));
    return Status::success();
  }

  const Tensor *as = optionalTensor(frame, in_, 1), *bs = optionalTensor(frame, in_, 4);
  const Tensor *ys = optionalTensor(frame, in_, 6), *yz = optionalTensor(frame, in_, 7);
  if (!as || !bs || !ys || !yz || as->numel() != 1 || ys->numel() != 1 || yz->numel() != 1 ||
      (bs->numel() != 1 && bs->numel() != N) || !isFloat(as->dtype()) ||
      !isFloat(bs->dtype()) || !isFloat(ys->dtype()) || !is8Bit(yz->dtype()))
    return fallback("scales or output zero point of a form the kernel does not take");
  if (K > kMaxExactDepth) return fallback("depth beyond exact i32 sums");
  // quantize.h's combinedScale: f32(f32(a) * f32(b) / f32(y)).
  const float fa = float(as->getDouble(0)), fy = float(ys->getDouble(0));
  scales.resize(size_t(bs->numel()));
  for (int64_t j = 0; j < bs->numel(); ++j)
    scales[size_t(j)] = float(fa * float(bs->getDouble(j)) / fy);
  Tensor y = frame.allocate(out_, yz->dtype(), outShape);
  kernels::Requantize rq{y.mutableRaw(), N, 1, yz->dtype() == DType::I8, int32_t(yz->getInt(0)),
                         scales.data(), false, int64_t(scales.size()), nullptr, false};
  p.finish = kernels::requantize(&rq);
  kernels::igemm(p);
  frame.slots[size_t(out_)] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
