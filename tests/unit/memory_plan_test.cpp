// runtime::planMemory: buffers live together never share bytes, offsets are
// aligned, the arena is exactly the highest end, and on chain-like graphs it
// stays close to the lower bound (the most bytes live at one step).
#include "runtime/cpu/arena.h"
#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

namespace kiln::runtime {
namespace {

int64_t alignUp(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

bool liveTogether(const BufferLifetime &a, const BufferLifetime &b) {
  return a.firstStep <= b.lastStep && b.firstStep <= a.lastStep;
}

// Every promise of the header, checked by brute force.
void expectValidPlan(const std::vector<BufferLifetime> &bufs, const MemoryPlan &plan,
                     int64_t alignment) {
  ASSERT_EQ(plan.offsets.size(), bufs.size());
  int64_t highestEnd = 0, naive = 0;
  std::map<int64_t, int64_t> liveDelta; // step -> change in live aligned bytes
  for (size_t i = 0; i < bufs.size(); ++i) {
    int64_t off = plan.offsets[i];
    EXPECT_GE(off, 0) << "buffer " << i;
    EXPECT_EQ(off % alignment, 0) << "buffer " << i;
    highestEnd = std::max(highestEnd, off + bufs[i].bytes);
    naive += alignUp(bufs[i].bytes, alignment);
    liveDelta[bufs[i].firstStep] += alignUp(bufs[i].bytes, alignment);
    liveDelta[int64_t(bufs[i].lastStep) + 1] -= alignUp(bufs[i].bytes, alignment);
    for (size_t j = 0; j < i; ++j) {
      if (bufs[i].bytes == 0 || bufs[j].bytes == 0 || !liveTogether(bufs[i], bufs[j])) continue;
      bool disjoint =
          off + bufs[i].bytes <= plan.offsets[j] || plan.offsets[j] + bufs[j].bytes <= off;
      EXPECT_TRUE(disjoint) << "buffers " << j << " and " << i << " are live together and overlap";
    }
  }
  int64_t live = 0, peak = 0;
  for (auto [step, delta] : liveDelta) peak = std::max(peak, live += delta);
  EXPECT_EQ(plan.arenaBytes, alignUp(highestEnd, alignment));
  EXPECT_EQ(plan.naiveBytes, naive);
  EXPECT_EQ(plan.lowerBound, peak);
  EXPECT_LE(plan.lowerBound, plan.arenaBytes);
  EXPECT_LE(plan.arenaBytes, plan.naiveBytes);
}

TEST(MemoryPlan, EmptyInputNeedsNoArena) {
  MemoryPlan plan = planMemory({});
  EXPECT_TRUE(plan.offsets.empty());
  EXPECT_EQ(plan.arenaBytes, 0);
  EXPECT_EQ(plan.naiveBytes, 0);
  EXPECT_EQ(plan.lowerBound, 0);
}

TEST(MemoryPlan, SingleBufferSitsAtZero) {
  std::vector<BufferLifetime> bufs = {{100, 3, 7}};
  MemoryPlan plan = planMemory(bufs);
  EXPECT_EQ(plan.offsets, std::vector<int64_t>{0});
  EXPECT_EQ(plan.arenaBytes, 128);
  EXPECT_EQ(plan.naiveBytes, 128);
  EXPECT_EQ(plan.lowerBound, 128);
}

TEST(MemoryPlan, DisjointLifetimesShareOffsetZero) {
  // Pairwise disjoint lifetimes: all three share the same bytes.
  std::vector<BufferLifetime> bufs = {{100, 0, 1}, {200, 2, 3}, {50, 4, 4}};
  MemoryPlan plan = planMemory(bufs);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(plan.arenaBytes, 256);
  EXPECT_EQ(plan.lowerBound, 256);
  EXPECT_EQ(plan.naiveBytes, 128 + 256 + 64);
}

TEST(MemoryPlan, OverlappingLifetimesDoNotShare) {
  // Sharing one step (2) is enough to conflict: lifetimes are inclusive.
  std::vector<BufferLifetime> bufs = {{100, 0, 2}, {100, 2, 4}};
  MemoryPlan plan = planMemory(bufs);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 128}));
  EXPECT_EQ(plan.arenaBytes, 256);
  expectValidPlan(bufs, plan, 64);
}

