// PackedConv: weight packing, algorithm choice, task planning and threading
// around the GEMM driver (gemm_driver.h) and the per-ISA conv pieces
// (conv_kernels.h). See conv.h for the algorithms and why.
#include "kernels/conv.h"

#include "kernels/conv_kernels.h"
#include "kernels/gemm_driver.h"
#include "runtime/thread_pool.h"

#include <atomic>
#include <cassert>
#include <cstdlib>
#include <utility>

namespace kiln::kernels {

using detail::ceilDiv;
using detail::roundUp;

namespace {

// The packed B block of one task: <= 64 Ki floats (256 KiB), so it stays in
// L2 next to the group's weights. With just-in-time packing each micro-panel
// is read from L1 right after it is packed; the block only matters when
// Kg > mc and later row groups re-read it.
constexpr int64_t kBBlockFloats = int64_t(1) << 16;

// Below this many flops a conv runs on the calling thread: waking a worker
// costs more than it saves.
constexpr double kParallelFlops = 4e5;

struct ConvIsaKernels {
  detail::PackBFn im2col;
  detail::DepthwiseFn depthwise;
};

ConvIsaKernels convKernelsFor(GemmIsa isa) {
  switch (isa) {
#if defined(__x86_64__)
  case GemmIsa::kAvx512:
    return {detail::im2colPackAvx512, detail::depthwiseAvx512};
  case GemmIsa::kAvx2:
    return {detail::im2colPackAvx2, detail::depthwiseAvx2};
#endif
  default:
    return {detail::im2colPackPortable, detail::depthwisePortable};
  }
}

// [first, last) of part `idx` when `count` items are split into `parts`
// nearly equal parts (earlier parts take the remainder).
std::pair<int64_t, int64_t> span(int64_t count, int64_t parts, int64_t idx) {
  const int64_t base = count / parts, extra = count % parts;
  const int64_t first = idx * base + std::min(idx, extra);
  return {first, first + base + (idx < extra ? 1 : 0)};
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

// Hands each concurrently running body its own workspace slot.
class SlotPool {
public:
  int acquire() {
    uint64_t used = used_.load(std::memory_order_relaxed);
    for (;;) {
      const int slot = __builtin_ctzll(~used);
      if (used_.compare_exchange_weak(used, used | (uint64_t(1) << slot),
                                      std::memory_order_acquire))
        return slot;
    }
  }
  void release(int slot) { used_.fetch_and(~(uint64_t(1) << slot), std::memory_order_release); }

private:
  std::atomic<uint64_t> used_{0};
};

// A grow-only, 64-byte aligned per-thread buffer for run(workspace = null).
class Scratch {
public:
  ~Scratch() { std::free(data_); }
  float *get(int64_t floats) {
    if (floats > cap_) {
      std::free(data_);
      data_ = static_cast<float *>(
          std::aligned_alloc(64, size_t(roundUp(floats * int64_t(sizeof(float)), 64))));
      cap_ = data_ ? floats : 0;
    }
    return data_;
  }

private:
  float *data_ = nullptr;
  int64_t cap_ = 0;
};
thread_local Scratch tConvScratch;

// Floats of one task's packed B block for a GEMM of depth `depth`.
int64_t blockCols(const detail::GemmKernelInfo &ki, int64_t depth) {
  const int64_t kcs = detail::sliceDepth(depth, ki.kc);
  return std::max<int64_t>(ki.nr, kBBlockFloats / kcs / ki.nr * ki.nr);
}
int64_t slotFloats(const detail::GemmKernelInfo &ki, int64_t depth) {
  return roundUp(blockCols(ki, depth) * detail::sliceDepth(depth, ki.kc), 16);
}

} // namespace

bool ConvShape::valid() const {
  if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1 || R < 1 || S < 1) return false;
  if (strideH < 1 || strideW < 1 || dilationH < 1 || dilationW < 1) return false;
  if (padTop < 0 || padLeft < 0 || padBottom < 0 || padRight < 0) return false;
  if (groups < 1 || C % groups || K % groups) return false;
  return H + padTop + padBottom >= dilationH * (R - 1) + 1 &&
         W + padLeft + padRight >= dilationW * (S - 1) + 1;
}

const char *convAlgoName(ConvAlgo algo) {
  switch (algo) {
  case ConvAlgo::kGemm:
    return "gemm";
  case ConvAlgo::kGemm1x1:
    return "gemm_1x1";
  case ConvAlgo::kDepthwise:
    return "depthwise";
  }
  return "?";
}

PackedConv PackedConv::pack(const ConvShape &s, const float *weights, const float *bias,
                            GemmIsa isa) {
  assert(s.valid());
  PackedConv pc;
  pc.shape_ = s;
  pc.isa_ = resolveGemmIsa(isa);
  const int64_t G = s.groups, Cg = s.C / G, Kg = s.K / G, taps = s.R * s.S;
  if (bias) pc.bias_.assign(bias, bias + s.K);
  if (G == s.C && Cg == 1) {
    pc.algo_ = ConvAlgo::kDepthwise;
    pc.taps_.assign(weights, weights + s.K * taps);
    return pc;
  }
  const bool pointwise = s.R == 1 && s.S == 1 && s.strideH == 1 && s.strideW == 1 &&
                         s.padTop == 0 && s.padLeft == 0 && s.padBottom == 0 && s.padRight == 0;
  pc.algo_ = pointwise ? ConvAlgo::kGemm1x1 : ConvAlgo::kGemm;
  const int64_t depth = Cg * taps;
  pc.groupWeights_.reserve(size_t(G));
  for (int64_t g = 0; g < G; ++g)
    pc.groupWeights_.push_back(
        PackedA::pack(false, Kg, depth, weights + g * Kg * depth, depth, pc.isa_));
  return pc;
}

size_t PackedConv::workspaceBytes(const ConvShape &s, int threads) const {
  if (algo_ == ConvAlgo::kDepthwise) return 0;
  const detail::GemmKernelInfo ki = detail::gemmKernelsFor(isa_).info;
  const int64_t depth = s.C / s.groups * s.R * s.S;
  return size_t(std::max(threads, 1)) * size_t(slotFloats(ki, depth)) * sizeof(float);
}

void PackedConv::run(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                     void *workspace, runtime::ThreadPool *pool) const {
  runtime::ThreadPool &p = pool ? *pool : runtime::ThreadPool::global();
  assert(reinterpret_cast<uintptr_t>(workspace) % 64 == 0 && "workspace must be 64-byte aligned");
  if (algo_ == ConvAlgo::kDepthwise)
    runDepthwise(s, x, y, ep, p);
  else
    runGemm(s, x, y, ep, workspace, p);
}

// Tasks: (image, group) units x column tiles x row splits. Column tiles are
// whole NR panels of output pixels, at most one B block wide, and numerous
// enough for >= 2 tasks per thread when the units alone are too few (batch
// 1, groups 1: a 20x20 output has 13 panels, split 4+3+3+3 on 2 threads would
// leave one thread idle a quarter of the time; 2x as many tiles halves
// that). Row splits (output-channel blocks) only when even one-panel tiles
// leave a thread idle: they make each thread pack the same B panels.
void PackedConv::runGemm(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                         void *workspace, runtime::ThreadPool &pool) const {
  const detail::GemmKernels k = detail::gemmKernelsFor(isa_);
  const detail::GemmKernelInfo &ki = k.info;
  const ConvIsaKernels ck = convKernelsFor(isa_);
  const int64_t G = s.groups, Cg = s.C / G, Kg = s.K / G;
  const int64_t outH = s.outH(), outW = s.outW(), P = outH * outW;
  const int64_t depth = Cg * s.R * s.S;
  const detail::RowPanels rows(Kg, ki.mr);

  const int64_t units = s.N * G;
  const int64_t colPanels = ceilDiv(P, ki.nr);
  int64_t tiles = ceilDiv(colPanels, blockCols(ki, depth) / ki.nr);
  int64_t rowSplits = 1;
  const double flops = 2.0 * double(s.N) * double(s.K) * double(depth) * double(P);
  const int64_t threads = flops < kParallelFlops ? 1 : pool.threads();
  if (threads > 1 && units * tiles < 2 * threads)
    tiles = std::min(colPanels, std::max(tiles, ceilDiv(2 * threads, units)));
  if (threads > 1 && units * tiles < threads)
    rowSplits = std::min(rows.count, ceilDiv(threads, units * tiles));
  const int64_t tasks = units * tiles * rowSplits;

  const int64_t slot = slotFloats(ki, depth);
  SlotPool slots;
  auto body = [&](int64_t begin, int64_t end) {
    const int id = workspace ? slots.acquire() : 0;
    float *bBuf = workspace ? static_cast<float *>(workspace) + id * slot : tConvScratch.get(slot);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t unit = t / (tiles * rowSplits), n = unit / G, g = unit % G;
      const auto [c0, c1] = span(colPanels, tiles, t / rowSplits % tiles);
      const auto [r0, r1] = span(rows.count, rowSplits, t % rowSplits);
      const int64_t j0 = c0 * ki.nr, cols = std::min(c1 * ki.nr, P) - j0;
      if (cols <= 0 || r1 <= r0) continue;

      detail::Im2colSource src{x + (n * s.C + g * Cg) * s.H * s.W,
                               s.H,
                               s.W,
                               outW,
                               s.R,
                               s.S,
                               s.strideH,
                               s.strideW,
                               s.dilationH,
                               s.dilationW,
                               s.padTop,
                               s.padLeft};
      if (algo_ == ConvAlgo::kGemm1x1) src.H = 1, src.W = P, src.outW = P;
      const ImageEpilogue epi(ep, n, s.K);

      detail::GemmProblem prob;
      prob.M = Kg, prob.N = P, prob.K = depth;
      prob.a.packed = groupWeights_[size_t(g)].data();
      prob.b.pack = ck.im2col, prob.b.ctx = &src;
      prob.beta = 0.0f;
      prob.c = y + (n * s.K + g * Kg) * P, prob.ldc = P;
      prob.rowBias = bias_.empty() ? nullptr : bias_.data() + g * Kg;
      prob.ops = epi.ops, prob.opCount = epi.count;
      prob.epiRow0 = g * Kg;
      detail::gemmBlock(prob, k, rows, r0, r1, j0, cols, roundUp(cols, ki.nr), nullptr, bBuf);
    }
    if (workspace) slots.release(id);
  };
  if (threads == 1)
    body(0, tasks);
  else
    pool.parallelFor(tasks, body);
}

