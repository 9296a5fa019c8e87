#include "runtime/cpu/matmul_step.h"

#include "runtime/cpu/steps.h"

namespace kiln::cpu {

Status MatMulStep::prepare() {
  if (in_.size() < 2 || out_ < 0 || plan_.residualInput >= int(in_.size()) ||
      (plan_.residualOp >= 0) != (plan_.residualInput >= 0))
    return makeError(label_, ": corrupt slots");
  for (int slot : in_)
    if (slot < 0) return makeError(label_, ": corrupt slots");
  if (!plan_.epilogue.empty() && !weights_.defined())
    return makeError(label_, ": a fused matmul needs constant weights");
  if (weights_.defined()) {
    if (weights_.rank() != 2 || weights_.dtype() != DType::F32)
      return makeError(label_, ": weights must be 2-D f32");
    if (!plan_.epilogue.empty() && plan_.channels != weights_.dim(1))
      return makeError(label_, ": epilogue does not match the weights");
    packed_ = kernels::PackedB::pack(false, weights_.dim(0), weights_.dim(1),
                                     weights_.data<float>(), weights_.dim(1));
  }
  reads = in_;
  writes = {out_};
  return Status::success();
}

Status MatMulStep::run(Frame &frame, ExecContext &ctx) const {
  // Runs the GEMM does not fit go to the general variant, which computes
  // them or reports the error as the op defines it.
  for (int slot : in_)
    if (!frame.slots[slot].isTensor() || frame.slots[slot].tensor.dtype() != DType::F32)
      return runFallback(generalVariant.get(), frame, ctx, label_, "operands must be f32 tensors");
  return packed_ ? runPacked(frame, ctx) : runGeneral(frame, ctx);
}

Status MatMulStep::runPacked(Frame &frame, ExecContext &ctx) const {
  const Tensor &x = frame.slots[in_[0]].tensor;
  const int64_t K = packed_->depth(), N = packed_->cols();
  if (x.rank() < 1 || x.dim(x.rank() - 1) != K)
    return runFallback(generalVariant.get(), frame, ctx, label_,
                       "input of shape " + shapeToString(x.shape()) + " does not match weights [" +
                           std::to_string(K) + "," + std::to_string(N) + "]");
  Shape64 outShape = x.shape();
  if (x.rank() == 1) outShape = {N};
  else outShape.back() = N;
  // The leading dims fold into M (no division: K may be 0).
  const int64_t M = numelOf(Shape64(x.shape().begin(), x.shape().end() - 1));
  kernels::GemmOptions opts;
  opts.pool = ctx.pool;
  opts.epilogue = plan_.epilogue;
  if (plan_.residualOp >= 0) {
    const RtValue &r = frame.slots[in_[plan_.residualInput]];
    if (!r.isTensor() || r.tensor.shape() != outShape || r.tensor.dtype() != DType::F32)
      return runFallback(generalVariant.get(), frame, ctx, label_,
                         "residual must be f32" + shapeToString(outShape) + ", got " +
                             r.describe());
    opts.epilogue.ops[plan_.residualOp].data = r.tensor.data<float>();
    opts.epilogue.ops[plan_.residualOp].ld = N;
  }
  Tensor y = frame.allocate(out_, DType::F32, outShape);
  if (M > 0 && N > 0)
    kernels::sgemmPackedB(false, M, 1.0f, x.data<float>(), K, *packed_, 0.0f, y.data<float>(), N,
                          opts);
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

Status MatMulStep::runGeneral(Frame &frame, ExecContext &ctx) const {
  Tensor a = frame.slots[in_[0]].tensor, b = frame.slots[in_[1]].tensor;
  if (a.rank() == 0 || b.rank() == 0)
    return runFallback(generalVariant.get(), frame, ctx, label_, "operands must not be scalars");
  // ONNX MatMul: 1-D operands get a unit dim that is removed afterwards.
  const bool aVec = a.rank() == 1, bVec = b.rank() == 1;
  if (aVec) a = a.reshaped({1, a.dim(0)});
  if (bVec) b = b.reshaped({b.dim(0), 1});
  const int64_t M = a.dim(a.rank() - 2), K = a.dim(a.rank() - 1);
  const int64_t N = b.dim(b.rank() - 1);
  if (b.dim(b.rank() - 2) != K)
    return runFallback(generalVariant.get(), frame, ctx, label_,
                       "shapes " + shapeToString(a.shape()) + " and " + shapeToString(b.shape()) +
                           " do not multiply");
  Shape64 batchA(a.shape().begin(), a.shape().end() - 2), batchB(b.shape().begin(), b.shape().end() - 2);
  auto batch = broadcastShapes({batchA, batchB});
  if (!batch.ok())
    return runFallback(generalVariant.get(), frame, ctx, label_,
                       "batch dims: " + batch.error().message);
  Shape64 outShape = *batch;
  outShape.push_back(M);
  outShape.push_back(N);
  Tensor y = frame.allocate(out_, DType::F32, outShape);
  const int64_t batches = numelOf(*batch);
  // Batch index -> offset in an operand whose batch dims broadcast.
  auto offsetOf = [&](const Shape64 &dims, int64_t index, int64_t matrix) {
    int64_t off = 0, stride = 1;
    const Shape64 &full = *batch;
    for (int64_t d = static_cast<int64_t>(full.size()) - 1; d >= 0; --d) {
      const int64_t i = index % full[d];
      index /= full[d];
      const int64_t k = d - static_cast<int64_t>(full.size() - dims.size());
      if (k < 0) continue;
      if (dims[k] != 1) off += i * stride;
      stride *= dims[k];
    }
    return off * matrix;
  };
  kernels::GemmOptions opts;
  opts.pool = ctx.pool;
  for (int64_t i = 0; i < batches && M > 0 && N > 0; ++i)
    kernels::sgemm(false, false, M, N, K, 1.0f, a.data<float>() + offsetOf(batchA, i, M * K), K,
                   b.data<float>() + offsetOf(batchB, i, K * N), N, 0.0f,
                   y.data<float>() + i * M * N, N, opts);
  if (aVec || bVec) {
    Shape64 s = *batch;
    if (!aVec) s.push_back(M);
    if (!bVec) s.push_back(N);
    y = y.reshaped(s);
  }
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
