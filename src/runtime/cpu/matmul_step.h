// MatMul on the packed GEMM (kernels/gemm.h). With a constant 2-D right-hand
// side (a linear layer) the weights are packed once at compile time and the
// left side's leading dims fold into M; a fused epilogue (bias, activation,
// residual) is applied per tile. Otherwise both sides are runtime tensors
// and the batch dims broadcast as ONNX MatMul says.
#pragma once

#include "runtime/cpu/epilogue_plan.h"
#include "runtime/cpu/program.h"
#include "kernels/gemm.h"

#include <optional>

namespace kiln {
class Node;
}

namespace kiln::cpu {

class MatMulStep : public Step {
public:
  // `node` is a MatMul or a Fused(kind = matmul) node. Inputs: the node's
  // input slots (the weight slot is unused when packed).
  static Expected<std::unique_ptr<MatMulStep>> create(const Node &node, std::vector<int> inputSlots,
                                                       int outputSlot);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }

  MatMulStep() = default;
  StepKind kind() const override { return StepKind::MatMul; }
  template <class A> void io(A &a) { a(label_, in_, out_, plan_, weights_); }
  // Checks the fields, packs constant weights and sets reads/writes.
  Status prepare();

  // What a GPU target's tuned GEMM shader reads (backend/vulkan).
  const std::vector<int> &inputSlots() const { return in_; }
  int outputSlot() const { return out_; }
  const EpiloguePlan &epilogue() const { return plan_; }
  const Tensor &weights() const { return weights_; } // constant [K, N], or undefined

private:
  Status runPacked(Frame &frame, ExecContext &ctx) const;
  Status runGeneral(Frame &frame, ExecContext &ctx) const;

  std::string label_;
  std::vector<int> in_;
  int out_ = -1;
  Tensor weights_; // constant [K, N] weights, or undefined
  std::optional<kernels::PackedB> packed_;
  EpiloguePlan plan_;
};

} // namespace kiln::cpu
