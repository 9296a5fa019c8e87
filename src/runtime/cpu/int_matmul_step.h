// MatMulInteger and QLinearMatMul with constant weights on the integer GEMM
// (kernels/igemm.h): B, the weights, is packed once when the program loads;
// A's leading dims fold into M; the zero points and scales are read from
// their slots on every run (DynamicQuantizeLinear computes A's per run).
// QLinearMatMul requantizes each tile as it leaves the microkernel, so the
// i32 product is never stored. Runs the kernel does not take (a per-row A
// zero point, scales of other shapes, operands of another type or shape, a
// depth whose sums could overflow i32) go to the general variant.
#pragma once

#include "kernels/igemm.h"
#include "runtime/cpu/program.h"

#include <optional>

namespace kiln {
class Node;
}

namespace kiln::cpu {

class IntMatMulStep : public Step {
public:
  // `node` is MatMulInteger or QLinearMatMul whose B is known at compile
  // time and 2-D; inputSlots are the node's (B's slot is unused).
  static Expected<std::unique_ptr<IntMatMulStep>> create(const Node &node,
                                                          std::vector<int> inputSlots,
                                                          int outputSlot);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }

  IntMatMulStep() = default;
  StepKind kind() const override { return StepKind::IntMatMul; }
  template <class A> void io(A &a) { a(label_, in_, out_, qlinear_, weights_); }
  // Checks the fields, packs the weights and sets reads/writes.
  Status prepare();

private:
  // Input indices: MatMulInteger(A, B, a_zp, b_zp) and QLinearMatMul(A,
  // a_scale, a_zp, B, b_scale, b_zp, y_scale, y_zp); A is 0, a_zp 2 in both.
  int bInput() const { return qlinear_ ? 3 : 1; }
  int bZpInput() const { return qlinear_ ? 5 : 3; }

  std::string label_;
  std::vector<int> in_;
  int out_ = -1;
  bool qlinear_ = false;
  Tensor weights_; // [K, N] u8 or i8
  std::optional<kernels::PackedInt8> packed_;
};

} // namespace kiln::cpu
