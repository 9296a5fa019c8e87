#include "runtime/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_CPU_RELAX() _mm_pause()
#else
#define KILN_CPU_RELAX() std::this_thread::yield()
#endif

namespace kiln::runtime {
namespace {

// True while this thread runs a chunk of some pool's job: a nested
// parallelFor then runs serially instead of waiting on busy workers.
thread_local bool tInsideTask = false;

// Iterations a worker spins on the job generation before sleeping: long
// enough to catch back-to-back parallelFor calls (a GEMM issues several per
// call), short enough not to steal a shared core for long.
constexpr int kSpinIterations = 4000;

} // namespace

int physicalCoreCount() {
  // Linux: count distinct (package, core) pairs; fall back to the logical count.
  std::set<std::pair<std::string, std::string>> cores;
  unsigned logical = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned cpu = 0; cpu < logical; ++cpu) {
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
    std::string p, c;
    if (!(pkg >> p) || !(core >> c)) return int(logical);
    cores.emplace(p, c);
  }
  return cores.empty() ? int(logical) : int(cores.size());
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = physicalCoreCount();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto &w : workers_) w.join();
}

ThreadPool &ThreadPool::global() {
  static ThreadPool pool(physicalCoreCount());
  return pool;
}

void ThreadPool::drainChunks() {
  bool wasInside = std::exchange(tInsideTask, true);
  for (;;) {
    int64_t c = nextChunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= numChunks_) break;
    int64_t begin = c * chunk_, end = std::min(n_, begin + chunk_);
    thunk_(ctx_, begin, end);
    doneChunks_.fetch_add(1, std::memory_order_release);
  }
  tInsideTask = wasInside;
}

void ThreadPool::run(int64_t n, int64_t grain, Thunk thunk, void *ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  // Serial when there is nothing to share, when called from inside a task,
  // or when another thread's job owns the pool: never wait for a worker.
  if (workers_.empty() || tInsideTask || n <= grain) {
    bool wasInside = std::exchange(tInsideTask, true);
    thunk(ctx, 0, n);
    tInsideTask = wasInside;
    return;
  }
  std::unique_lock<std::mutex> own(owner_, std::try_to_lock);
  if (!own.owns_lock()) {
    bool wasInside = std::exchange(tInsideTask, true);
    thunk(ctx, 0, n);
    tInsideTask = wasInside;
    return;
  }
  // A few chunks per thread balance uneven work; never below the grain.
  int64_t target = int64_t(threads()) * 4;
  int64_t chunk = std::max(grain, (n + target - 1) / target);
  {
    std::lock_guard<std::mutex> lock(mu_);
    thunk_ = thunk;
    ctx_ = ctx;
    n_ = n;
    chunk_ = chunk;
    numChunks_ = (n + chunk - 1) / chunk;
    nextChunk_.store(0, std::memory_order_relaxed);
    doneChunks_.store(0, std::memory_order_relaxed);
    jobOpen_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drainChunks();
  while (doneChunks_.load(std::memory_order_acquire) < numChunks_) KILN_CPU_RELAX();
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobOpen_ = false; // no worker joins after this
  }
  // Workers that joined may still be looking at the counters; the job's
  // fields must stay valid until they leave.
  while (activeWorkers_.load(std::memory_order_acquire) != 0) KILN_CPU_RELAX();
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpinIterations; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen) break;
      KILN_CPU_RELAX();
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] {
        return stop_ || (jobOpen_ && generation_.load(std::memory_order_relaxed) != seen);
      });
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      activeWorkers_.fetch_add(1, std::memory_order_relaxed);
    }
    drainChunks();
    activeWorkers_.fetch_sub(1, std::memory_order_release);
  }
}

} // namespace kiln::runtime
