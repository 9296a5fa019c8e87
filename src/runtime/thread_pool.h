// The CPU runtime's one thread pool (DESIGN.md, principle 6). Every kernel
// parallelizes through it; nothing else (OpenMP, a library's own pool) may
// compete for the cores.
//
// Model: parallelFor splits [0, n) into chunks that workers and the calling
// thread claim from a shared atomic counter; it returns when every chunk has
// run. Tasks never block on each other: the caller helps instead of waiting,
// a parallelFor issued from inside a task (or while another thread already
// owns the pool) runs serially on the calling thread instead of deadlocking.
//
// Thread safety: parallelFor may be called from any thread at any time. The
// pool must outlive every call; the destructor joins the workers and must not
// run concurrently with a parallelFor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace kiln::runtime {

// Physical cores of this machine (hyper-threads counted once), at least 1.
int physicalCoreCount();

class ThreadPool {
public:
  // `threads` counts the calling thread: ThreadPool(2) starts one worker.
  // threads <= 0 means physicalCoreCount().
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int threads() const { return int(workers_.size()) + 1; }

  // Runs body(begin, end) over chunks covering [0, n), each at least `grain`
  // long (except the last), on the workers and the calling thread; returns
  // when all are done. The body must not throw.
  template <typename F> void parallelFor(int64_t n, F &&body, int64_t grain = 1) {
    using Fn = std::remove_reference_t<F>;
    run(
        n, grain, [](void *ctx, int64_t b, int64_t e) { (*static_cast<Fn *>(ctx))(b, e); },
        const_cast<void *>(static_cast<const void *>(&body)));
  }

  // The process-wide pool with physicalCoreCount() threads, created on first use.
  static ThreadPool &global();

private:
  using Thunk = void (*)(void *, int64_t, int64_t);
  void run(int64_t n, int64_t grain, Thunk thunk, void *ctx);
  void workerLoop();
  void drainChunks();

  std::vector<std::thread> workers_;
  std::mutex mu_; // guards job publication and stop_
  std::condition_variable wake_;
  std::mutex owner_; // held by the thread whose job is running
  bool stop_ = false;
  bool jobOpen_ = false; // new workers may still join the job
  std::atomic<uint64_t> generation_{0};

  // The current job; written only by the owner before publishing it.
  Thunk thunk_ = nullptr;
  void *ctx_ = nullptr;
  int64_t n_ = 0, chunk_ = 1, numChunks_ = 0;
  std::atomic<int64_t> nextChunk_{0};
  std::atomic<int64_t> doneChunks_{0};
  std::atomic<int> activeWorkers_{0};
};

} // namespace kiln::runtime
