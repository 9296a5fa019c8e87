// GPU shaping: a kernel that builds each output row in passes becomes one
// that computes each element of the row whole, with the element in a
// variable (a register) until its one store.
//
// The CPU's lowerings of MatMul, Gemm and Conv (lower/) write a row of
// outputs in passes over it -- initialize, accumulate once per reduction
// step, apply the epilogue -- each pass a vector loop over the row inside
// the reduction loops: the right order for SIMD, the wrong one for a GPU,
// where one invocation per output and the reduction in a register is what
// runs fast. This rewrite interchanges them. In the parallel loop's body:
//
//   1. every store (the status word aside) lies in a "row loop": an
//      innermost loop, under any reduction loops and ifs, at least one of
//      them under another loop;
//   2. every access to a buffer they write is in a row loop, at element
//      c * (var + offset) + rest, with a constant c != 0 and rest (the
//      parallel loop's terms, one value defined at the body's top level)
//      the same for all of them, and offset (params, constants) the same
//      for every access of one row loop: iteration var of a row loop
//      touches element r = var + offset of the row and no other. The
//      first row loop (the initializing pass) has offset 0 and spans the
//      row; the others may be segments of it (the conv lowering's left
//      border, interior and right border);
//   3. no variables.
//
// Then element r's operations touch nothing another element touches, so
// running element by element, each element's passes in their order,
// computes the same:
//
//   parallel u { pure prefix;
//                for r { body, each row loop inlined at var = r - offset,
//                        guarded by 0 <= r - offset < its trip count } }
//
// provided every segment lies inside the row, which depends on the sizes
// of the run: segmentsFit() checks it per launch (the lowerings make it
// hold; a launch where it did not would run the kernel unshaped).
//
// and each written element lives in a variable between its first and last
// access (loaded first unless the first access is an unconditional store),
// stored once at the end. The new row loop is one level of the grid
// (grid_plan.h): one invocation per output element.
#pragma once

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
};

// The rewritten kernel, or nullopt where the pattern does not hold.
std::optional<RowShapedKernel> rowPassesToElements(const kir::Kernel &kernel);

// Whether every segment lies inside the row for these params (trivially
// true without segments).
bool segmentsFit(const RowShapedKernel &shaped, const std::vector<int64_t> &params);

} // namespace kiln::codegen::gpu
