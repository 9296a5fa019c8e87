#include "backend/cpu/interp_step.h"

namespace kiln::cpu {

InterpStep::InterpStep(const Node &node, std::vector<int> inputSlots, std::vector<int> outputSlots,
                       std::vector<std::pair<const Value *, int>> regionReads)
    : node_(node), in_(std::move(inputSlots)), out_(std::move(outputSlots)),
      regionReads_(std::move(regionReads)) {
  for (int s : in_)
    if (s >= 0) reads.push_back(s);
  for (const auto &r : regionReads_) reads.push_back(r.second);
  for (int s : out_)
    if (s >= 0) writes.push_back(s);
}

std::string InterpStep::describe() const { return "interp " + node_.describe(); }

Status InterpStep::run(Frame &frame, ExecContext &ctx) const {
  KernelFn fn = kernelTable().find(node_.op());
  if (!fn) return makeError(node_.describe(), ": no kernel for this op");
  std::vector<const RtValue *> args;
  args.reserve(in_.size());
  for (int s : in_) args.push_back(s < 0 ? nullptr : &frame.slots[s]);
  Environment env;
  for (const auto &[value, slot] : regionReads_) env.set(value, frame.slots[slot]);
  KernelContext kctx(node_, std::move(args), *ctx.interpreter, ctx.interpreter->options(), env);
  KILN_RETURN_IF_ERROR(fn(kctx));
  std::vector<RtValue> outs = kctx.takeOutputs();
  for (size_t i = 0; i < out_.size(); ++i)
    if (out_[i] >= 0) frame.slots[out_[i]] = std::move(outs[i]);
  return Status::success();
}

} // namespace kiln::cpu
