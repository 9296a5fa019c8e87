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

// In-place B (im2colDirect) for convs with at most this many row panels.
constexpr int64_t kMaxDirectPanels = 6;

// Threads one run uses at most (workspace slots, task shares).
constexpr int64_t kMaxSlots = 64;

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

// The conv's B micro-panel at output pixels [j0, j0 + nr) exists in place
// when those pixels lie in one output row, stride 1, and every tap of
// every pixel is inside the input: row (c, r, s) is then nr contiguous
// input floats at base + offsets[(c*R + r)*S + s].
bool im2colDirect(const void *ctx, int64_t j0, int nr, const float **base) {
  const auto &s = *static_cast<const detail::Im2colSource *>(ctx);
  if (s.strideW != 1) return false;
  const int64_t oh = j0 / s.outW, ow = j0 % s.outW;
  if (ow + nr > s.outW) return false;
  const int64_t ih0 = oh * s.strideH - s.padTop, iw0 = ow - s.padLeft;
  if (ih0 < 0 || ih0 + (s.R - 1) * s.dilationH >= s.H) return false;
  if (iw0 < 0 || iw0 + nr - 1 + (s.S - 1) * s.dilationW >= s.W) return false;
  *base = s.x + ih0 * s.W + iw0;
  return true;
}

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
// enough for >= 4 tasks per thread when the units alone are too few (batch
// 1, groups 1: a 20x20 output has 13 panels; split 4+3+3+3 over 2 threads,
// one thread would idle a quarter of the time, in 8 tiles of 1-2 panels
// claimed one at a time the threads end within one panel of each other).
// Tiles cost nothing extra: the weights are pre-packed and each tile packs
// only its own columns. Row splits (output-channel blocks) only when even
// one-panel tiles leave a thread idle: they make each thread pack the same
// B panels.
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
  if (threads > 1 && units * tiles < 4 * threads)
    tiles = std::min(colPanels, std::max(tiles, ceilDiv(4 * threads, units)));
  if (threads > 1 && units * tiles < threads)
    rowSplits = std::min(rows.count, ceilDiv(threads, units * tiles));
  const int64_t tasks = units * tiles * rowSplits;

  // In-place B rows (im2colDirect) need 32-bit offsets of every (c, r, s)
  // from the group's first input value; H and W may change per run.
  const int64_t imH = algo_ == ConvAlgo::kGemm1x1 ? 1 : s.H;
  const int64_t imW = algo_ == ConvAlgo::kGemm1x1 ? P : s.W;
  // Only for few row panels: each panel re-reads the B rows, which unpacked
  // are scattered over the channel planes (3 cache lines each, and planes a
  // power of two apart share L1 sets); packed once they are one compact
  // block. Measured: 2-3 panels (16-32 output channels) gain 20-70%, 10
  // panels (a 128-channel Conv1d) lose 25%.
  const bool direct = ki.direct[1] && s.strideW == 1 && rows.count <= kMaxDirectPanels &&
                      Cg * s.H * s.W < (int64_t(1) << 31);
  thread_local std::vector<int32_t> tOffsets;
  if (direct) {
    tOffsets.resize(size_t(depth));
    for (int64_t c = 0, k = 0; c < Cg; ++c)
      for (int64_t r = 0; r < s.R; ++r)
        for (int64_t t = 0; t < s.S; ++t, ++k)
          tOffsets[size_t(k)] = int32_t(c * imH * imW + r * s.dilationH * imW + t * s.dilationW);
  }
  const int32_t *offsets = tOffsets.data();

  const int64_t slotSize = slotFloats(ki, depth);
  runTasks(pool, threads, tasks, [&](int slot, int64_t t) {
    const int64_t unit = t / (tiles * rowSplits), n = unit / G, g = unit % G;
    const auto [c0, c1] = span(colPanels, tiles, t / rowSplits % tiles);
    const auto [r0, r1] = span(rows.count, rowSplits, t % rowSplits);
    const int64_t j0 = c0 * ki.nr, cols = std::min(c1 * ki.nr, P) - j0;
    if (cols <= 0 || r1 <= r0) return;
    float *bBuf =
        workspace ? static_cast<float *>(workspace) + slot * slotSize : tConvScratch.get(slotSize);

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
    if (algo_ == ConvAlgo::kGemm1x1) src.H = imH, src.W = imW, src.outW = P;
    const ImageEpilogue epi(ep, n, s.K);

    detail::GemmProblem prob;
    prob.M = Kg, prob.N = P, prob.K = depth;
    prob.a.packed = groupWeights_[size_t(g)].data();
    prob.b.pack = ck.im2col, prob.b.ctx = &src;
    if (direct) prob.b.direct = im2colDirect, prob.b.offsets = offsets;
    prob.beta = 0.0f;
    prob.c = y + (n * s.K + g * Kg) * P, prob.ldc = P;
    prob.rowBias = bias_.empty() ? nullptr : bias_.data() + g * Kg;
    prob.ops = epi.ops, prob.opCount = epi.count;
    prob.epiRow0 = g * Kg;
    detail::gemmBlock(prob, k, rows, r0, r1, j0, cols, roundUp(cols, ki.nr), nullptr, bBuf);
  });
}

// Tasks: (image, output channel) planes, split into row blocks when there
// are fewer than 4 per thread.
void PackedConv::runDepthwise(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                              runtime::ThreadPool &pool) const {
  const ConvIsaKernels ck = convKernelsFor(isa_);
  const detail::EpilogueFn epiFn = detail::epilogueFor(isa_);
  const int64_t outH = s.outH(), outW = s.outW(), P = outH * outW;
  const int64_t planes = s.N * s.K, mult = s.K / s.C, taps = s.R * s.S;
  const double flops = 2.0 * double(planes) * double(taps) * double(P);
  const int64_t threads = flops < kParallelFlops ? 1 : pool.threads();
  int64_t rowBlocks = 1;
  if (threads > 1 && planes < 4 * threads) rowBlocks = std::min(outH, ceilDiv(4 * threads, planes));
  const int64_t tasks = planes * rowBlocks;

  runTasks(pool, threads, tasks, [&](int, int64_t t) {
    const int64_t plane = t / rowBlocks, n = plane / s.K, k = plane % s.K;
    const auto [oh0, oh1] = span(outH, rowBlocks, t % rowBlocks);
    if (oh1 <= oh0) return;
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
  });
}

} // namespace kiln::kernels
