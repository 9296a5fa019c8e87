// Conv (1-D or 2-D, f32, constant weights) on the packed conv microkernels
// (kernels/conv.h), with the epilogue fuse-epilogues gave it. Weights are
// packed once here; the spatial size and batch come from each run, so one
// step serves every input size.
#pragma once

#include "backend/cpu/epilogue_plan.h"
#include "backend/cpu/program.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"

#include <optional>

namespace kiln::cpu {

class ConvStep : public Step {
public:
  // `node` is a Conv or a Fused(kind = conv) node; inputSlots are its inputs.
  static Expected<std::unique_ptr<ConvStep>> create(const Node &node, std::vector<int> inputSlots,
                                                    int outputSlot);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }

private:
  ConvStep() = default;
  // Convs with a handful of output pixels (silero's STFT: 4 pixels, 258
  // channels, 256 taps) waste the GEMM's column tiles; they run as
  // Y^T[P x K] = im2col(X)^T[P x CRS] * W^T with the weights packed as B.
  static constexpr int64_t kSmallPixels = 8;
  void runSmallSpatial(const kernels::ConvShape &s, const float *x, float *y,
                       const kernels::Epilogue &ep, ExecContext &ctx) const;

  std::string label_;
  std::vector<int> in_;
  int out_ = -1;
  bool oneD_ = false;
  kernels::ConvShape shape_; // weight-side fields; N, H, W set per run
  kernels::PackedConv packed_;
  EpiloguePlan plan_;
  std::optional<kernels::PackedB> transposedWeights_; // 1-D, groups == 1 only
  std::vector<float> bias_;
};

} // namespace kiln::cpu
