#include "runtime/cpu/steps.h"

namespace kiln::cpu {

ReductionStep::ReductionStep(std::string label, ReductionLaunch launch,
                             std::vector<int> inputSlots, int outputSlot,
                             std::unique_ptr<Step> fallback)
    : label_(std::move(label)), launch_(std::move(launch)), in_(std::move(inputSlots)),
      out_(outputSlot) {
  generalVariant = std::move(fallback);
  setSlots();
}

Status ReductionStep::validate() const {
  if (in_.empty() || in_[0] < 0 || out_ < 0 || in_.size() > 3) return makeError(label_, ": corrupt slots");
  return launch_.validate();
}

void ReductionStep::setSlots() {
  reads.clear();
  for (int s : in_)
    if (s >= 0) reads.push_back(s);
  writes = {out_};
}

Status ReductionStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &xv = frame.slots[in_[0]];
  if (!xv.isTensor() || xv.tensor.dtype() != DType::F32)
    return runFallback(generalVariant.get(), frame, ctx, label_, "input is " + xv.describe() + ", not f32");
  const Tensor &x = xv.tensor;
  int64_t outer, red, inner;
  Shape64 outShape;
  if (Status s = launch_.view(x.shape(), outer, red, inner, outShape); !s.ok())
    return runFallback(generalVariant.get(), frame, ctx, label_, s.error().message);
  using Kind = ReductionLaunch::Kind;
  const bool layerNorm = launch_.kind == Kind::LayerNorm;
  // Scale and bias of a layer norm must cover the normalized elements
  // exactly; broadcast forms go to the interpreter.
  for (size_t i = 1; layerNorm && i < in_.size(); ++i)
    if (in_[i] >= 0 && (!frame.slots[in_[i]].isTensor() || frame.slots[in_[i]].tensor.numel() != red ||
                        frame.slots[in_[i]].tensor.dtype() != DType::F32))
      return runFallback(generalVariant.get(), frame, ctx, label_,
                         "scale and bias must be f32 tensors of the normalized size");

  Tensor y = frame.allocate(out_, DType::F32, outShape);
  float scale = red > 0 ? 1.0f / static_cast<float>(red) : 0.0f;
  std::vector<void *> buffers = {const_cast<void *>(x.raw()), y.mutableRaw(), &scale};
  Tensor rowMax, rowSum;
  if (launch_.numScratch() == 2) {
    rowMax = Tensor(DType::F32, {outer * inner});
    rowSum = Tensor(DType::F32, {outer * inner});
    buffers.push_back(rowMax.mutableRaw());
    buffers.push_back(rowSum.mutableRaw());
  }
  for (size_t i = 1; layerNorm && i < in_.size(); ++i)
    if (in_[i] >= 0) buffers.push_back(const_cast<void *>(frame.slots[in_[i]].tensor.raw()));
  const int64_t params[] = {outer, red, inner, red * inner};
  if (outer > 0 && (red > 0 || launch_.kind == Kind::Reduce))
    launchRows(ctx, buffers.data(), params, outer, std::max<int64_t>(red * inner, 1));
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
