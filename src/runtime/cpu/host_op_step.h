// Ops run on the host by the runtime's own small kernels (host_ops.h):
// shape arithmetic (Shape, Size, Gather, ConstantOfShape), views (Reshape,
// Flatten, Squeeze, Unsqueeze, Identity), Pad, and f32 ReduceMean/Relu where
// the generated kernels do not apply (unknown ranks inside If branches).
// They keep compiled programs free of the interpreter, so an artifact runs
// on the runtime library alone.
#pragma once

#include "runtime/cpu/host_ops.h"
#include "runtime/cpu/program.h"

namespace kiln {
class Node;
}

namespace kiln::cpu {

class HostOpStep : public Step {
public:
  enum class Op {
    Reshape, Flatten, Squeeze, Unsqueeze, Identity, Shape, Size, Gather, ConstantOfShape, Pad,
    ReduceMean, Relu,
  };

  // The step for `node` when its op and attributes are covered; null
  // otherwise (backend/cpu/step_factories.cpp).
  static std::unique_ptr<HostOpStep> create(const Node &node, const std::vector<int> &in, int out);

  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  StepKind kind() const override { return StepKind::HostOp; }
  template <class A> void io(A &a) {
    a(label_, op_, in_, out_, allowZero_, axis_, start_, hasEnd_, end_, axes_, keepDims_,
      noopWithEmptyAxes_, padMode_, value_);
  }
  Status prepare(); // checks the fields, sets reads/writes

private:
  std::string label_;
  Op op_ = Op::Identity;
  std::vector<int> in_; // -1: absent optional input
  int out_ = -1;
  bool allowZero_ = false;          // Reshape
  int64_t axis_ = 0;                // Flatten, Gather
  int64_t start_ = 0, end_ = 0;     // Shape
  bool hasEnd_ = false;             // Shape
  std::vector<int64_t> axes_;       // Squeeze, Unsqueeze, ReduceMean (attribute forms)
  bool keepDims_ = true, noopWithEmptyAxes_ = false; // ReduceMean
  runtime::host::PadMode padMode_ = runtime::host::PadMode::Constant;
  Tensor value_;                    // ConstantOfShape
};

} // namespace kiln::cpu
