// What the convolution drivers (conv.cpp, conv_pixel_rows.cpp) share: the
// ISA's conv pieces, the per-image epilogue and how tasks spread over the
// thread pool.
#pragma once

#include "kernels/conv_kernels.h"
#include "kernels/epilogue.h"
#include "kernels/gemm_driver.h"
#include "kernels/isa.h"
#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

namespace kiln::kernels::detail {

struct ConvIsaKernels {
  PackBFn im2col;
  DepthwiseFn depthwise;
  // Optional: 8 and 16 channels per vector (conv_kernels.h).
  void (*depthwiseChannels)(const DepthwiseBlockArgs &) = nullptr;
  void (*depthwiseChannels16)(const DepthwiseBlockArgs &) = nullptr;
  // Winograd F(4x4, 3x3) tile transforms (null: the ISA has none).
  void (*winogradInput)(const WinogradInputArgs &) = nullptr;
  void (*winogradOutput)(const WinogradOutputArgs &) = nullptr;
};

inline ConvIsaKernels convKernelsFor(GemmIsa isa) {
  switch (isa) {
#if defined(__x86_64__)
  case GemmIsa::kAvx512:
    // On small planes the channel kernels beat 16-column row vectors that
    // are mostly padding (a 7x7 plane); the 8-channel one takes a last
    // group of 8-15 channels.
    return {im2colPackAvx512,        depthwiseAvx512,     depthwiseChannelsAvx2,
            depthwiseChannelsAvx512, winogradInputAvx512, winogradOutputAvx512};
  case GemmIsa::kAvx2:
    return {im2colPackAvx2, depthwiseAvx2, depthwiseChannelsAvx2};
#endif
  default:
    return {im2colPackPortable, depthwisePortable};
  }
}

// The caller's epilogue with the residual (kAddTensor) moved to image n: the
// kernels see one image at a time. (The conv's own bias is not an op: the
// kernels start their accumulators at it.)
struct ImageEpilogue {
  EpilogueOp ops[Epilogue::kMaxOps];
  int count = 0;
  ImageEpilogue(const Epilogue &ep, int64_t n, int64_t K) {
    for (int i = 0; i < ep.count; ++i) {
      EpilogueOp op = ep.ops[i];
      if (op.kind == EpilogueKind::kAddTensor) op.data += n * K * op.ld;
      ops[count++] = op;
    }
  }
};

// Below this many flops a conv runs on the calling thread: waking a worker
// costs more than it saves.
constexpr double kParallelFlops = 4e5;

// Threads one run uses at most (workspace slots, task shares).
constexpr int64_t kMaxSlots = 64;

// [first, last) of part `idx` when `count` items are split into `parts`
// nearly equal parts (earlier parts take the remainder).
inline std::pair<int64_t, int64_t> span(int64_t count, int64_t parts, int64_t idx) {
  const int64_t base = count / parts, extra = count % parts;
  const int64_t first = idx * base + std::min(idx, extra);
  return {first, first + base + (idx < extra ? 1 : 0)};
}

// Runs task(slot, t) for every t in [0, tasks) on up to `threads` threads
// of the pool. Body `slot` first runs its own contiguous share of the tasks,
// in order, then helps with the others' (claiming one task at a time from
// each share's counter), so a slow or late thread delays nobody. Contiguous
// shares keep a thread on the same pixels or channels from one call (and
// one layer) to the next, so their data stays in its core's L2; a shared
// counter would scatter them. `slot` < threads is unique among the bodies
// running at once, so it picks a workspace slot.
template <class F>
void runTasks(runtime::ThreadPool &pool, int64_t threads, int64_t tasks, F &&task) {
  threads = std::min<int64_t>({threads, tasks, kMaxSlots});
  if (threads <= 1) {
    for (int64_t t = 0; t < tasks; ++t) task(0, t);
    return;
  }
  struct alignas(64) Share {
    std::atomic<int64_t> next;
    int64_t end;
  };
  Share shares[kMaxSlots];
  for (int64_t i = 0; i < threads; ++i) {
    const auto [first, last] = span(tasks, threads, i);
    shares[i].next.store(first, std::memory_order_relaxed);
    shares[i].end = last;
  }
  pool.parallelFor(threads, [&](int64_t begin, int64_t end) {
    for (int64_t slot = begin; slot < end; ++slot)
      for (int64_t k = 0; k < threads; ++k) {
        Share &sh = shares[(slot + k) % threads];
        for (int64_t t; (t = sh.next.fetch_add(1, std::memory_order_relaxed)) < sh.end;)
          task(int(slot), t);
      }
  });
}

} // namespace kiln::kernels::detail
