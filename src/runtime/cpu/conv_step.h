// Conv (1-D or 2-D, f32, constant weights) on the packed conv microkernels
// (kernels/conv.h), with the epilogue fuse-epilogues gave it. Weights are
// packed once here; the spatial size and batch come from each run, so one
// step serves every input size.
#pragma once

#include "kernels/conv.h"
#include "runtime/cpu/epilogue_plan.h"
#include "runtime/cpu/program.h"

#include <memory>

namespace kiln {
class Node;
}

namespace kiln::cpu {

class ConvStep : public Step {
public:
  // `node` is a Conv or a Fused(kind = conv) node; inputSlots are its inputs
  // (backend/cpu/step_factories.cpp).
  static Expected<std::unique_ptr<ConvStep>> create(const Node &node, std::vector<int> inputSlots,
                                                    int outputSlot);
  ConvStep() = default;
  StepKind kind() const override { return StepKind::Conv; }
  // The fields an artifact stores: the weights in their ONNX layout, packed
  // by prepare() when the program is built or loaded.
  template <class A> void io(A &a) { a(label_, in_, out_, oneD_, shape_, plan_, weights_, biasT_); }
  // Checks the fields, packs the weights and sets reads/writes.
  Status prepare();
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }

  // What a GPU target's tuned conv shader reads (backend/vulkan).
  const std::vector<int> &inputSlots() const { return in_; }
  int outputSlot() const { return out_; }
  bool oneD() const { return oneD_; }
  const kernels::ConvShape &shape() const { return shape_; }
  const EpiloguePlan &epilogue() const { return plan_; }
  const Tensor &weights() const { return weights_; }
  const Tensor &bias() const { return biasT_; }

private:
  std::string label_;
  std::vector<int> in_;
  int out_ = -1;
  bool oneD_ = false;
  kernels::ConvShape shape_; // weight-side fields; N, H, W set per run
  kernels::PackedConv packed_;
  EpiloguePlan plan_;
  Tensor weights_, biasT_; // [K, C/groups, (R,) S] and [K] (or undefined)
};

} // namespace kiln::cpu