// Tasks: (image, output channel) planes, split into row blocks when there
// are fewer than 2 per thread.
void PackedConv::runDepthwise(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                              runtime::ThreadPool &pool) const {
  const ConvIsaKernels ck = convKernelsFor(isa_);
  const detail::EpilogueFn epiFn = detail::epilogueFor(isa_);
  const int64_t outH = s.outH(), outW = s.outW(), P = outH * outW;
  const int64_t planes = s.N * s.K, mult = s.K / s.C, taps = s.R * s.S;
  const double flops = 2.0 * double(planes) * double(taps) * double(P);
  const int64_t threads = flops < kParallelFlops ? 1 : pool.threads();
  int64_t rowBlocks = 1;
  if (threads > 1 && planes < 2 * threads) rowBlocks = std::min(outH, ceilDiv(2 * threads, planes));
  const int64_t tasks = planes * rowBlocks;

  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t plane = t / rowBlocks, n = plane / s.K, k = plane % s.K;
      const auto [oh0, oh1] = span(outH, rowBlocks, t % rowBlocks);
      if (oh1 <= oh0) continue;
      const ImageEpilogue epi(ep, n, s.K);
      detail::DepthwiseArgs a;
      a.x = x + (n * s.C + k / mult) * s.H * s.W;
      a.y = y + (n * s.K + k) * P;
      a.w = taps_.data() + k * taps;
      a.bias = bias_.empty() ? 0.0f : bias_[size_t(k)];
      a.H = s.H, a.W = s.W, a.outH = outH, a.outW = outW;
      a.R = s.R, a.S = s.S, a.strideH = s.strideH, a.strideW = s.strideW;
      a.dilationH = s.dilationH, a.dilationW = s.dilationW, a.padTop = s.padTop,
      a.padLeft = s.padLeft;
      a.oh0 = oh0, a.oh1 = oh1;
      a.ops = epi.ops, a.opCount = epi.count, a.channel = k, a.epilogue = epiFn;
      ck.depthwise(a);
    }
  };
  if (threads == 1)
    body(0, tasks);
  else
    pool.parallelFor(tasks, body);
}

} // namespace kiln::kernels
