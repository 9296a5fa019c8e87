// How a kernel's loops spread over a GPU grid, beyond the parallel loop.
//
// The Kernel IR gives each parallel iteration to one invocation
// (codegen/vulkan/emit_glsl.h); the CPU's lowerings then loop over a whole
// row or plane inside it, which starves a GPU of threads (and runs into
// llvmpipe's per-invocation loop budget). A grid plan names the loops
// below the parallel loop whose iterations may run as invocations of their
// own, level by level:
//
//   level 1: the loops in the parallel loop's body (or in the kernel's
//            body when it has none), directly or under ifs, run side by
//            side: invocation j of the level runs iteration j of each;
//   level d+1: the loops in level d's loop, when level d has one.
//
// A level qualifies statically when everything else in its block is pure
// (no stores but the status word's, no variables, no loads of what its
// loops write; ifs are evaluated alike by every invocation), each
// variable a loop uses is private to one iteration of it (written first,
// used nowhere else), and every access to a buffer its loops write is an
// affine form (index_form.h) that shares its opaque part and its terms in
// the enclosing loops with every other such access. Whether the iterations
// are really independent depends on the run's sizes (a loop's stride may be
// a param), so chooseGrid() decides per launch: iterations j != j' of a
// level must touch disjoint elements of every buffer written there, which
// it checks on intervals (exactly for one loop variable) and, for accesses
// over the same lattice of elements, by the lattice taking each element
// once (mixed-radix strides: out[33600 * k + j] for j < 33600). It splits as many levels as pass,
// in order; the kernel's code runs unsplit levels whole, so any depth from 0 to levels.size()
// computes the same result.
//
// The status word (a buffer named "status" that the kernel only stores
// to) is exempt, as on the CPU, where threads report codes concurrently.
#pragma once

#include "kernel/kernel_ir.h"

#include <cstdint>
#include <vector>

namespace kiln::codegen::gpu {

// An access to a buffer that a level writes: its affine form less the
// opaque part and the terms in enclosing loops (equal for all the buffer's
// accesses, so they cancel): terms in the sibling's own loop variable,
// in loops inside it, and in params and constants.
struct GridAccess {
  int sibling = 0; // which loop of the level (index into GridLevel::loops)
  bool store = false;
  kir::Affine form;
};

struct GridLevel {
  struct Loop {
    int loopVar = -1;
    kir::Affine upper;
  };
  std::vector<Loop> loops;
  std::vector<std::vector<GridAccess>> written; // per buffer the level writes
};

struct GridPlan {
  std::vector<GridLevel> levels;
  std::vector<kir::Affine> loopUpper; // by loop variable
  int levelOf(int loopVar) const;     // 1-based; 0: not split
};

GridPlan planGrid(const kir::Kernel &kernel);

// A launch's grid: `depth` levels split, of `sizes[d]` invocations each
// (the widest loop of level d+1), times the parallel extent.
struct GridLaunch {
  int depth = 0;
  std::vector<int64_t> sizes;
  int64_t invocations = 0;
};

// The deepest split whose levels are independent for `params` and whose
// invocations stay within `maxInvocations`. `extent`: the parallel loop's
// iterations this launch runs (1 for a kernel without one).
// Whether level `level` (0-based) of the plan may run split for `params`.
bool levelIndependent(const GridPlan &plan, size_t level, const std::vector<int64_t> &params);

GridLaunch chooseGrid(const GridPlan &plan, const std::vector<int64_t> &params, int64_t extent,
                      int64_t maxInvocations);

} // namespace kiln::codegen::gpu
