#include "runtime/cpu/arena.h"

#include "runtime/memory_plan.h"

#include <cstdlib>

namespace kiln::cpu {

void ActivationArena::configure(std::vector<std::pair<int, int>> lifetimes) {
  slots_.assign(lifetimes.size(), {});
  for (size_t s = 0; s < lifetimes.size(); ++s) {
    slots_[s].first = lifetimes[s].first;
    slots_[s].last = lifetimes[s].second;
    slots_[s].managed = lifetimes[s].first >= 0;
  }
}

Tensor ActivationArena::allocate(int slot, DType dtype, const Shape64 &shape) {
  SlotState &st = slots_[static_cast<size_t>(slot)];
  const int64_t numel = numelOf(shape);
  if (!st.managed || numel == INT64_MAX || dtype == DType::String)
    return Tensor::uninitialized(dtype, shape);
  const int64_t bytes = numel * static_cast<int64_t>(dtypeSize(dtype));
  // An empty tensor needs no memory, and must not make the plan stale: a
  // slot only ever seen empty is left out of the plan, so every run would
  // replan and move the whole arena (a detector whose boxes are all
  // filtered out replanned on every run and ran at half speed).
  if (bytes == 0) return Tensor::uninitialized(dtype, shape);
  if (bytes > st.observed) st.observed = bytes;
  if (st.planned < bytes) {
    stale_ = true;
    return Tensor::uninitialized(dtype, shape);
  }
  // The slot's own buffer of an earlier run may still be referenced too: a
  // loop body's output that aliases it is the next iteration's input.
  if (!st.owner.expired()) {
    st.managed = false;
    return Tensor::uninitialized(dtype, shape);
  }
  for (int other : st.overlaps)
    if (!slots_[static_cast<size_t>(other)].owner.expired()) {
      st.managed = false; // an alias outlived its slot: never share this one
      return Tensor::uninitialized(dtype, shape);
    }
  char *data = arena_.get() + st.offset;
  std::shared_ptr<void> owner(data, [keep = arena_](void *) {});
  st.owner = owner;
  return Tensor::view(dtype, shape, std::move(owner), data);
}

void ActivationArena::endRun() {
  if (!stale_) return;
  stale_ = false;
  std::vector<runtime::BufferLifetime> buffers;
  std::vector<size_t> which;
  for (size_t s = 0; s < slots_.size(); ++s) {
    SlotState &st = slots_[s];
    st.planned = -1;
    st.overlaps.clear();
    if (!st.managed || st.observed == 0) continue;
    buffers.push_back({st.observed, st.first, st.last});
    which.push_back(s);
  }
  runtime::MemoryPlan plan = runtime::planMemory(buffers, 64);
  // Views of the previous arena keep it alive through their owners.
  arena_.reset(static_cast<char *>(std::aligned_alloc(64, static_cast<size_t>(
                   std::max<int64_t>(64, (plan.arenaBytes + 63) / 64 * 64)))),
               [](char *p) { std::free(p); });
  if (!arena_) return; // out of memory: keep allocating fresh
  arenaBytes_ = plan.arenaBytes;
  naiveBytes_ = plan.naiveBytes;
  for (size_t i = 0; i < which.size(); ++i) {
    SlotState &st = slots_[which[i]];
    st.planned = buffers[i].bytes;
    st.offset = plan.offsets[i];
  }
  for (size_t i = 0; i < which.size(); ++i)
    for (size_t j = 0; j < which.size(); ++j) {
      if (i == j) continue;
      const SlotState &a = slots_[which[i]], &b = slots_[which[j]];
      if (a.offset < b.offset + b.planned && b.offset < a.offset + a.planned)
        slots_[which[i]].overlaps.push_back(static_cast<int>(which[j]));
    }
}

} // namespace kiln::cpu
