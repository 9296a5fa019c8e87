// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool (f32, 1-D or
// 2-D, NCHW) on the pooling microkernels (kernels/pool.h). Output sizes are
// computed per run from the input, with ONNX's ceil_mode rule.
#pragma once

#include "runtime/cpu/program.h"
#include "kernels/pool.h"

namespace kiln {
class Node;
}

namespace kiln::cpu {

class PoolStep : public Step {
public:
  static Expected<std::unique_ptr<PoolStep>> create(const Node &node, int inputSlot, int outputSlot);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }

  PoolStep() = default;
  StepKind kind() const override { return StepKind::Pool; }
  template <class A> void io(A &a) {
    a(label_, kind_, in_, out_, rank_, ceilMode_, countIncludePad_, window_);
  }
  Status prepare(); // checks the fields, sets reads/writes

  enum class PoolKind { Max, Average, GlobalAverage, GlobalMax };

private:
  std::string label_;
  PoolKind kind_ = PoolKind::Max;
  int in_ = -1, out_ = -1;
  int rank_ = 4; // 3 for 1-D pooling (global pools take any rank >= 3)
  bool ceilMode_ = false, countIncludePad_ = false;
  kernels::PoolShape window_; // kernel, strides, dilations, pads; sizes per run
};

} // namespace kiln::cpu
