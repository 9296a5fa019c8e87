// The pixel-row orientation of the GEMM convolutions (conv.h): per image
// and group, Y_g^T[P x Kg] = im2col(X_g)^T[P x depth] * W_g^T[depth x Kg].
//
// 1. im2col(X_g)^T goes into the GEMM's packed A layout (gemm_driver.h),
//    one (K slice, pixel panel) per task: the ISA's im2col packer writes the
//    panel's h pixels as an NR-wide B micro-panel (its columns past h zero)
//    into a per-thread stage, and its first h floats of each row are the A
//    panel's row k. Packed once, read by every channel block. A 1x1 conv
//    needs no im2col (its panel rows are runs of X's channel rows), nor
//    does a strided single-channel Conv1d (its rows overlap in X).
// 2. Each task takes a block of whole NR-column channel panels: the GEMM
//    over all pixel rows into Y^T (P x roundUp(Kg, NR) floats, row-major),
//    then its block transposed into Y's NCHW rows with the bias added, and
//    the epilogue run on those rows (rows = output channels, as the caller
//    described it). With small weights, threads instead take blocks of
//    pixel panels through 1 and 2 (runPixelRows says when).
#include "kernels/conv.h"

#include "kernels/conv_run.h"
#include "kernels/gemm_driver.h"

#include <cstring>
#include <tuple>

