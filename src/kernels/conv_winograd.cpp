// Winograd F(4x4, 3x3) convolution (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016): each 4x4 block of output pixels
// ("tile") is Y = A^T [sum_c U_c (.) V_c] A, where V_c = B^T d_c B is the
// tile's 6x6 input patch of channel c transformed and U_c = G w_c G^T the
// filter transformed (at pack time). Per transformed entry xi (36 of them)
// the sum over channels is a GEMM, M_xi[K x tiles] = U_xi[K x C] *
// V_xi[C x tiles]: 36 multiply-adds per tile and channel pair where the
// direct conv needs 9 x 16 = 144. The transforms cost O(C + K) per tile.
// Rounding grows by the transforms' magnitudes (entries up to 5 in B, 8 in
// A): relative errors ~1e-6 against ~1e-7 for the direct conv, the usual
// price of F(4x4, 3x3) in f32 (larger tiles save more multiply-adds and
// lose more digits).
//
// Per task: one panel of NR (32) consecutive tiles of one image (tiles in
// row-major order over the output, partial tiles at the right and bottom
// edges compute values that are never stored), and a range of output
// channels:
//   1. the input transform writes V[xi][C][32]: exactly the GEMM's packed B
//      layout for one NR panel, so the GEMMs read it in place;
//   2. per block of <= kBlockRows output channels: the 36 GEMMs into
//      M[xi][K][32] (the weights pre-packed as A), then the output transform
//      of the block's channels into Y with the bias, and the epilogue on the
//      finished rows while they are in L2.
// The transforms are ISA kernels (conv_kernels.h), 16 tiles per vector.
#include "kernels/conv_winograd.h"

#include "kernels/conv_run.h"
#include "kernels/gemm_driver.h"

#include <cstring>

