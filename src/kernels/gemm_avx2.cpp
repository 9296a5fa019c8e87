// AVX2+FMA microkernels: h x 16 tiles, h = 1..6, in 2h ymm accumulators (of
// 16), two B loads and h broadcasts per k step; edge columns use
// maskload/maskstore. Compiled with -mavx2 -mfma; see gemm_microkernel.h for
// why nothing else is included.
#include "kernels/epilogue_simd.h"
#include "kernels/gemm_microkernel.h"
#include "kernels/simd_avx2.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

// The first n lanes (n clamped to [0, 8]).
__m256i laneMask(int64_t n) {
  return Avx2::laneMask(int(n < 0 ? 0 : n > 8 ? 8 : n));
}

using simd::kPlain;
using simd::TileOps;

__attribute__((always_inline)) inline __m256 finish(__m256 acc, __m256 cv, float beta,
                                                    __m256 vbeta) {
  if (beta == 1.0f) return _mm256_add_ps(acc, cv);
  if (beta != 0.0f) return _mm256_fmadd_ps(vbeta, cv, acc);
  return acc;
}

// kForm: the fused epilogue (an EpilogueForm), or kPlain for none.
// kDirect: B row k is read in place at pb + boff[k] (DirectKernelFn: a
// conv's input rows, no im2col copy), else at pb + k * ldb (a packed panel:
// ldb == kNr; FusedKernelFn says when not).

template <int H, int kForm, bool kDirect = false>
__attribute__((always_inline)) inline void
tile(int64_t kc, const float *pa, const float *pb, int64_t ldb, float *c, int64_t ldc, float beta,
     int64_t cols, const float *rowBias, const TileOps &epi, const int32_t *boff = nullptr) {
  __m256 acc[H][2];
#pragma GCC unroll 6
  for (int i = 0; i < H; ++i)
    acc[i][0] = acc[i][1] = rowBias ? _mm256_set1_ps(rowBias[i]) : _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b0, b1;
    if constexpr (kDirect) {
      const float *bk = pb + boff[k];
      b0 = _mm256_loadu_ps(bk);
      b1 = _mm256_loadu_ps(bk + 8);
    } else {
      b0 = _mm256_loadu_ps(pb);
      b1 = _mm256_loadu_ps(pb + 8);
    }
#pragma GCC unroll 6
    for (int i = 0; i < H; ++i) {
      __m256 a = _mm256_broadcast_ss(pa + i);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
    pa += H;
    if constexpr (!kDirect) pb += ldb;
  }
  const __m256 vbeta = _mm256_set1_ps(beta);
  const bool full = cols == kNr;
  const __m256i m0 = laneMask(cols), m1 = laneMask(cols - 8);
  // Unrolled like every loop over acc: one loop GCC keeps rolled makes it
  // index acc in memory, and then it stores every accumulator to the stack
  // after each FMA of the k loop (12 stores per step: the kernel ran at
  // 45% of oneDNN's speed on a Zen 4).
#pragma GCC unroll 6
  for (int i = 0; i < H; ++i) {
    const float *ci = c + i * ldc;
    __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
    if (beta != 0.0f) {
      c0 = full ? _mm256_loadu_ps(ci) : _mm256_maskload_ps(ci, m0);
      c1 = full ? _mm256_loadu_ps(ci + 8) : _mm256_maskload_ps(ci + 8, m1);
    }
    acc[i][0] = finish(acc[i][0], c0, beta, vbeta);
    acc[i][1] = finish(acc[i][1], c1, beta, vbeta);
  }
  if constexpr (kForm != kPlain) {
    // Lanes past the tile's columns compute garbage that is never stored;
    // their loads of row/column data are masked off.
    const int lanes[2] = {cols < 8 ? int(cols) : 8, cols > 8 ? int(cols - 8) : 0};
    if constexpr (kForm == int(EpilogueForm::kGeneral))
      simd::applyOpsBlock<Avx2, H, 2>(acc, epi.ops, epi.count, epi.row0, epi.col0, lanes);
    else
      simd::applyFormBlock<Avx2, EpilogueForm(kForm), H, 2>(acc, epi.ops, epi.row0, epi.col0,
                                                             lanes);
  }
#pragma GCC unroll 6
  for (int i = 0; i < H; ++i) {
    float *ci = c + i * ldc;
    if (full) {
      _mm256_storeu_ps(ci, acc[i][0]);
      _mm256_storeu_ps(ci + 8, acc[i][1]);
    } else {
      _mm256_maskstore_ps(ci, m0, acc[i][0]);
      _mm256_maskstore_ps(ci + 8, m1, acc[i][1]);
    }
  }
}

