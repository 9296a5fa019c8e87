// AVX-512 microkernels: h x 32 tiles, h = 1..14, in 2h zmm accumulators; per
// k step two B loads and h broadcast-FMA pairs (the broadcasts fold into the
// FMAs' memory operands), so at h = 14, 28 FMAs per 2 loads keep both FMA
// ports busy. The driver splits M into panels of nearly equal height (16
// rows = 8 + 8, not 14 + 2), so the short kernels still have >= 8
// independent accumulator chains for most shapes. Compiled with -mavx512f
// -mavx512vl -mfma; called only after the driver checked the CPU (see
// gemm_microkernel.h for why nothing else is included).
#include "kernels/epilogue_simd.h"
#include "kernels/gemm_microkernel.h"
#include "kernels/simd_avx512.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

constexpr int kMr = 14;
constexpr int kNr = 32;

__attribute__((always_inline)) inline __m512 finish(__m512 acc, __mmask16 m, const float *c,
                                                    float beta, __m512 vbeta) {
  if (beta == 1.0f)
    acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, c));
  else if (beta != 0.0f)
    acc = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m, c), acc);
  return acc;
}

using simd::kPlain;
using simd::TileOps;

// kForm: the fused epilogue (an EpilogueForm), or kPlain for none.
// kDirect: B row k is read in place at pb + boff[k] (DirectKernelFn), else
// at pb + k * ldb (a packed panel: ldb == kNr; FusedKernelFn says when not).

template <int H, int kForm, bool kDirect>
__attribute__((always_inline)) inline void
tile(int64_t kc, const float *pa, const float *pb, const int32_t *boff, int64_t ldb, float *c,
     int64_t ldc, float beta, int64_t cols, const float *rowBias, const TileOps &epi) {
  __m512 acc[H][2];
#pragma GCC unroll 14
  for (int i = 0; i < H; ++i) {
    acc[i][0] = acc[i][1] = rowBias ? _mm512_set1_ps(rowBias[i]) : _mm512_setzero_ps();
    // C rows are read (beta != 0) and written after the k loop: start
    // their lines on the way now (rows ldc apart often alias in L1).
    _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + 16), _MM_HINT_T0);
  }
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    __m512 b0, b1;
    if constexpr (kDirect) {
      const float *bk = pb + boff[k];
      b0 = _mm512_loadu_ps(bk);
      b1 = _mm512_loadu_ps(bk + 16);
    } else {
      b0 = _mm512_loadu_ps(pb);
      b1 = _mm512_loadu_ps(pb + 16);
      _mm_prefetch(reinterpret_cast<const char *>(pb + 8 * ldb), _MM_HINT_T0);
    }
#pragma GCC unroll 14
    for (int i = 0; i < H; ++i) {
      __m512 a = _mm512_set1_ps(pa[i]);
      acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
    }
    pa += H;
    if constexpr (!kDirect) pb += ldb;
  }
  const __m512 vbeta = _mm512_set1_ps(beta);
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32   ? __mmask16(0xFFFF)
                       : cols <= 16 ? __mmask16(0)
                                    : __mmask16((1u << (cols - 16)) - 1);
  if constexpr (kForm != kPlain) {
    // The epilogue needs the finished sums: beta first, then the ops on
    // the registers, one store. Lanes past the tile's columns compute
    // garbage that is never stored; their row/column data loads are masked.
#pragma GCC unroll 14
    for (int i = 0; i < H; ++i) {
      const float *ci = c + i * ldc;
      acc[i][0] = finish(acc[i][0], m0, ci, beta, vbeta);
      acc[i][1] = finish(acc[i][1], m1, ci + 16, beta, vbeta);
    }
    const int lanes[2] = {cols < 16 ? int(cols) : 16, cols > 16 ? int(cols - 16) : 0};
    // Compiled-in forms only (addFused says why).
    static_assert(kForm != int(EpilogueForm::kGeneral));
    simd::applyFormBlock<Avx512, EpilogueForm(kForm), H, 2>(acc, epi.ops, epi.row0, epi.col0,
                                                            lanes);
#pragma GCC unroll 14
    for (int i = 0; i < H; ++i) {
      float *ci = c + i * ldc;
      _mm512_mask_storeu_ps(ci, m0, acc[i][0]);
      _mm512_mask_storeu_ps(ci + 16, m1, acc[i][1]);
    }
  } else {
#pragma GCC unroll 14
    for (int i = 0; i < H; ++i) {
      float *ci = c + i * ldc;
      _mm512_mask_storeu_ps(ci, m0, finish(acc[i][0], m0, ci, beta, vbeta));
      _mm512_mask_storeu_ps(ci + 16, m1, finish(acc[i][1], m1, ci + 16, beta, vbeta));
    }
  }
}

template <int H>
void kernel(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc, float beta,
            int64_t cols, const float *rowBias) {
  tile<H, kPlain, false>(kc, pa, pb, nullptr, kNr, c, ldc, beta, cols, rowBias, TileOps{});
}

