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
#include "support/tensor.h"

#include <string>

namespace kiln::lower {

class ReductionKernel {
public:
  kir::Kernel kernel;

  enum class Kind { Reduce, Softmax, LogSoftmax, LayerNorm };
  Kind kind = Kind::Reduce;
  bool columns = false; // the columns loop shape (see the header)

  // The [outer, red, inner] view of an input shape, and the output shape;
  // an error when the run-time rank differs from the compiled one.
  Status view(const Shape64 &in, int64_t &outer, int64_t &red, int64_t &inner,
              Shape64 &outShape) const;
  // Buffers after the input and output, in kernel order: the f32 scale
  // (1/red, always present), scratch rows (columns softmax: two buffers of
  // outer*inner f32), and for LayerNorm the node's scale and bias inputs.
  int numScratch() const { return kind == Kind::Reduce || !columns ? 0 : 2; }

private:
  friend Expected<ReductionKernel> lowerReduction(const Node &, const std::string &, int);
  int rank_ = 0, axisBegin_ = 0, axisEnd_ = 0; // reduced axes [begin, end)
  bool keepdims_ = true;
};

// True for the ops above with f32 data, a known rank and contiguous
// constant axes.
bool canLowerReduction(const Node &node);
Expected<ReductionKernel> lowerReduction(const Node &node, const std::string &name,
                                         int vectorWidth);

} // namespace kiln::lower
