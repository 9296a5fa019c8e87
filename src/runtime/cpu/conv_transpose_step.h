// ConvTranspose (1-D or 2-D, f32, constant weights and bias) on the packed
// transposed-convolution kernel (kernels/conv_transpose.h). Weights are
// packed once here; the output size and padding (pads, output_padding,
// output_shape, auto_pad) are worked out on each run from the input size,
// as the interpreter does, so one step serves every input size.
#pragma once

#include "runtime/cpu/program.h"
#include "kernels/conv_transpose.h"

namespace kiln {
class Node;
}

namespace kiln::cpu {

class ConvTransposeStep : public Step {
public:
  // `node` is a ConvTranspose; inputSlots are its inputs. An error (the
  // compiler then falls back to the interpreter) for non-constant or
  // non-f32 weights, ranks other than 3 and 4, or attributes that do not fit.
  static Expected<std::unique_ptr<ConvTransposeStep>>
  create(const Node &node, std::vector<int> inputSlots, int outputSlot);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }

  ConvTransposeStep() = default;
  StepKind kind() const override { return StepKind::ConvTranspose; }
  template <class A> void io(A &a) {
    a(label_, in_, out_, oneD_, autoPad_, C_, K_, groups_, axes_, weights_, biasT_);
  }
  Status prepare(); // checks the fields, packs the weights, sets reads/writes

private:

  // One spatial axis' attributes.
  struct Axis {
    int64_t kernel = 1, stride = 1, dilation = 1, padBegin = 0, padEnd = 0, outputPadding = 0;
    int64_t requestedOut = -1; // output_shape, or -1
    template <class A> void io(A &a) {
      a(kernel, stride, dilation, padBegin, padEnd, outputPadding, requestedOut);
    }
  };
  // The output size and begin padding of an axis for input size `in`.
  std::pair<int64_t, int64_t> geometry(const Axis &a, int64_t in) const;

  std::string label_;
  int in_ = -1, out_ = -1;
  bool oneD_ = false;
  std::string autoPad_;
  int64_t C_ = 0, K_ = 0, groups_ = 1;
  std::vector<Axis> axes_; // H then W (1-D: just the one)
  kernels::PackedConvTranspose packed_;
  std::vector<float> bias_; // for runs without input pixels
  Tensor weights_, biasT_;  // ONNX layout; packed by prepare()
};

} // namespace kiln::cpu
