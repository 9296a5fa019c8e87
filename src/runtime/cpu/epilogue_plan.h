// Turns the epilogue nodes of a Fused conv/matmul region (fuse-epilogues)
// into a kernels::Epilogue the microkernels apply per tile. Constants are
// read from the model (which outlives the step); scalars that must act per
// channel are expanded into storage the plan owns; a residual Add names the
// Fused node input whose run-time tensor supplies it.
#pragma once

#include "kernels/epilogue.h"
#include "support/status.h"

#include <vector>

namespace kiln {
class Node;
}

namespace kiln::cpu {

struct EpiloguePlan {
  kernels::Epilogue epilogue;
  int residualOp = -1;    // index of the kAddTensor op (its data is set per run)
  int residualInput = -1; // Fused node input holding the residual
  int64_t channels = 0;   // length of every per-channel data array
  std::vector<std::vector<float>> owned; // per-channel copies of scalar constants

  // Saving copies every op's data; a loaded plan owns all of it.
  template <class A> void io(A &a) {
    a(residualOp, residualInput, channels, epilogue.count);
    if constexpr (A::kLoading) {
      owned.clear();
      if (epilogue.count < 0 || epilogue.count > kernels::Epilogue::kMaxOps || channels < 0 ||
          residualOp >= epilogue.count)
        return a.fail("corrupt epilogue");
    }
    for (int i = 0; i < epilogue.count; ++i) {
      kernels::EpilogueOp &op = epilogue.ops[i];
      std::vector<float> data;
      if constexpr (!A::kLoading)
        if (op.data && i != residualOp) data.assign(op.data, op.data + channels);
      a(op.kind, op.a, op.b, op.ld, data);
      if constexpr (A::kLoading) {
        op.data = nullptr;
        if (static_cast<int>(op.kind) < 0 || op.kind > kernels::EpilogueKind::kGeluTanh ||
            (!data.empty() && int64_t(data.size()) != channels))
          return a.fail("corrupt epilogue op");
        const bool needsData = op.kind == kernels::EpilogueKind::kAddRowBias ||
                               op.kind == kernels::EpilogueKind::kAddColBias ||
                               op.kind == kernels::EpilogueKind::kMulRowScale ||
                               op.kind == kernels::EpilogueKind::kMulColScale;
        if (needsData != !data.empty()) return a.fail("corrupt epilogue data");
        if (!data.empty()) {
          owned.push_back(std::move(data));
          op.data = owned.back().data();
        }
      }
    }
  }
};

// `fused` is the Fused node, whose region starts with the producer (Conv or
// MatMul) followed by the epilogue nodes. Channels run along the rows of the
// output matrix for a conv (rowChannels) and along its columns for a matmul.
// Fails on anything the epilogue cannot express; the caller then runs the
// node some other way.
Expected<EpiloguePlan> planEpilogue(const kiln::Node &fused, int64_t channels, bool rowChannels);

} // namespace kiln::cpu
