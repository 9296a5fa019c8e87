// Lowers a group of elementwise nodes that share one output shape (a fused
// group, or a single node) to one Kernel IR loop nest, with the recipe that
// turns each run's concrete shapes into the kernel's size parameters.
//
// Algorithm:
//   1. The iteration space is the group's output shape. For every group
//      input (right-aligned, numpy broadcasting) and output dim, decide
//      statically whether the input varies along it ("full": its dim is the
//      same number or the same symbol) or is broadcast (its dim is 1). An
//      unknown dim is speculated to vary; shapesHold() checks the guess on
//      every run and the executor falls back to the interpreter when it is
//      wrong.
//   2. Output dims that are statically 1 are dropped; adjacent dims along
//      which every input has the same full/broadcast pattern are merged, so
//      a same-shape chain becomes one flat loop and a per-channel bias over
//      NCHW becomes a [N*C, H*W] nest.
//   3. Loops: the outermost is parallel, the innermost vectorized (every
//      access in it has unit or zero stride). A flat (one-dim) space is split
//      into [blocks, block] so it can be parallelized; the executor runs
//      the remainder as a second call.
//   4. Body: load each input once per iteration, emit every node's scalar
//      expansion (elementwise_ops.h) in order, store each group output.
//
// Sizes are run-time parameters (loop extents and strides), so one compiled
// kernel serves every size the symbolic shapes allow.
#pragma once

#include "ir/graph.h"
#include "kernel/kernel_ir.h"
#include "runtime/cpu/launch.h"
#include "support/status.h"
#include "support/tensor.h"

#include <string>
#include <vector>

namespace kiln::lower {

struct ElementwiseGroup {
  std::vector<const Node *> nodes;    // in topological order
  std::vector<const Value *> inputs;  // kernel buffers 0..n-1, in this order
  std::vector<const Value *> outputs; // kernel buffers n.., same shape
};

// The Kernel IR and the launch recipe (runtime/cpu/launch.h) the executor
// keeps; launch.symbol is the kernel's name.
struct ElementwiseKernel {
  kir::Kernel kernel;
  cpu::ElementwiseLaunch launch;
};

// Same rank and no two dims known to differ: unknown dims are speculated
// equal (the executor checks every run). The shape rule of one group.
bool compatibleShapes(const Shape &a, const Shape &b);

// Lowers the group; `vectorWidth` is the target's lane count for the
// group's widest element type. Fails (so the caller falls back to the
// interpreter) when a node has no scalar expansion or shapes cannot be
// proven to broadcast.
Expected<ElementwiseKernel> lowerElementwise(const ElementwiseGroup &group, const std::string &name,
                                             int vectorWidth);

} // namespace kiln::lower
