// ConvInteger and QLinearConv (1-D or 2-D, constant weights) on the integer
// GEMM (kernels/igemm.h, igemm_conv.h): per image and group, Y_g = W_g *
// im2col(X_g) with W_g packed once when the program loads and the im2col
// panels packed just in time; QLinearConv adds its i32 bias and requantizes
// each tile into the NCHW output as it leaves the microkernel. The zero
// points and scales are read from their slots on every run; runs of a form
// the kernel does not take go to the general variant.
#pragma once

#include "kernels/conv.h"
#include "kernels/igemm.h"
#include "runtime/cpu/program.h"

namespace kiln {
class Node;
}

namespace kiln::cpu {

class IntConvStep : public Step {
public:
  static Expected<std::unique_ptr<IntConvStep>> create(const Node &node,
                                                        std::vector<int> inputSlots,
                                                        int outputSlot);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }

  IntConvStep() = default;
  StepKind kind() const override { return StepKind::IntConv; }
  template <class A> void io(A &a) { a(label_, in_, out_, qlinear_, oneD_, shape_, weights_); }
  // Checks the fields, packs the weights per group and sets reads/writes.
  Status prepare();

private:
  // ConvInteger(x, w, x_zp, w_zp); QLinearConv(x, x_scale, x_zp, w,
  // w_scale, w_zp, y_scale, y_zp, B).
  int wInput() const { return qlinear_ ? 3 : 1; }
  int wZpInput() const { return qlinear_ ? 5 : 3; }

  std::string label_;
  std::vector<int> in_;
  int out_ = -1;
  bool qlinear_ = false;
  bool oneD_ = false;
  kernels::ConvShape shape_; // weight-side fields; N, H, W set per run
  Tensor weights_;           // [K, C/groups, (R,) S] u8 or i8
  std::vector<kernels::PackedInt8> packed_; // one per group
};

} // namespace kiln::cpu
