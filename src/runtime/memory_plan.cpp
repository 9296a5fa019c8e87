#include "runtime/memory_plan.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <utility>

namespace kiln::runtime {
namespace {

// Refinement rounds after the greedy-by-size pass, and the work (conflicts
// visited) after which refinement stops, so a dense plan, where one pass is
// already expensive, is not repeated. See the header for why refine at all.
constexpr int kRefineRounds = 32;
constexpr int64_t kRefineWork = int64_t(1) << 22;
// Per round: buffers that ended above the lower bound move up in the order by
// this factor, and every priority is shaken by +-10% so that rounds explore
// orders instead of cycling between two.
constexpr double kPromote = 1.5;
constexpr double kJitter = 0.1;

int64_t alignUp(int64_t x, int64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

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

// Answers "which placed buffers are live at some step of [first, last]" in
// O((k + 1) log n) for k answers, so a placement costs what its conflicts
// cost rather than a walk over every placed buffer (which made long chains
// quadratic). Buffers sit in first-step order under a max-tree of their last
// steps, unplaced ones holding -inf: buffer j conflicts iff firstStep_j <=
// last (a prefix of the order) and lastStep_j >= first (the tree prunes).
class LiveIndex {
public:
  LiveIndex(const std::vector<BufferLifetime> &buffers, std::vector<uint32_t> ids)
      : byFirst_(std::move(ids)), leafOf_(buffers.size()) {
    std::sort(byFirst_.begin(), byFirst_.end(), [&](uint32_t a, uint32_t b) {
      return buffers[a].firstStep < buffers[b].firstStep;
    });
    for (uint32_t id : byFirst_) firsts_.push_back(buffers[id].firstStep);
    while (leaves_ < byFirst_.size()) leaves_ *= 2;
    for (size_t k = 0; k < byFirst_.size(); ++k) leafOf_[byFirst_[k]] = leaves_ + k;
  }

  void clear() { maxLast_.assign(2 * leaves_, kUnplaced); }

  void place(uint32_t id, int32_t lastStep) {
    for (size_t node = leafOf_[id]; node >= 1 && maxLast_[node] < lastStep; node /= 2)
      maxLast_[node] = lastStep;
  }

  template <typename Visit> void forEachConflict(int32_t first, int32_t last, Visit &&visit) {
    size_t limit = size_t(std::upper_bound(firsts_.begin(), firsts_.end(), last) - firsts_.begin());
    stack_.assign(1, {1, 0, leaves_});
    while (!stack_.empty()) {
      Range r = stack_.back();
      stack_.pop_back();
      if (r.lo >= limit || maxLast_[r.node] < first) continue;
      if (r.hi - r.lo == 1) {
        visit(byFirst_[r.lo]);
        continue;
      }
      size_t mid = (r.lo + r.hi) / 2;
      stack_.push_back({2 * r.node + 1, mid, r.hi});
      stack_.push_back({2 * r.node, r.lo, mid});
    }
  }

private:
  struct Range {
    size_t node, lo, hi; // tree node covering leaves [lo, hi)
  };
  static constexpr int64_t kUnplaced = std::numeric_limits<int64_t>::min();
  std::vector<uint32_t> byFirst_;
  std::vector<int32_t> firsts_;
  std::vector<size_t> leafOf_; // buffer id -> tree node
  std::vector<int64_t> maxLast_;
  size_t leaves_ = 1;
  std::vector<Range> stack_;
};

// One greedy pass: places the buffers in `order`, each at the lowest offset
// where it fits between the placed buffers it conflicts with (gaps included).
// Returns the arena it needs; `work` counts the conflicts visited.
int64_t placeInOrder(const std::vector<BufferLifetime> &buffers, const std::vector<int64_t> &sizes,
                     const std::vector<uint32_t> &order, LiveIndex &index,
                     std::vector<int64_t> &offsets, int64_t &work) {
  struct Span {
    int64_t offset, end;
  };
  std::vector<Span> conflicts;
  int64_t arena = 0;
  index.clear();
  for (uint32_t i : order) {
    const BufferLifetime &b = buffers[i];
    conflicts.clear();
    index.forEachConflict(b.firstStep, b.lastStep, [&](uint32_t j) {
      conflicts.push_back({offsets[j], offsets[j] + sizes[j]});
    });
    work += int64_t(conflicts.size()) + 1;
    std::sort(conflicts.begin(), conflicts.end(),
              [](const Span &x, const Span &y) { return x.offset < y.offset; });
    // In offset order the first gap that fits is the lowest one.
    int64_t offset = 0;
    for (const Span &c : conflicts) {
      if (c.offset >= offset + sizes[i]) break;
      offset = std::max(offset, c.end);
    }
    offsets[i] = offset;
    index.place(i, b.lastStep);
    arena = std::max(arena, offset + sizes[i]);
  }
  return arena;
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

  // Round 0 is plain greedy by size: priority = size; ties go to the earlier
  // first step, then to request order, so plans are deterministic.
  std::vector<double> priority(sizes.begin(), sizes.end());
  auto sortByPriority = [&] {
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      if (priority[a] != priority[b]) return priority[a] > priority[b];
      if (buffers[a].firstStep != buffers[b].firstStep)
        return buffers[a].firstStep < buffers[b].firstStep;
      return a < b;
    });
  };
  LiveIndex index(buffers, order);
  std::vector<int64_t> offsets(n, 0);
  int64_t work = 0;
  sortByPriority();
  plan.arenaBytes = placeInOrder(buffers, sizes, order, index, offsets, work);
  plan.offsets = offsets;

  uint64_t rng = 0;
  for (int round = 0; round < kRefineRounds && plan.arenaBytes > plan.lowerBound &&
                      work < kRefineWork;
       ++round) {
    for (uint32_t i : order) {
      if (offsets[i] + sizes[i] > plan.lowerBound) priority[i] *= kPromote;
      priority[i] *= 1.0 + kJitter * (2.0 * uniform01(rng) - 1.0);
    }
    sortByPriority();
    int64_t arena = placeInOrder(buffers, sizes, order, index, offsets, work);
    if (arena < plan.arenaBytes) {
      plan.arenaBytes = arena;
      plan.offsets = offsets;
    }
  }
  return plan;
}

} // namespace kiln::runtime