namespace kiln::kernels {

using detail::ceilDiv;
using detail::roundUp;

namespace {

// For run(workspace = null): the calling thread's buffer, which the pool's
// threads share through the pointer while the call blocks.
thread_local detail::Scratch<float> tPixelRowsScratch;

// The workspace: packed im2col^T, then Y^T, then one packing stage per
// thread (kcMax x NR floats), each 64-byte aligned.
struct PixelRowsLayout {
  int64_t packedX, yt, stage, total;
  PixelRowsLayout(const ConvShape &s, const detail::GemmKernelInfo &ki, int threads) {
    const int64_t P = s.outH() * s.outW(), Kg = s.K / s.groups;
    const int64_t depth = s.C / s.groups * s.R * s.S;
    packedX = roundUp(P * depth, 16);
    yt = roundUp(P * roundUp(Kg, ki.nr), 16);
    stage = roundUp(detail::sliceDepth(depth, ki.kc) * ki.nr, 16);
    total = packedX + yt + std::max(threads, 1) * stage;
  }
};

// y[c][p] = yt[p][c] + bias[c] for channels [c0, c1) and pixels [p0, p1), 16
// channels at a time: each pixel's 16 values are one contiguous read of Y^T
// and 16 rows of Y fill in step. (Reading Y^T down a column instead strides
// by a multiple of 4 KiB when Kg is a power of two, and those lines all
// fall in one L1 set.)
void transposeRows(const float *yt, int64_t ldt, int64_t c0, int64_t c1, int64_t p0, int64_t p1,
                   int64_t P, const float *bias, float *y) {
  constexpr int64_t kC = 16;
  float b[kC];
  for (int64_t cb = c0; cb < c1; cb += kC) {
    const int64_t n = std::min(kC, c1 - cb);
    for (int64_t c = 0; c < n; ++c) b[c] = bias ? bias[cb + c] : 0.0f;
    float *rows = y + cb * P;
    for (int64_t p = p0; p < p1; ++p) {
      const float *src = yt + p * ldt + cb;
      for (int64_t c = 0; c < n; ++c) rows[c * P + p] = src[c] + b[c];
    }
  }
}

// dst[k * h + i] = src[k * stride + i] for k < kc, i < h <= 16: the A
// panel's rows, from an im2col stage (stride NR) or, for a 1x1 conv, from
// X's channel rows (stride P). Whole 16-float copies overrun a row into the
// start of the next one, which the next copy overwrites; they stop where a
// copy would pass dst's end or read past src's last row.
void copyRuns(const float *src, int64_t stride, int h, int64_t kc, float *dst) {
  static_assert(detail::kMaxMr <= 16);
  int64_t k = 0;
  for (; k * h + 16 <= kc * h && k * stride + 16 <= (kc - 1) * stride + h; ++k)
    std::memcpy(dst + k * h, src + k * stride, 16 * sizeof(float));
  for (; k < kc; ++k) std::memcpy(dst + k * h, src + k * stride, sizeof(float) * size_t(h));
}

} // namespace

size_t PackedConv::pixelRowsWorkspaceBytes(const ConvShape &s, int threads) const {
  const PixelRowsLayout l(s, detail::gemmKernelsFor(isa_).info, threads);
  return size_t(l.total) * sizeof(float);
}

void PackedConv::runPixelRows(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                              void *workspace, runtime::ThreadPool &pool) const {
  const detail::GemmKernels k = detail::gemmKernelsFor(isa_);
  const detail::GemmKernelInfo &ki = k.info;
  const detail::PackBFn im2col = detail::convKernelsFor(isa_).im2col;
  const std::vector<PackedB> &weights = pixelRowWeights();
  const int64_t G = s.groups, Cg = s.C / G, Kg = s.K / G;
  const int64_t outH = s.outH(), outW = s.outW(), P = outH * outW;
  const int64_t depth = Cg * s.R * s.S, kcMax = detail::sliceDepth(depth, ki.kc);
  const int64_t slices = ceilDiv(depth, kcMax), ldt = roundUp(Kg, ki.nr);
  const detail::RowPanels pixels(P, ki.mr);
  const double flops = 2.0 * double(s.N) * double(s.K) * double(depth) * double(P);
  const int threads = flops < detail::kParallelFlops ? 1 : pool.threads();
  const PixelRowsLayout layout(s, ki, threads);
  float *base =
      workspace ? static_cast<float *>(workspace) : tPixelRowsScratch.get(layout.total);
  float *packedX = base, *yt = base + layout.packedX, *stages = yt + layout.yt;

  detail::Im2colSource src{nullptr,  s.H,         s.W,         outW,      s.R,
                           s.S,      s.strideH,   s.strideW,   s.dilationH, s.dilationW,
                           s.padTop, s.padLeft};
  if (algo_ == ConvAlgo::kGemm1x1) src.H = 1, src.W = P, src.outW = P; // X as [C x P]
  // One input row and channel, no padding or dilation (an STFT or an audio
  // front end as a strided Conv1d): im2col^T is the input read as a
  // row-major matrix with overlapping rows strideW apart, packed like any A
  // (the im2col packer would gather each of its columns).
  const bool strided =
      Cg == 1 && s.R == 1 && s.H == 1 && s.dilationW == 1 && s.padLeft == 0 && s.padRight == 0;
  // A 1x1 conv's im2col^T is X^T: each panel row is a run of one channel's
  // pixels, copied without the im2col packer's NR-wide stage (which cost
  // half as much as the GEMM for SqueezeNet's 512->64 1x1 on 13x13).
  const bool oneByOne = algo_ == ConvAlgo::kGemm1x1;

  // Packs K slice `slice` of pixel panel `panel` (the current image and
  // group's src.x) into packedX. Out of line: inlined at both its calls it
  // cost 2.4 KB of the runtime's size budget, for nothing measurable.
  auto packPanel = [&](int slot, int64_t slice, int64_t panel) __attribute__((noinline)) {
    const int64_t pc = slice * kcMax, kc = std::min(kcMax, depth - pc);
    const int64_t row0 = pixels.start(panel);
    const int h = pixels.height(panel);
    float *dst = packedX + pc * P + row0 * kc;
    if (strided) { // row p of im2col^T is x[p * strideW ...]: a matrix
      detail::packAPanel(ki, src.x, s.strideW, false, 1.0f, row0, h, pc, kc, dst);
      return;
    }
    if (oneByOne) { // panel row k is pixels [row0, row0 + h) of channel pc + k
      copyRuns(src.x + pc * P + row0, P, h, kc, dst);
      return;
    }
    float *stage = stages + slot * layout.stage;
    im2col(&src, pc, kc, row0, h, ki.nr, stage);
    copyRuns(stage, ki.nr, h, kc, dst); // row k's first h floats
  };

  // Several threads split the pixel panels when the weights (depth x Kg)
  // are no larger than the packed pixel rows (P x depth): each thread packs
  // its own rows and multiplies them by all the weights, in one pass with
  // nothing shared but the read-only weights. Otherwise they split the
  // channels: whole NR panels, one block per thread, after a first pass
  // packs all pixel rows, which every block's GEMM streams (finer blocks
  // would stream them once per block: 4 blocks a thread ran ResNet's
  // 256-channel 3x3 on 14x14 at 1.3x one thread's speed). Splitting the
  // channels of SqueezeNet's 512->64 1x1 on 13x13 (two 32-channel blocks,
  // each reading 346 KB of rows packed by both cores) ran 2 threads slower
  // than one.
  const bool byPixels = threads > 1 && ldt <= P && pixels.count >= threads;
  const int64_t colPanels = ceilDiv(Kg, ki.nr);
  const int64_t blocks = std::min<int64_t>(colPanels, threads);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      src.x = x + (n * s.C + g * Cg) * s.H * s.W;
      const detail::ImageEpilogue epi(ep, n, s.K);
      const float *bias = bias_.empty() ? nullptr : bias_.data() + g * Kg;
      float *yg = y + (n * s.K + g * Kg) * P;
      detail::GemmProblem prob;
      prob.M = P, prob.N = Kg, prob.K = depth;
      prob.a.packed = packedX;
      prob.b.packed = weights[size_t(g)].data();
      prob.c = yt, prob.ldc = ldt;
      if (!byPixels)
        detail::runTasks(pool, threads, slices * pixels.count, [&](int slot, int64_t t) {
          packPanel(slot, t / pixels.count, t % pixels.count);
        });
      // A task is pixel panels [q0, q1) by channels [c0, c1): the GEMM into
      // Y^T, its block transposed into Y, and the epilogue on that block.
      detail::runTasks(pool, threads, byPixels ? threads : blocks, [&](int slot, int64_t t) {
        int64_t q0 = 0, q1 = pixels.count, c0 = 0, c1 = Kg;
        if (byPixels) {
          std::tie(q0, q1) = detail::span(pixels.count, threads, t);
          for (int64_t slice = 0; slice < slices; ++slice)
            for (int64_t q = q0; q < q1; ++q) packPanel(slot, slice, q);
        } else {
          const auto [b0, b1] = detail::span(colPanels, blocks, t);
          c0 = b0 * ki.nr, c1 = std::min(b1 * ki.nr, Kg);
        }
        if (q1 <= q0 || c1 <= c0) return;
        detail::gemmBlock(prob, k, pixels, q0, q1, c0, c1 - c0, ki.nc, nullptr, nullptr);
        const int64_t p0 = pixels.start(q0), p1 = pixels.start(q1);
        transposeRows(yt, ldt, c0, c1, p0, p1, P, bias, yg);
        if (epi.count)
          k.epilogue(epi.ops, epi.count, yg + c0 * P + p0, P, g * Kg + c0, p0, c1 - c0, p1 - p0);
      });
    }
}

} // namespace kiln::kernels
