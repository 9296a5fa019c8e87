// A Fused attention node (passes/attention_region.h) on the flash-style
// kernel (kernels/attention.h): softmax(scale * Q K^T + mask) V without the
// score matrix in memory.
//
// The step takes every shape the region's nodes accept, so it has no
// general variant (like ConvTranspose, it works its geometry out on every
// run): the batch dims of Q, K^T, V and the mask broadcast as ONNX says
// (the problem count is their broadcast), and a mask of one row or column
// broadcasts along Sq or Sk. Only a mask whose last two dims would grow the
// scores (the compiler never matches one: recognize-attention) and shapes
// the MatMuls reject are errors.
#pragma once

#include "runtime/cpu/program.h"

namespace kiln {
class Node;
}

namespace kiln::cpu {

class AttentionStep : public Step {
public:
  // `node` is a Fused attention node; inputs: its slots (q, kt, v[, mask]).
  static Expected<std::unique_ptr<AttentionStep>>
  create(const Node &node, std::vector<int> inputSlots, int outputSlot);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }

  AttentionStep() = default;
  StepKind kind() const override { return StepKind::Attention; }
  template <class A> void io(A &a) { a(label_, in_, out_, scale_); }
  // Checks the fields and sets reads/writes.
  Status prepare();

private:
  std::string label_;
  std::vector<int> in_; // q, kt, v, then the mask when there is one
  int out_ = -1;
  float scale_ = 1.0f;
};

} // namespace kiln::cpu
