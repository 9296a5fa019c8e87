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

class ElementwiseKernel {
public:
  kir::Kernel kernel;

  // Checks one run's concrete shapes against what the kernel was built for
  // (full inputs match the output dim, broadcast ones are 1), so a symbol
  // bound inconsistently is an error, not a wrong answer.
  Status checkShapes(const std::vector<Shape64> &inputShapes, const Shape64 &outShape) const;
  // The full check of one run: propagates the concrete input shapes through
  // the group's nodes, and holds when every group output has the iteration
  // shape `outShape` (the broadcast of all inputs) and checkShapes passes.
  bool shapesHold(const std::vector<Shape64> &inputShapes, const Shape64 &outShape) const;
  // Extents of the merged loops (step 2 of the header) for an output shape.
  std::vector<int64_t> loopExtents(const Shape64 &outShape) const;
  // One merged loop: the kernel itself is [blocks, block] (step 3).
  bool flat() const { return loopDims_.size() == 1; }
  // Whether input i advances along the flat loop (else it is a scalar).
  bool inputIsFull(size_t i) const { return full_[i][0]; }
  // All size parameters, given the extents of the kernel's loops (for a flat
  // kernel: {blocks, block}).
  std::vector<int64_t> params(const std::vector<int64_t> &kernelExtents) const;

private:
  friend Expected<ElementwiseKernel> lowerElementwise(const ElementwiseGroup &, const std::string &,
                                                      int);
  std::vector<std::vector<int>> loopDims_; // per merged loop: the output dims in it
  std::vector<std::vector<bool>> full_;    // per input, per merged loop
  std::vector<std::vector<bool>> kernelFull_; // per input, per kernel loop
  size_t numOutputs_ = 0;
  // The group as a shape program: node i reads values nodeOperands_[i]
  // (group inputs are values 0..n-1, node i's result is value n+i);
  // outputValues_ are the values stored.
  std::vector<std::vector<int>> nodeOperands_;
  std::vector<int> outputValues_;
  int outRank_ = 0;
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
