// How many loop iterations one invocation of a kernel runs (emit_glsl.h's
// mapping: the parallel loop and the loops of the first `depth` levels of
// `plan` run one iteration per invocation, every other loop runs whole),
// summed over all its loops, for a run's params; an If's body counts as
// taken. Drivers that stop loops past a budget
// (runtime/vulkan/driver_limits.h) are checked against it before a
// dispatch, so a kernel too long for the driver is an error, never a
// silently truncated result.
#pragma once

#include "codegen/gpu/grid_plan.h"
#include "kernel/kernel_ir.h"

#include <cstdint>
#include <vector>

namespace kiln::codegen {

// Saturates at INT64_MAX.
int64_t loopIterationsPerInvocation(const kir::Kernel &kernel, const std::vector<int64_t> &params,
                                    const gpu::GridPlan &plan = {}, int depth = 0);

} // namespace kiln::codegen