TEST(MemoryPlan, LargestBufferIsPlacedFirst) {
  std::vector<BufferLifetime> bufs = {{10, 0, 1}, {1000, 0, 1}};
  MemoryPlan plan = planMemory(bufs, 1);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{1000, 0}));
  EXPECT_EQ(plan.arenaBytes, 1010);
}

TEST(MemoryPlan, GapsBetweenPlacedBuffersAreReused) {
  // x and y fill steps 0-1; z reuses x's bytes once x is dead; w then fits in
  // the hole between z (0..128) and y (256..512), not above y.
  std::vector<BufferLifetime> bufs = {
      {256, 0, 1}, // x
      {256, 0, 3}, // y
      {128, 2, 3}, // z
      {128, 2, 3}, // w
  };
  MemoryPlan plan = planMemory(bufs);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 256, 0, 128}));
  EXPECT_EQ(plan.arenaBytes, 512);
  EXPECT_EQ(plan.lowerBound, 512);
}

TEST(MemoryPlan, AlignmentIsRespected) {
  std::vector<BufferLifetime> bufs = {{1, 0, 0}, {300, 0, 0}, {5, 0, 0}};
  MemoryPlan plan = planMemory(bufs, 256);
  expectValidPlan(bufs, plan, 256);
  EXPECT_EQ(plan.arenaBytes, 256 + 512 + 256);
  // Alignment 1 packs bytes exactly.
  plan = planMemory(bufs, 1);
  expectValidPlan(bufs, plan, 1);
  EXPECT_EQ(plan.arenaBytes, 306);
}

TEST(MemoryPlan, ZeroSizeBuffersTakeNoSpace) {
  std::vector<BufferLifetime> bufs = {{0, 0, 5}, {64, 0, 5}, {0, 1, 2}, {64, 3, 3}};
  MemoryPlan plan = planMemory(bufs);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 0, 0, 64}));
  EXPECT_EQ(plan.arenaBytes, 128);
  EXPECT_EQ(plan.naiveBytes, 128);
  EXPECT_EQ(plan.lowerBound, 128);
  EXPECT_EQ(planMemory({{0, 0, 0}}).arenaBytes, 0);
}

// Arbitrary lifetimes: random starts and lengths (some spanning the whole
// run), sizes from 0 to 1 MiB on a log scale, a random power-of-two alignment.
TEST(MemoryPlan, RandomLifetimesGiveValidPlans) {
  double worst = 0, sumRatio = 0;
  int cases = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    int n = int(rng() % 300) + 1;
    int steps = int(rng() % 200) + 1;
    int64_t alignment = int64_t(1) << (rng() % 8);
    std::vector<BufferLifetime> bufs;
    for (int i = 0; i < n; ++i) {
      int32_t first = int32_t(rng() % steps);
      int32_t len = rng() % 10 == 0 ? int32_t(rng() % steps) : int32_t(rng() % 6);
      int64_t bytes = rng() % 20 == 0 ? 0 : int64_t(rng() % (int64_t(1) << (rng() % 21))) + 1;
      bufs.push_back({bytes, first, first + len});
    }
    MemoryPlan plan = planMemory(bufs, alignment);
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    expectValidPlan(bufs, plan, alignment);
    if (HasFatalFailure() || plan.lowerBound == 0) continue;
    double ratio = double(plan.arenaBytes) / double(plan.lowerBound);
    worst = std::max(worst, ratio);
    sumRatio += ratio;
    ++cases;
  }
  std::printf("[ random ] %d cases: arena/lowerBound mean %.3f, worst %.3f\n", cases,
              sumRatio / cases, worst);
}

