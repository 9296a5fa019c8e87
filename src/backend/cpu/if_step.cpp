#include "backend/cpu/steps.h"

namespace kiln::cpu {

IfStep::IfStep(const Node &node, int condSlot, std::vector<int> outputSlots,
               std::unique_ptr<Program> thenBranch, std::unique_ptr<Program> elseBranch)
    : node_(node), cond_(condSlot), out_(std::move(outputSlots)), then_(std::move(thenBranch)),
      else_(std::move(elseBranch)) {
  reads.push_back(cond_);
  for (const Program *p : {then_.get(), else_.get()})
    for (const auto &c : p->captures) reads.push_back(c.first);
  for (int s : out_)
    if (s >= 0) writes.push_back(s);
}

std::string IfStep::describe() const { return "if " + node_.describe(); }

Status IfStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &c = frame.slots[cond_];
  if (!c.isTensor() || c.tensor.numel() != 1 || c.tensor.dtype() == DType::String)
    return makeError(node_.describe(), ": condition must hold one boolean, got ", c.describe());
  const Program &branch = c.tensor.getDouble(0) != 0 ? *then_ : *else_;
  Frame sub;
  sub.slots.resize(branch.numSlots);
  for (const auto &[parentSlot, slot] : branch.captures) sub.slots[slot] = frame.slots[parentSlot];
  auto outs = branch.run(sub, ctx);
  if (!outs.ok()) return makeError(node_.describe(), ": ", outs.error().message);
  for (size_t i = 0; i < out_.size() && i < outs->size(); ++i)
    if (out_[i] >= 0) frame.slots[out_[i]] = std::move((*outs)[i]);
  return Status::success();
}

} // namespace kiln::cpu
