// The pixel-row orientation of the GEMM convolutions (conv.h): per image
// and group, Y_g^T[P x Kg] = im2col(X_g)^T[P x depth] * W_g^T[depth x Kg].
//
// 1. im2col(X_g)^T goes into the GEMM's packed A layout (gemm_driver.h),
//    one (K slice, pixel panel) per task: the ISA's im2col packer writes the
//    panel's h pixels as an NR-wide B micro-panel (its columns past h zero)
//    into a per-thread stage, and its first h floats of each row are the A
//    panel's row k. Packed once, read by every channel block. A strided
//    single-channel Conv1d needs no im2col: its rows overlap in X.
// 2. Each task takes a block of whole NR-column channel panels: the GEMM
//    over all pixel rows into Y^T (P x roundUp(Kg, NR) floats, row-major),
//    then its block transposed into Y's NCHW rows with the bias added, and
//    the epilogue run on those rows (rows = output channels, as the caller
//    described it).
#include "kernels/conv.h"

#include "kernels/conv_run.h"
#include "kernels/gemm_driver.h"

#include <cstring>

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

// y[c][p] = yt[p][c] + bias[c] for channels [c0, c1) and all P pixels, 16
// channels at a time: each pixel's 16 values are one contiguous read of Y^T
// and 16 rows of Y fill in step. (Reading Y^T down a column instead strides
// by a multiple of 4 KiB when Kg is a power of two, and those lines all
// fall in one L1 set.)
void transposeRows(const float *yt, int64_t ldt, int64_t c0, int64_t c1, int64_t P,
                   const float *bias, float *y) {
  constexpr int64_t kC = 16;
  float b[kC];
  for (int64_t cb = c0; cb < c1; cb += kC) {
    const int64_t n = std::min(kC, c1 - cb);
    for (int64_t c = 0; c < n; ++c) b[c] = bias ? bias[cb + c] : 0.0f;
    float *rows = y + cb * P;
    for (int64_t p = 0; p < P; ++p) {
      const float *src = yt + p * ldt + cb;
      for (int64_t c = 0; c < n; ++c) rows[c * P + p] = src[c] + b[c];
    }
  }
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

  // Channel blocks: whole NR panels, one block per thread. Every block's
  // GEMM streams all of the packed pixel rows (from L2 for one K slice);
  // finer blocks would stream them once per block (4 blocks a thread ran
  // ResNet's 256-channel 3x3 on 14x14 at 1.3x one thread's speed).
  const int64_t colPanels = ceilDiv(Kg, ki.nr);
  const int64_t blocks = std::min<int64_t>(colPanels, threads);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      src.x = x + (n * s.C + g * Cg) * s.H * s.W;
      detail::runTasks(pool, threads, slices * pixels.count, [&](int slot, int64_t t) {
        const int64_t pc = t / pixels.count * kcMax, kc = std::min(kcMax, depth - pc);
        const int64_t row0 = pixels.start(t % pixels.count);
        const int h = pixels.height(t % pixels.count);
        float *dst = packedX + pc * P + row0 * kc;
        if (strided) { // row p of im2col^T is x[p * strideW ...]: a matrix
          detail::packAPanel(ki, src.x, s.strideW, false, 1.0f, row0, h, pc, kc, dst);
          return;
        }
        float *stage = stages + slot * layout.stage;
        im2col(&src, pc, kc, row0, h, ki.nr, stage);
        // Row kk's h floats. Copying 16 (h <= mr <= 16) overwrites only
        // the start of the rows after kk, copied next, until the copy would
        // pass the panel's end; the last rows copy h.
        static_assert(detail::kMaxMr <= 16);
        int64_t kk = 0;
        for (; kk * h + 16 <= kc * h; ++kk)
          std::memcpy(dst + kk * h, stage + kk * ki.nr, 16 * sizeof(float));
        for (; kk < kc; ++kk)
          std::memcpy(dst + kk * h, stage + kk * ki.nr, sizeof(float) * size_t(h));
      });
      const detail::ImageEpilogue epi(ep, n, s.K);
      detail::runTasks(pool, threads, blocks, [&](int, int64_t t) {
        const auto [q0, q1] = detail::span(colPanels, blocks, t);
        const int64_t c0 = q0 * ki.nr, c1 = std::min(q1 * ki.nr, Kg);
        if (c1 <= c0) return;
        detail::GemmProblem prob;
        prob.M = P, prob.N = Kg, prob.K = depth;
        prob.a.packed = packedX;
        prob.b.packed = weights[size_t(g)].data();
        prob.c = yt, prob.ldc = ldt;
        detail::gemmBlock(prob, k, pixels, 0, pixels.count, c0, c1 - c0, ki.nc, nullptr, nullptr);
        float *yg = y + (n * s.K + g * Kg) * P;
        transposeRows(yt, ldt, c0, c1, P, bias_.empty() ? nullptr : bias_.data() + g * Kg, yg);
        if (epi.count)
          k.epilogue(epi.ops, epi.count, yg + c0 * P, P, g * Kg + c0, 0, c1 - c0, P);
      });
    }
}

} // namespace kiln::kernels
