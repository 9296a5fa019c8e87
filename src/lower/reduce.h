// Lowers reductions along a contiguous run of axes to Kernel IR: ReduceSum,
// ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare, ReduceL1, ReduceL2,
// Softmax, LogSoftmax and LayerNormalization (one output).
//
// The input is viewed as [outer, red, inner]: `red` is the product of the
// reduced dims, `inner` of the dims after them. Two loop shapes:
//   rows    (inner == 1 statically): parallel over outer rows, each row
//           reduced into a scalar variable by a vectorized loop;
//   columns (otherwise): parallel over outer, and for each reduced index a
//           vectorized loop over the contiguous inner dim that accumulates
//           into a row of accumulators (the output itself for reductions,
//           scratch buffers for softmax's max and sum).
// Sizes are run-time parameters: params = {outer, red, inner}. Scalars that
// depend on sizes (1/red for a mean) arrive in a one-element f32 buffer.
#pragma once

#include "ir/graph.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"
#include "runtime/cpu/launch.h"
#include "support/tensor.h"

#include <string>

namespace kiln::lower {

// The Kernel IR and the launch recipe (runtime/cpu/launch.h) the executor
// keeps; launch.symbol is the kernel's name.
struct ReductionKernel {
  kir::Kernel kernel;
  cpu::ReductionLaunch launch;
};

// True for the ops above with f32 data, a known rank and contiguous
// constant axes.
bool canLowerReduction(const Node &node);
Expected<ReductionKernel> lowerReduction(const Node &node, const std::string &name,
                                         int vectorWidth);

} // namespace kiln::lower
