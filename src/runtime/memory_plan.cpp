#include "runtime/memory_plan.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace kiln::runtime {
namespace {

// Refinement after the greedy-by-size pass (see the header): at most this many
// rounds, and at most this much work in all (buffers placed plus conflicts
// visited), so a large graph gets the few rounds it can afford and the planner
// stays within a few milliseconds.
constexpr int kRefineRounds = 32;
constexpr int64_t kRefineWork = int64_t(1) << 17;
// Per round: buffers that ended above the lower bound move up in the order by
// this factor, and their priorities and their conflicts' are shaken by +-10%
// so that rounds explore new orders there instead of cycling between two.
// Only that neighbourhood changes: shaking every buffer would spoil the parts
// of the plan that already fit (on long chains it never converged).
constexpr double kPromote = 1.5;
constexpr double kJitter = 0.1;
// Conflict lists beyond this many entries (4 bytes each) are not built: such a
// dense plan is placed once, walking all placed buffers in offset order.
constexpr int64_t kMaxConflictEntries = int64_t(1) << 22;

int64_t alignUp(int64_t x, int64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

// splitmix64: a fixed, portable generator, so a plan never differs between
// runs or standard libraries.
double uniform01(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

// The most aligned bytes live at any one step: a sweep over start and end
// events, ends first at equal steps, so a buffer ending at step s and one
// starting at s + 1 are never counted together.
int64_t liveBytesPeak(const std::vector<BufferLifetime> &buffers,
                      const std::vector<int64_t> &sizes) {
  std::vector<std::pair<int64_t, int64_t>> events; // (step, +-bytes); int64: lastStep + 1
  events.reserve(2 * buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (sizes[i] == 0) continue;
    events.emplace_back(buffers[i].firstStep, sizes[i]);
    events.emplace_back(int64_t(buffers[i].lastStep) + 1, -sizes[i]);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (auto [step, delta] : events) peak = std::max(peak, live += delta);
  return peak;
}

// Who is live together with whom, as adjacency lists: the neighbours of
// buffer i are list[start[i] .. start[i + 1]). Built once, so each placement
// visits only its own conflicts (a handful in chain-like graphs).
struct ConflictLists {
  std::vector<uint32_t> start, list;
};

// Calls pair(a, b) for every two buffers of `ids` live at a common step, by a
// sweep in first-step order; gives up (returns false) past maxPairs pairs.
template <typename Pair>
bool forEachLivePair(const std::vector<BufferLifetime> &buffers, const std::vector<uint32_t> &ids,
                     int64_t maxPairs, Pair &&pair) {
  std::vector<uint32_t> active;
  int64_t pairs = 0;
  for (uint32_t i : ids) {
    std::erase_if(active, [&](uint32_t j) { return buffers[j].lastStep < buffers[i].firstStep; });
    if ((pairs += int64_t(active.size())) > maxPairs) return false;
    for (uint32_t j : active) pair(i, j);
    active.push_back(i);
  }
  return true;
}

bool buildConflictLists(const std::vector<BufferLifetime> &buffers, std::vector<uint32_t> ids,
                        ConflictLists &out) {
  std::sort(ids.begin(), ids.end(),
            [&](uint32_t a, uint32_t b) { return buffers[a].firstStep < buffers[b].firstStep; });
  std::vector<uint32_t> count(buffers.size() + 1, 0);
  if (!forEachLivePair(buffers, ids, kMaxConflictEntries / 2, [&](uint32_t a, uint32_t b) {
        ++count[a];
        ++count[b];
      }))
    return false;
  out.start.assign(buffers.size() + 1, 0);
  for (size_t i = 0; i < buffers.size(); ++i) out.start[i + 1] = out.start[i] + count[i];
  out.list.resize(out.start.back());
  std::vector<uint32_t> cursor(out.start.begin(), out.start.end() - 1);
  forEachLivePair(buffers, ids, kMaxConflictEntries / 2, [&](uint32_t a, uint32_t b) {
    out.list[cursor[a]++] = b;
    out.list[cursor[b]++] = a;
  });
  return true;
}

// One greedy pass: places the buffers in `order`, each at the lowest offset
// where it fits between the placed buffers it is live with (gaps included).
class Placer {
public:
  Placer(const std::vector<BufferLifetime> &buffers, const std::vector<int64_t> &sizes,
         const ConflictLists *lists)
      : buffers_(buffers), sizes_(sizes), lists_(lists), placed_(buffers.size()) {}

  // Fills offsets[i] for every i in `order`; returns the arena it needs.
  int64_t run(const std::vector<uint32_t> &order, std::vector<int64_t> &offsets) {
    std::fill(placed_.begin(), placed_.end(), false);
    byOffset_.clear();
    int64_t arena = 0;
    for (uint32_t i : order) {
      int64_t offset = lists_ ? lowestFitSparse(i, offsets) : lowestFitDense(i);
      offsets[i] = offset;
      placed_[i] = true;
      arena = std::max(arena, offset + sizes_[i]);
    }
    return arena;
  }

private:
  // Sorts the few placed conflicts by offset; in that order the first gap
  // that fits is the lowest one.
  int64_t lowestFitSparse(uint32_t i, const std::vector<int64_t> &offsets) {
    spans_.clear();
    for (uint32_t k = lists_->start[i]; k < lists_->start[i + 1]; ++k) {
      uint32_t j = lists_->list[k];
      if (placed_[j]) spans_.push_back({offsets[j], offsets[j] + sizes_[j]});
    }
    std::sort(spans_.begin(), spans_.end());
    int64_t offset = 0;
    for (auto [begin, end] : spans_) {
      if (begin >= offset + sizes_[i]) break;
      offset = std::max(offset, end);
    }
    return offset;
  }

  // Dense plans: walks every placed buffer, kept in offset order, skipping
  // those not live with i; no per-placement sort, so O(n) a placement. The
  // entries carry their lifetimes so the walk reads one array in order.
  int64_t lowestFitDense(uint32_t i) {
    const BufferLifetime &b = buffers_[i];
    int64_t offset = 0;
    for (const Placed &p : byOffset_) {
      if (p.lastStep < b.firstStep || p.firstStep > b.lastStep) continue;
      if (p.offset >= offset + sizes_[i]) break;
      offset = std::max(offset, p.end);
    }
    auto at = std::upper_bound(byOffset_.begin(), byOffset_.end(), offset,
                               [](int64_t off, const Placed &p) { return off < p.offset; });
    byOffset_.insert(at, {offset, offset + sizes_[i], b.firstStep, b.lastStep});
    return offset;
  }

  struct Placed {
    int64_t offset, end;
    int32_t firstStep, lastStep;
  };
  const std::vector<BufferLifetime> &buffers_;
  const std::vector<int64_t> &sizes_;
  const ConflictLists *lists_; // null for a dense plan
  std::vector<bool> placed_;
  std::vector<std::pair<int64_t, int64_t>> spans_; // [offset, end) of placed conflicts
  std::vector<Placed> byOffset_;                   // dense plans: placed buffers by offset
};

// Orders buffers by priority, highest first; ties go to the earlier first
// step, then to request order, so plans are deterministic.
void sortByPriority(std::vector<uint32_t> &order, const std::vector<double> &priority,
                    const std::vector<BufferLifetime> &buffers) {
  struct Key {
    double priority;
    int32_t firstStep;
    uint32_t id;
  };
  std::vector<Key> keys;
  keys.reserve(order.size());
  for (uint32_t i : order) keys.push_back({priority[i], buffers[i].firstStep, i});
  std::sort(keys.begin(), keys.end(), [](const Key &a, const Key &b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.firstStep != b.firstStep) return a.firstStep < b.firstStep;
    return a.id < b.id;
  });
  for (size_t k = 0; k < keys.size(); ++k) order[k] = keys[k].id;
}

} // namespace

MemoryPlan planMemory(const std::vector<BufferLifetime> &buffers, int64_t alignment) {
  assert(alignment > 0);
  const size_t n = buffers.size();
  MemoryPlan plan;
  plan.offsets.assign(n, 0);

  std::vector<int64_t> sizes(n);
  std::vector<uint32_t> order; // empty buffers take no space: they keep offset 0
  for (size_t i = 0; i < n; ++i) {
    assert(buffers[i].bytes >= 0 && buffers[i].firstStep <= buffers[i].lastStep);
    sizes[i] = alignUp(buffers[i].bytes, alignment);
    plan.naiveBytes += sizes[i];
    if (sizes[i] > 0) order.push_back(uint32_t(i));
  }
  plan.lowerBound = liveBytesPeak(buffers, sizes);

  ConflictLists lists;
  bool sparse = buildConflictLists(buffers, order, lists);
  Placer placer(buffers, sizes, sparse ? &lists : nullptr);

  // Round 0: plain greedy by size.
  std::vector<double> priority(sizes.begin(), sizes.end());
  sortByPriority(order, priority, buffers);
  plan.arenaBytes = placer.run(order, plan.offsets);

  // Refinement rounds ("squeaky wheel"), while a better plan may exist and
  // the work budget lasts; the best plan found is kept.
  int64_t passWork = int64_t(order.size() + lists.list.size());
  int rounds =
      sparse ? int(std::min<int64_t>(kRefineRounds, kRefineWork / std::max<int64_t>(passWork, 1)))
             : 0;
  std::vector<int64_t> offsets = plan.offsets;
  std::vector<char> hot(n); // 2: ended above the lower bound; 1: live with such a buffer
  uint64_t rng = 0;
  for (int round = 0; round < rounds && plan.arenaBytes > plan.lowerBound; ++round) {
    std::fill(hot.begin(), hot.end(), 0);
    for (uint32_t i : order) {
      if (offsets[i] + sizes[i] <= plan.lowerBound) continue;
      hot[i] = 2;
      for (uint32_t k = lists.start[i]; k < lists.start[i + 1]; ++k)
        hot[lists.list[k]] = std::max<char>(hot[lists.list[k]], 1);
    }
    for (uint32_t i : order) {
      if (hot[i] == 2) priority[i] *= kPromote;
      if (hot[i]) priority[i] *= 1.0 + kJitter * (2.0 * uniform01(rng) - 1.0);
    }
    sortByPriority(order, priority, buffers);
    int64_t arena = placer.run(order, offsets);
    if (arena < plan.arenaBytes) {
      plan.arenaBytes = arena;
      plan.offsets = offsets;
    }
  }
  return plan;
}

} // namespace kiln::runtime
