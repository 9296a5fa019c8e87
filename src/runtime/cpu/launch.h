// What the executor needs to launch a generated kernel on one run's shapes:
// the recipe from concrete shapes to the kernel's size parameters. The
// lowerings (lower/elementwise.h, lower/reduce.h) fill these in next to the
// Kernel IR they emit; the runtime keeps only these (and the kernel's
// symbol), so it needs neither the IR nor the compiler.
#pragma once

#include "support/status.h"
#include "support/tensor.h"

#include <string>
#include <vector>

namespace kiln::cpu {

// An elementwise group's loop nest (see lower/elementwise.h for the
// algorithm that builds it).
struct ElementwiseLaunch {
  std::string symbol; // the kernel's name in the object code

  // Checks one run's concrete shapes against what the kernel was built for
  // (full inputs match the output dim, broadcast ones are 1), so a symbol
  // bound inconsistently is an error, not a wrong answer.
  Status checkShapes(const std::vector<Shape64> &inputShapes, const Shape64 &outShape) const;
  // The full check of one run: propagates the concrete input shapes through
  // the group's nodes, and holds when every group output has the iteration
  // shape `outShape` (the broadcast of all inputs) and checkShapes passes.
  bool shapesHold(const std::vector<Shape64> &inputShapes, const Shape64 &outShape) const;
  // Extents of the merged loops for an output shape.
  std::vector<int64_t> loopExtents(const Shape64 &outShape) const;
  // One merged loop: the kernel itself is [blocks, block].
  bool flat() const { return loopDims.size() == 1; }
  // Whether input i advances along the flat loop (else it is a scalar).
  bool inputIsFull(size_t i) const { return full[i][0]; }
  // All size parameters, given the extents of the kernel's loops (for a flat
  // kernel: {blocks, block}).
  std::vector<int64_t> params(const std::vector<int64_t> &kernelExtents) const;
  // Rejects descriptors that would index out of bounds (a corrupt artifact).
  Status validate(size_t numInputs) const;

  std::vector<std::vector<int>> loopDims;   // per merged loop: the output dims in it
  std::vector<std::vector<bool>> full;       // per input, per merged loop
  std::vector<std::vector<bool>> kernelFull; // per input, per kernel loop
  int64_t numOutputs = 0;
  // The group as a shape program: node i reads values nodeOperands[i]
  // (group inputs are values 0..n-1, node i's result is value n+i);
  // outputValues are the values stored.
  std::vector<std::vector<int>> nodeOperands;
  std::vector<int> outputValues;
  int outRank = 0;

  template <class A> void io(A &a) {
    a(symbol, loopDims, full, kernelFull, numOutputs, nodeOperands, outputValues, outRank);
  }
};

// A reduction, softmax, log-softmax or layer norm over contiguous axes (see
// lower/reduce.h).
struct ReductionLaunch {
  std::string symbol;
  enum class Kind { Reduce, Softmax, LogSoftmax, LayerNorm };
  Kind kind = Kind::Reduce;
  bool columns = false; // the columns loop shape (see lower/reduce.h)
  int rank = 0, axisBegin = 0, axisEnd = 0; // reduced axes [begin, end)
  bool keepdims = true;

  // The [outer, red, inner] view of an input shape, and the output shape;
  // an error when the run-time rank differs from the compiled one.
  Status view(const Shape64 &in, int64_t &outer, int64_t &red, int64_t &inner,
              Shape64 &outShape) const;
  // Buffers after the input and output, in kernel order: the f32 scale
  // (1/red, always present), scratch rows (columns softmax: two buffers of
  // outer*inner f32), and for LayerNorm the node's scale and bias inputs.
  int numScratch() const { return kind == Kind::Reduce || !columns ? 0 : 2; }
  Status validate() const;

  template <class A> void io(A &a) { a(symbol, kind, columns, rank, axisBegin, axisEnd, keepdims); }
};

} // namespace kiln::cpu
