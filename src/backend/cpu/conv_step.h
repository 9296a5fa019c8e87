// Conv (1-D or 2-D, f32, constant weights) on the packed conv microkernels
// (kernels/conv.h), with the epilogue fuse-epilogues gave it. Weights are
// packed once here; the spatial size and batch come from each run, so one
// step serves every input size.
#pragma once

#include "backend/cpu/epilogue_plan.h"
#include "backend/cpu/program.h"
#include "kernels/conv.h"

namespace kiln::cpu {

class ConvStep : public Step {
public:
  // `node` is a Conv or a Fused(kind = conv) node; inputSlots are its inputs.
  static Expected<std::unique_ptr<ConvStep>> create(const Node &node, std::vector<int> inputSlots,
                                                    int outputSlot);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }

private:
  ConvStep() = default;

  std::string label_;
  std::vector<int> in_;
  int out_ = -1;
  bool oneD_ = false;
  kernels::ConvShape shape_; // weight-side fields; N, H, W set per run
  kernels::PackedConv packed_;
  EpiloguePlan plan_;
};

} // namespace kiln::cpu