// Chain-like graphs, as most networks are: step i writes buffer i, which the
// next one or two steps read (so it lives 2-3 steps). Sizes vary widely.
TEST(MemoryPlan, ChainsStayNearTheLowerBound) {
  double worst = 0, sumRatio = 0, sumSaved = 0;
  int cases = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    int n = int(rng() % 400) + 2;
    std::vector<BufferLifetime> bufs;
    for (int i = 0; i < n; ++i) {
      int64_t bytes = int64_t(rng() % (int64_t(1) << 20)) + 1;
      bufs.push_back({bytes, i, i + 1 + int32_t(rng() % 2)});
    }
    MemoryPlan plan = planMemory(bufs);
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    expectValidPlan(bufs, plan, 64);
    double ratio = double(plan.arenaBytes) / double(plan.lowerBound);
    EXPECT_LE(ratio, 1.3);
    worst = std::max(worst, ratio);
    sumRatio += ratio;
    sumSaved += double(plan.arenaBytes) / double(plan.naiveBytes);
    ++cases;
  }
  std::printf(
      "[ chains ] %d cases: arena/lowerBound mean %.3f, worst %.3f; arena/naive mean %.4f\n", cases,
      sumRatio / cases, worst, sumSaved / cases);
}

// Not a benchmark: a guard against an accidental blow-up (the executor
// re-plans on every shape change). 5000 buffers each: a chain with a long skip
// connection every 16th buffer; a plain chain; and a dense plan where all are
// live at once (no conflict lists: the O(n^2) path).
TEST(MemoryPlan, FiveThousandBuffersPlanQuickly) {
  struct Case {
    const char *name;
    std::vector<BufferLifetime> bufs;
  };
  std::mt19937_64 rng(42);
  std::vector<Case> cases = {{"skips", {}}, {"chain", {}}, {"dense", {}}};
  for (int i = 0; i < 5000; ++i) {
    int64_t bytes = int64_t(rng() % (int64_t(1) << 22)) + 1;
    cases[0].bufs.push_back({bytes, i, i + (i % 16 == 0 ? 64 : 1 + int32_t(rng() % 2))});
    cases[1].bufs.push_back({bytes, i, i + 1 + int32_t(rng() % 2)});
    cases[2].bufs.push_back({bytes, 0, 0});
  }
  for (const Case &c : cases) {
    auto start = std::chrono::steady_clock::now();
    MemoryPlan plan = planMemory(c.bufs);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "[ timing ] 5000 buffers (%s) in %.2f ms: arena/lowerBound %.3f, arena/naive %.4f\n",
        c.name, ms, double(plan.arenaBytes) / double(plan.lowerBound),
        double(plan.arenaBytes) / double(plan.naiveBytes));
    EXPECT_LT(ms, 200.0) << c.name;
    EXPECT_LE(plan.lowerBound, plan.arenaBytes) << c.name;
    EXPECT_LE(plan.arenaBytes, plan.naiveBytes) << c.name;
  }
  // All live together: nothing can share, and stacking them is optimal.
  MemoryPlan dense = planMemory(cases[2].bufs);
  EXPECT_EQ(dense.arenaBytes, dense.naiveBytes);
  EXPECT_EQ(dense.arenaBytes, dense.lowerBound);
}

// The arena a plan builds keeps its place from run to run, also when a slot
// only ever holds an empty tensor (it needs no bytes and is left out of the
// plan; once it made every run replan into a new arena, and a detector
// whose boxes were all filtered out ran at half speed).
TEST(ActivationArena, EmptyTensorsKeepThePlan) {
  cpu::ActivationArena arena;
  arena.configure({{0, 1}, {1, 2}});
  auto run = [&] {
    Tensor full = arena.allocate(0, DType::F32, {64, 64});
    Tensor empty = arena.allocate(1, DType::F32, {0, 4});
    EXPECT_EQ(empty.numel(), 0);
    const void *where = full.raw();
    arena.endRun();
    return where;
  };
  run(); // observes the sizes, then plans
  ASSERT_GT(arena.arenaBytes(), 0);
  const void *second = run();
  EXPECT_EQ(run(), second) << "the arena moved: a run replanned";
}

} // namespace
} // namespace kiln::runtime
