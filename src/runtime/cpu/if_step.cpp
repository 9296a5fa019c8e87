#include "runtime/cpu/steps.h"

namespace kiln::cpu {

IfStep::IfStep(std::string label, int condSlot, std::vector<int> outputSlots,
               std::unique_ptr<Program> thenBranch, std::unique_ptr<Program> elseBranch)
    : label_(std::move(label)), cond_(condSlot), out_(std::move(outputSlots)), then_(std::move(thenBranch)),
      else_(std::move(elseBranch)) {
  setSlots();
}

void IfStep::setSlots() {
  reads = {cond_};
  for (const Program *p : {then_.get(), else_.get()})
    for (const auto &c : p->captures) reads.push_back(c.first);
  writes.clear();
  for (int s : out_)
    if (s >= 0) writes.push_back(s);
}

Status runFallback(const Step *fallback, Frame &frame, ExecContext &ctx, const std::string &label,
                   const std::string &why) {
  if (fallback) return fallback->run(frame, ctx);
  return makeError(label, ": ", why);
}

Status IfStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &c = frame.slots[cond_];
  if (!c.isTensor() || c.tensor.numel() != 1 || c.tensor.dtype() == DType::String)
    return makeError(label_, ": condition must hold one boolean, got ", c.describe());
  const Program &branch = c.tensor.getDouble(0) != 0 ? *then_ : *else_;
  Frame sub;
  sub.slots.resize(branch.numSlots);
  for (const auto &[parentSlot, slot] : branch.captures) sub.slots[slot] = frame.slots[parentSlot];
  auto outs = branch.run(sub, ctx);
  if (!outs.ok()) return makeError(label_, ": ", outs.error().message);
  for (size_t i = 0; i < out_.size() && i < outs->size(); ++i)
    if (out_[i] >= 0) frame.slots[out_[i]] = std::move((*outs)[i]);
  return Status::success();
}

} // namespace kiln::cpu
