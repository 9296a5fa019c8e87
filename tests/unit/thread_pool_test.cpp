// runtime::ThreadPool: every index runs exactly once, the caller takes part,
// nested calls run serially instead of deadlocking.
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

namespace kiln::runtime {
namespace {

TEST(ThreadPool, ThreadsCountTheCaller) {
  EXPECT_EQ(ThreadPool(1).threads(), 1);
  EXPECT_EQ(ThreadPool(3).threads(), 3);
  EXPECT_GE(ThreadPool().threads(), 1);
  EXPECT_GE(physicalCoreCount(), 1);
}

TEST(ThreadPool, SumsOverRangesOfManySizes) {
  ThreadPool pool(2);
  for (int64_t n : {0, 1, 2, 3, 7, 100, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int64_t> sum{0};
    pool.parallelFor(n, [&](int64_t b, int64_t e) {
      ASSERT_LE(0, b);
      ASSERT_LT(b, e);
      ASSERT_LE(e, n);
      int64_t local = 0;
      for (int64_t i = b; i < e; ++i) {
        local += i;
        hits[size_t(i)].fetch_add(1);
      }
      sum.fetch_add(local);
    });
    EXPECT_EQ(sum.load(), n * (n - 1) / 2) << "n=" << n;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "i=" << i;
  }
}

TEST(ThreadPool, GrainBoundsChunkSize) {
  ThreadPool pool(2);
  std::atomic<int> chunks{0};
  pool.parallelFor(
      100,
      [&](int64_t b, int64_t e) {
        EXPECT_TRUE(e - b >= 30 || e == 100);
        chunks.fetch_add(1);
      },
      30);
  EXPECT_LE(chunks.load(), 4);
}

TEST(ThreadPool, OneThreadRunsOnCaller) {
  ThreadPool pool(1);
  auto caller = std::this_thread::get_id();
  int64_t sum = 0; // no atomics needed: everything runs on this thread
  pool.parallelFor(1000, [&](int64_t b, int64_t e) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum, 999 * 1000 / 2);
}

TEST(ThreadPool, NestedCallRunsSeriallyNotDeadlocking) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  pool.parallelFor(16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      auto self = std::this_thread::get_id();
      pool.parallelFor(10, [&](int64_t ib, int64_t ie) {
        EXPECT_EQ(std::this_thread::get_id(), self);
        for (int64_t j = ib; j < ie; ++j) sum.fetch_add(i * 10 + j);
      });
    }
  });
  EXPECT_EQ(sum.load(), 159 * 160 / 2);
}

TEST(ThreadPool, ManySmallJobsBackToBack) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 20000; ++round)
    pool.parallelFor(3, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  EXPECT_EQ(total.load(), 60000);
}

TEST(ThreadPool, ConcurrentCallersAllComplete) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int round = 0; round < 500; ++round)
        pool.parallelFor(64, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    });
  for (auto &c : callers) c.join();
  EXPECT_EQ(total.load(), 4 * 500 * 64);
}

TEST(ThreadPool, WorkersTakePart) {
  ThreadPool pool(2);
  // Chunks that take a while give the worker time to wake and claim some.
  bool sawOther = false;
  for (int attempt = 0; attempt < 50 && !sawOther; ++attempt) {
    std::mutex mu;
    std::set<std::thread::id> ids;
    pool.parallelFor(8, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
    sawOther = ids.size() > 1;
  }
  EXPECT_TRUE(sawOther);
}

} // namespace
} // namespace kiln::runtime