template <int H>
void direct(int64_t kc, const float *pa, const float *b, const int32_t *boff, float *c, int64_t ldc,
            float beta, const float *rowBias) {
  tile<H, kPlain, true>(kc, pa, b, boff, 0, c, ldc, beta, kNr, rowBias, TileOps{});
}

template <int H, EpilogueForm F>
void fused(int64_t kc, const float *pa, const float *pb, int64_t ldb, float *c, int64_t ldc,
           float beta, int64_t cols, const float *rowBias, const EpilogueOp *ops, int opCount,
           int64_t row0, int64_t col0) {
  tile<H, int(F), false>(kc, pa, pb, nullptr, ldb, c, ldc, beta, cols, rowBias,
                         TileOps{ops, opCount, row0, col0});
}

// fused<h, F> for h = 1..kMr into table[F]. No kGeneral: interpreting an
// op list around 28 live accumulators spills them all (as on AVX2, where
// that cost 15-30%), so any other list keeps the tile pass after the plain
// kernel, on a tile still in L1.
template <EpilogueForm F> void addFused(GemmKernelInfo &info) {
  const FusedKernelFn kernels[] = {nullptr,      fused<1, F>,  fused<2, F>,  fused<3, F>,
                                   fused<4, F>,  fused<5, F>,  fused<6, F>,  fused<7, F>,
                                   fused<8, F>,  fused<9, F>,  fused<10, F>, fused<11, F>,
                                   fused<12, F>, fused<13, F>, fused<14, F>};
  for (int h = 1; h <= kMr; ++h) info.fused[int(F)][h] = kernels[h];
}

// r[j] = column j of the 16 x 16 block whose rows are r[0..15] (lane i of
// the result = lane j of row i): pairs of rows interleaved, then 4-row
// groups, then 128-bit quarters twice; 64 shuffles.
__attribute__((always_inline)) inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);     // rows i, i+1: columns 0, 1 of each quarter
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]); // columns 2, 3
  }
#pragma GCC unroll 4
  for (int g = 0; g < 16; g += 4) { // rows g..g+3: u[g + c] holds column c of each quarter
    u[g + 0] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
    u[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
    u[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    u[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    // Quarters q of u[g + c] hold rows g..g+3 of column 4q + c.
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);      // cols c, c+8: rows 0-7
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);      // cols c+4, c+12: rows 0-7
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88); // rows 8-15
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[c + 8] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[c + 4] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[c + 12] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

// Row-major A into an h-tall micro-panel, 16 k at a time: h row vectors
// loaded, transposed in registers, each column stored as h lanes. With one
// h-lane gather per k instead, packing A was 7-10% of ConvNeXt's and Swin's
// time on a Zen 5 (their MatMuls' activations are A); the transposes made
// those models 5-6% faster.
void packA(const float *a, int64_t lda, int64_t kc, int h, float alpha, float *dst) {
  const __mmask16 rows = __mmask16((1u << h) - 1);
  const __m512 valpha = _mm512_set1_ps(alpha);
  for (int64_t k0 = 0; k0 < kc; k0 += 16) {
    const int n = kc - k0 < 16 ? int(kc - k0) : 16;
    const __mmask16 cols = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      r[i] = i < h ? _mm512_maskz_loadu_ps(cols, a + i * lda + k0) : _mm512_setzero_ps();
    transpose16(r);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      if (j < n) _mm512_mask_storeu_ps(dst + (k0 + j) * h, rows, _mm512_mul_ps(r[j], valpha));
  }
}

} // namespace

GemmKernelInfo gemmKernelAvx512() {
  // Measured on the 48 KiB L1d / 2 MiB L2 Xeon (gemm_bench, best of
  // repeats): kc = 512 halves the passes over C against kc = 256 (+5% at
  // 1024^3) although the 64 KiB B micro-panel then streams from L2; the
  // 336 x 512 A block (672 KiB) leaves L2 room for it. kc in {128..1024} and
  // mc in {252..1008} were tried.
  GemmKernelInfo info{
      kMr,
      kNr,
      512,
      336,
      4096,
      {nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>, kernel<7>,
       kernel<8>, kernel<9>, kernel<10>, kernel<11>, kernel<12>, kernel<13>, kernel<14>},
      packA,
      {nullptr, direct<1>, direct<2>, direct<3>, direct<4>, direct<5>, direct<6>, direct<7>,
       direct<8>, direct<9>, direct<10>, direct<11>, direct<12>, direct<13>, direct<14>}};
  addFused<EpilogueForm::kRelu>(info);
  addFused<EpilogueForm::kClip>(info);
  addFused<EpilogueForm::kHardSwish>(info);
  addFused<EpilogueForm::kSilu>(info);
  addFused<EpilogueForm::kAddRelu>(info);
  return info;
}

} // namespace kiln::kernels::detail
