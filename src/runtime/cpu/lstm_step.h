// LSTM (f32, default activations, no peepholes, clip, input_forget or
// sequence_lens; any direction and layout; any subset of Y, Y_h, Y_c) on the
// packed LSTM kernel (kernels/rnn.h).
//
// Weights are packed once here when W, R and B are known at compile time:
// constants, or values computed from constants only (silero VAD slices its
// gate matrices out of one constant per layer; fold-constants leaves those
// slices alone so as not to copy weights inside the model, and the packed
// weights are a copy anyway). Otherwise they are read from their slots and
// packed on every run.
#pragma once

#include "runtime/cpu/program.h"
#include "kernels/rnn.h"

#include <optional>

namespace kiln {
class Node;
}

namespace kiln::cpu {

class LstmStep : public Step {
public:
  // `node` is an LSTM; inputSlots are its inputs (-1 when absent),
  // outputSlots its outputs (-1 when absent). An error (the compiler then
  // falls back to the interpreter) for what the kernel does not cover.
  static Expected<std::unique_ptr<LstmStep>> create(const Node &node, std::vector<int> inputSlots,
                                                    std::vector<int> outputSlots);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }

  LstmStep() = default;
  StepKind kind() const override { return StepKind::Lstm; }
  template <class A> void io(A &a) {
    a(label_, in_, out_, hidden_, input_, dirs_, batchFirst_, reverseOnly_, w_, r_, b_);
  }
  Status prepare(); // checks the fields, packs known weights, sets reads/writes

  // ONNX LSTM inputs.
  enum Input { kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kP = 7 };

private:
  // Packs W, R, B (tensors of the node's shapes) per direction.
  Expected<std::vector<kernels::PackedLstm>> pack(const Tensor &w, const Tensor &r,
                                                  const Tensor *b) const;

  std::string label_;
  std::vector<int> in_, out_;
  int64_t hidden_ = 0, input_ = 0, dirs_ = 1;
  bool batchFirst_ = false, reverseOnly_ = false;
  Tensor w_, r_, b_; // weights known at compile time (else undefined)
  std::vector<kernels::PackedLstm> packed_; // empty: pack on each run
};

} // namespace kiln::cpu
