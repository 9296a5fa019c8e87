// Turns the epilogue nodes of a Fused conv/matmul region (fuse-epilogues)
// into a kernels::Epilogue the microkernels apply per tile. Constants are
// read from the model (which outlives the step); scalars that must act per
// channel are expanded into storage the plan owns; a residual Add names the
// Fused node input whose run-time tensor supplies it.
#pragma once

#include "ir/graph.h"
#include "kernels/epilogue.h"
#include "support/status.h"

#include <vector>

namespace kiln::cpu {

struct EpiloguePlan {
  kernels::Epilogue epilogue;
  int residualOp = -1;    // index of the kAddTensor op (its data is set per run)
  int residualInput = -1; // Fused node input holding the residual
  std::vector<std::vector<float>> owned; // per-channel copies of scalar constants
};

// `fused` is the Fused node, whose region starts with the producer (Conv or
// MatMul) followed by the epilogue nodes. Channels run along the rows of the
// output matrix for a conv (rowChannels) and along its columns for a matmul.
// Fails on anything the epilogue cannot express; the caller then runs the
// node some other way.
Expected<EpiloguePlan> planEpilogue(const Node &fused, int64_t channels, bool rowChannels);

} // namespace kiln::cpu