template <int H>
void kernel(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc, float beta,
            int64_t cols, const float *rowBias) {
  tile<H, kPlain>(kc, pa, pb, kNr, c, ldc, beta, cols, rowBias, TileOps{});
}

template <int H>
void direct(int64_t kc, const float *pa, const float *b, const int32_t *boff, float *c, int64_t ldc,
            float beta, const float *rowBias) {
  tile<H, kPlain, true>(kc, pa, b, 0, c, ldc, beta, kNr, rowBias, TileOps{}, boff);
}

template <int H, EpilogueForm F>
void fused(int64_t kc, const float *pa, const float *pb, int64_t ldb, float *c, int64_t ldc,
           float beta, int64_t cols, const float *rowBias, const EpilogueOp *ops, int opCount,
           int64_t row0, int64_t col0) {
  tile<H, int(F)>(kc, pa, pb, ldb, c, ldc, beta, cols, rowBias, TileOps{ops, opCount, row0, col0});
}

// fused<h, F> for h = 1..kMr into table[F].
template <EpilogueForm F> void addFused(GemmKernelInfo &info) {
  const FusedKernelFn kernels[] = {nullptr,     fused<1, F>, fused<2, F>, fused<3, F>,
                                   fused<4, F>, fused<5, F>, fused<6, F>};
  for (int h = 1; h <= kMr; ++h) info.fused[int(F)][h] = kernels[h];
}

// 8 chains: 2 per panel, 4 panels.
void row1x4(int64_t kc, const float *pa, const float *pb, float *c, float beta,
            const float *rowBias) {
  __m256 acc[8];
  const __m256 init = rowBias ? _mm256_set1_ps(*rowBias) : _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) acc[v] = init;
  const int64_t panel = kNr * kc;
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 a = _mm256_broadcast_ss(pa + k);
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v)
      acc[v] =
          _mm256_fmadd_ps(a, _mm256_load_ps(pb + (v / 2) * panel + k * kNr + (v % 2) * 8), acc[v]);
  }
  const __m256 vbeta = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) {
    const __m256 cv = beta != 0.0f ? _mm256_loadu_ps(c + 8 * v) : _mm256_setzero_ps();
    _mm256_storeu_ps(c + 8 * v, finish(acc[v], cv, beta, vbeta));
  }
}

} // namespace

GemmKernelInfo gemmKernelAvx2() {
  // 256 x 16 B micro-panel = 16 KiB in L1; mc x kc = 768 KiB in L2.
  GemmKernelInfo info{
      kMr, kNr,  256,
      768, 4096, {nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>}};
  const DirectKernelFn inPlace[] = {nullptr,   direct<1>, direct<2>, direct<3>,
                                    direct<4>, direct<5>, direct<6>};
  for (int h = 1; h <= kMr; ++h) info.direct[h] = inPlace[h];
  addFused<EpilogueForm::kGeneral>(info);
  addFused<EpilogueForm::kRelu>(info);
  addFused<EpilogueForm::kClip>(info);
  addFused<EpilogueForm::kHardSwish>(info);
  addFused<EpilogueForm::kSilu>(info);
  addFused<EpilogueForm::kAddRelu>(info);
  info.row1x4 = row1x4;
  return info;
}

} // namespace kiln::kernels::detail
