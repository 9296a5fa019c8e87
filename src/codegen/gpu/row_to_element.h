// GPU shaping: a kernel that builds each output row in passes becomes one
// that computes each element of the row whole, with the element in a
// variable (a register) until its one store.
//
// The CPU's lowerings of MatMul, Gemm, Conv and axis reductions (lower/)
// write a row of outputs in passes over it -- initialize, accumulate once
// per reduction step, apply the epilogue -- each pass a vector loop over
// the row inside the reduction loops: the right order for SIMD, the wrong
// one for a GPU, where one invocation per output and the reduction in a
// register is what runs fast. This rewrite interchanges them. In the
// parallel loop's body:
//
//   1. every store (the status word aside) lies in a "row loop": an
//      innermost loop, under any reduction loops and ifs, at least one of
//      them under another loop;
//   2. every access to a buffer they write is in a row loop, affine in its
//      variable with a constant coefficient; no variables.
//
// Each row loop is placed in the row (its offset: the conv lowering's row
// comes as a left border, an interior and a right border; row_to_element's
// rowOffsets() says how), and the body becomes
//
//   parallel u { pure prefix;
//                for r { body, each row loop inlined at var = r - offset,
//                        guarded by 0 <= r - offset < its trip count } }
//
// which computes the same when (a) every row loop's iterations land inside
// the row and (b) no two elements r != r' touch one location (one of them
// writing): then each location sees the same operations in the same order.
// Both depend on the run's sizes, so fitsLaunch() checks them per launch
// ((b) is the new row loop's grid-level check, grid_plan.h); the kernel as
// lowered runs where they fail (the lowerings make them hold). A written
// buffer whose accesses are all one element per r lives in a variable (a
// register) between its first and last access: loaded first unless the
// first access stores it unconditionally, stored once at the end. The row
// loop is level 1 of the kernel's grid plan: one invocation per element.
#pragma once

#include "codegen/gpu/grid_plan.h"
#include "kernel/kernel_ir.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::codegen::gpu {

struct RowShapedKernel {
  kir::Kernel kernel;
  kir::Affine rowUpper; // the row's length
  struct Segment {
    kir::Affine offset, upper;
  };
  std::vector<Segment> segments; // row loops that are not the whole row
  GridPlan plan;                 // of `kernel`; level 1 is the element loop
};

// The rewritten kernel, or nullopt where the pattern does not hold.
std::optional<RowShapedKernel> rowPassesToElements(const kir::Kernel &kernel);

// Whether the shaped kernel computes what the lowered one does for these
// params: every segment inside the row, and the elements independent.
bool fitsLaunch(const RowShapedKernel &shaped, const std::vector<int64_t> &params);

} // namespace kiln::codegen::gpu