namespace kiln::kernels {

using detail::ceilDiv;
using detail::kWinogradXi;
using detail::roundUp;

namespace detail {

namespace {

constexpr int kTile = 4;  // output pixels per tile side
constexpr int kPatch = 6; // input pixels per tile side

// G (6x3), the filter transform.
constexpr double kG[kPatch][3] = {{1.0 / 4, 0, 0},
                                  {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                  {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                  {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                  {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                  {0, 0, 1}};

// G's rows 0, 1 and 5, inverted: w = L u_sub L^T with L = [4 0 0; -4 -6 -1;
// 0 0 1], applied to one 3-vector.
void invertRows(const double in[3], double out[3]) {
  out[0] = 4 * in[0];
  out[1] = -4 * in[0] - 6 * in[1] - in[2];
  out[2] = in[2];
}
constexpr int kLRows[3] = {0, 1, 5};

// Output channels per block of GEMMs and output transform: M's block (36 x
// 64 x 32 floats, 288 KiB) stays in L2 between the two.
constexpr int64_t kBlockRows = 64;

// Transform cost per tile and input / output channel, in GEMM multiply-adds
// (32 a cycle on AVX-512): set so that the choice matches bench/conv on
// ResNet's, YOLOv8's and SqueezeNet's 3x3 convs (perf on ResNet's
// 64-channel layer: input transform half the GEMMs' time, output transform
// a quarter; at 16 channels the GEMMs lose more than that to their short
// depth, and Winograd still wins by 25-45%).
constexpr double kInputCost = 370, kOutputCost = 190;

int64_t tilesOf(int64_t n) {
  return ceilDiv(n, kTile);
}

} // namespace

bool winogradApplies(const ConvShape &s, GemmIsa isa) {
  return resolveGemmIsa(isa) == GemmIsa::kAvx512 && s.R == 3 && s.S == 3 && s.strideH == 1 &&
         s.strideW == 1 && s.dilationH == 1 && s.dilationW == 1 && s.groups == 1;
}

double winogradCost(const ConvShape &s, int nr) {
  const double tiles = double(tilesOf(s.outH()) * tilesOf(s.outW()));
  const double padded = double(roundUp(int64_t(tiles), nr));
  return kWinogradXi * padded * double(s.K) * double(s.C) + kInputCost * tiles * double(s.C) +
         kOutputCost * tiles * double(s.K);
}

// Pack-time code, compiled for size: -O3 unrolled and vectorized these
// loops into 6 KiB of the runtime library for no measurable gain.
[[gnu::optimize("Os")]] void winogradTransformWeights(int64_t K, int64_t C, const float *w,
                                                      float *u) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const float *g = w + (k * C + c) * 9;
      double gt[kPatch][3]; // G g
      for (int i = 0; i < kPatch; ++i)
        for (int t = 0; t < 3; ++t)
          gt[i][t] = kG[i][0] * g[t] + kG[i][1] * g[3 + t] + kG[i][2] * g[6 + t];
      for (int i = 0; i < kPatch; ++i)
        for (int j = 0; j < kPatch; ++j) {
          const double v = gt[i][0] * kG[j][0] + gt[i][1] * kG[j][1] + gt[i][2] * kG[j][2];
          u[((i * kPatch + j) * K + k) * C + c] = float(v);
        }
    }
}

[[gnu::optimize("Os")]] void winogradRecoverWeights(int64_t K, int64_t C, const float *u,
                                                    float *w) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      double sub[3][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          sub[i][j] = u[((kLRows[i] * kPatch + kLRows[j]) * K + k) * C + c];
      double rows[3][3], col[3], out[3]; // rows[t] = column t of L sub
      for (int t = 0; t < 3; ++t) {
        for (int i = 0; i < 3; ++i) col[i] = sub[i][t];
        invertRows(col, rows[t]);
      }
      float *g = w + (k * C + c) * 9;
      for (int r = 0; r < 3; ++r) {
        for (int t = 0; t < 3; ++t) col[t] = rows[t][r];
        invertRows(col, out);
        for (int t = 0; t < 3; ++t) g[r * 3 + t] = float(out[t]);
      }
    }
}

} // namespace detail

namespace {

// For run(workspace = null): the calling thread's buffer, which the pool's
// threads share through the pointer while the call blocks.
thread_local detail::Scratch<float> tWinogradScratch;

// Per thread: V (36 x C x NR floats), then M (36 x K x NR), 64-byte aligned.
// The 36 matrices of each lie a cache line more than their size apart: the
// transforms touch all 36 at once, and a power-of-two channel count would
// put them a multiple of 4 KiB apart, in one L1 set (the input transform
// took as long as the GEMMs on ResNet's 64-channel layers).
struct WinogradLayout {
  int64_t vXi, mXi, v, m, slot;
  WinogradLayout(const ConvShape &s, int nr)
      : vXi(roundUp(s.C * nr, 16) + 16), mXi(roundUp(s.K * nr, 16) + 16), v(kWinogradXi * vXi),
        m(kWinogradXi * mXi), slot(v + m) {}
};

// Calls f(ty, tx, count, lane) for the runs of tiles [t0, t1) that lie in
// one tile row, at most 16 (a vector) each; lane = first tile - t0.
template <class F> void forEachChunk(int64_t t0, int64_t t1, int64_t tilesW, F &&f) {
  for (int64_t t = t0; t < t1;) {
    const int64_t ty = t / tilesW, tx = t % tilesW;
    const int64_t count = std::min<int64_t>({16, tilesW - tx, t1 - t});
    f(ty, tx, int(count), t - t0);
    t += count;
  }
}

} // namespace

size_t PackedConv::winogradWorkspaceBytes(const ConvShape &s, int threads) const {
  const WinogradLayout l(s, detail::gemmKernelsFor(isa_).info.nr);
  return size_t(std::max(threads, 1)) * size_t(l.slot) * sizeof(float);
}

// Tasks: (image, panel of NR tiles), and when they are fewer than the
// threads, blocks of output channels as well (each redoes the panel's input
// transform, a few percent of its GEMMs).
void PackedConv::runWinograd(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                             void *workspace, runtime::ThreadPool &pool) const {
  const detail::GemmKernels k = detail::gemmKernelsFor(isa_);
  const detail::GemmKernelInfo &ki = k.info;
  const detail::ConvIsaKernels ck = detail::convKernelsFor(isa_);
  const std::vector<PackedA> &u = winogradWeights();
  const int64_t outH = s.outH(), outW = s.outW(), P = outH * outW;
  const int64_t tilesW = detail::tilesOf(outW), tiles = detail::tilesOf(outH) * tilesW;
  const int64_t panels = ceilDiv(tiles, ki.nr);
  const detail::RowPanels rows(s.K, ki.mr);
  const double flops = 2.0 * double(s.N) * double(s.K) * double(s.C) * 9.0 * double(P);
  const int64_t threads = flops < detail::kParallelFlops ? 1 : pool.threads();
  const int64_t units = s.N * panels;
  const int64_t splits = units < threads ? std::min(rows.count, ceilDiv(threads, units)) : 1;
  const WinogradLayout layout(s, ki.nr);
  float *base = workspace
                    ? static_cast<float *>(workspace)
                    : tWinogradScratch.get(std::min(threads, detail::kMaxSlots) * layout.slot);

  detail::runTasks(pool, threads, units * splits, [&](int slot, int64_t t) {
    const int64_t unit = t / splits, n = unit / panels, t0 = unit % panels * ki.nr;
    const int64_t t1 = std::min(tiles, t0 + ki.nr), cols = t1 - t0;
    const auto [r0, r1] = detail::span(rows.count, splits, t % splits);
    if (r1 <= r0) return;
    float *v = base + slot * layout.slot, *m = v + layout.v;
    // The GEMMs read whole NR panels: lanes past the last tile are zeros
    // (not stale floats, which may be NaNs or denormals).
    if (cols < ki.nr) std::memset(v, 0, sizeof(float) * size_t(layout.v));
    const float *xn = x + n * s.C * s.H * s.W;
    float *yn = y + n * s.K * P;
    forEachChunk(t0, t1, tilesW, [&](int64_t ty, int64_t tx, int count, int64_t lane) {
      ck.winogradInput({xn, s.C, s.H, s.W, ty * detail::kTile - s.padTop,
                        tx * detail::kTile - s.padLeft, count, v, layout.vXi, ki.nr, lane});
    });
    const detail::ImageEpilogue epi(ep, n, s.K);
    for (int64_t b0 = r0, b1; b0 < r1; b0 = b1) {
      b1 = b0 + 1;
      while (b1 < r1 && rows.start(b1 + 1) - rows.start(b0) <= detail::kBlockRows) ++b1;
      for (int xi = 0; xi < kWinogradXi; ++xi) {
        detail::GemmProblem prob;
        prob.M = s.K, prob.N = cols, prob.K = s.C;
        prob.a.packed = u[size_t(xi)].data();
        prob.b.packed = v + xi * layout.vXi;
        prob.c = m + xi * layout.mXi, prob.ldc = ki.nr;
        detail::gemmBlock(prob, k, rows, b0, b1, 0, cols, ki.nr, nullptr, nullptr);
      }
      const int64_t k0 = rows.start(b0), k1 = rows.start(b1);
      forEachChunk(t0, t1, tilesW, [&](int64_t ty, int64_t tx, int count, int64_t lane) {
        const int64_t oy = ty * detail::kTile, ox = tx * detail::kTile;
        ck.winogradOutput({m, layout.mXi, ki.nr, lane, k0, k1,
                           bias_.empty() ? nullptr : bias_.data(), yn, outH, outW, oy, ox, count});
        if (epi.count == 0) return;
        const int64_t width = std::min<int64_t>(detail::kTile * count, outW - ox);
        for (int64_t r = oy; r < std::min<int64_t>(oy + detail::kTile, outH); ++r)
          k.epilogue(epi.ops, epi.count, yn + k0 * P + r * outW + ox, P, k0, r * outW + ox, k1 - k0,
                     width);
      });
    }
  });
}

} // namespace kiln::kernels
