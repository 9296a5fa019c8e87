// Conv (1-D or 2-D, f32, constant weights) on the packed conv microkernels
// (kernels/conv.h), with the epilogue fuse-epilogues gave it. Weights are
// packed once here; the spatial size and batch come from each run, so one
// step serves every input size.
#pragma once

#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "runtime/cpu/epilogue_plan.h"
#include "runtime/cpu/program.h"

#include <memory>
#include <mutex>
#include <optional>

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

private:
  // Convs with a handful of output pixels (silero's STFT: 4 pixels, 258
  // channels, 256 taps; the squeeze-excitation 1x1 convs of MobileNetV3 and
  // EfficientNet on a 1x1 map) waste 15 of the GEMM's 16 columns; they run
  // as Y^T[P x K] = im2col(X)^T[P x CRS] * W^T with the weights packed as B
  // (a 1x1 conv reads X^T in place), streaming the weights once.
  static constexpr int64_t kSmallPixels = 8;
  void runSmallSpatial(const kernels::ConvShape &s, const float *x, float *y,
                       const kernels::Epilogue &ep, ExecContext &ctx) const;
  // W^T packed as B, on the first run with few output pixels (groups == 1):
  // packing it for every conv would double the weights and the load time
  // for a path most convs never take. Thread-safe.
  const kernels::PackedB &transposedWeights() const;
  static void im2colRows(const kernels::ConvShape &s, const float *x, float *col);
  void transposeOut(const kernels::ConvShape &s, const float *yt, float *y,
                    const kernels::Epilogue &ep) const;

  std::string label_;
  std::vector<int> in_;
  int out_ = -1;
  bool oneD_ = false;
  kernels::ConvShape shape_; // weight-side fields; N, H, W set per run
  kernels::PackedConv packed_;
  EpiloguePlan plan_;
  struct Transposed {
    std::once_flag once;
    kernels::PackedB weights;
  };
  std::unique_ptr<Transposed> transposed_ = std::make_unique<Transposed>();
  std::vector<float> bias_;
  Tensor weights_, biasT_; // [K, C/groups, (R,) S] and [K] (or undefined)
};

} // namespace kiln::cpu
