// Activation memory of one program: the static memory planner
// (runtime/memory_plan.h) applied to the sizes the program's buffers take.
//
// Lifetimes are static: a slot's buffer lives from the step that writes it
// to the last step that reads the slot. Sizes may depend on symbolic dims,
// so they are observed: a run allocates every buffer it has no plan for
// fresh and records its size; after such a run the buffers are planned
// (liveness-based reuse) into one arena, which later runs hand out as
// views. A buffer that outgrows its plan is allocated fresh and triggers a
// new plan after the run.
//
// Safety does not rest on the lifetimes being right: a value can outlive
// its slot when another slot aliases it (a Reshape's output shares its
// input's memory). Before handing out memory, the arena checks that every
// buffer planned to overlap it is no longer referenced; if one is, this
// slot gets fresh memory from then on. So a plan can only cost speed,
// never correctness.
//
// Not thread-safe: one run of the owning program at a time.
#pragma once

#include "support/tensor.h"

#include <memory>
#include <vector>

namespace kiln::cpu {

class ActivationArena {
public:
  // lifetimes[slot] = {first, last} step for slots whose buffers the arena
  // may hold, {-1, -1} for the others.
  void configure(std::vector<std::pair<int, int>> lifetimes);

  // Memory for `slot`: a view into the arena when planned and large enough,
  // else a fresh tensor. Contents are undefined: the step writes them all.
  Tensor allocate(int slot, DType dtype, const Shape64 &shape);
  // Replans after a run that allocated anything fresh.
  void endRun();

  // Bytes of the current plan (0 before one) and of every planned buffer
  // side by side (what no reuse would take).
  int64_t arenaBytes() const { return arenaBytes_; }
  int64_t naiveBytes() const { return naiveBytes_; }

private:
  struct SlotState {
    int first = -1, last = -1;
    bool managed = false;
    int64_t observed = 0; // largest size seen
    int64_t planned = -1; // bytes in the plan, -1 when not planned
    int64_t offset = 0;
    std::vector<int> overlaps; // slots planned over the same bytes
    std::weak_ptr<void> owner; // the last buffer handed out
  };
  std::vector<SlotState> slots_;
  std::shared_ptr<char> arena_;
  int64_t arenaBytes_ = 0, naiveBytes_ = 0;
  bool stale_ = false;
};

} // namespace kiln::cpu
