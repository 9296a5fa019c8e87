// AVX2+FMA microkernels: h x 16 tiles, h = 1..6, in 2h ymm accumulators (of
// 16), two B loads and h broadcasts per k step; edge columns use
// maskload/maskstore. Compiled with -mavx2 -mfma; see gemm_microkernel.h for
// why nothing else is included.
#include "kernels/gemm_microkernel.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

// kMaskTable + 8 - n enables the first n lanes (n in [0, 8]).
alignas(32) const int kMaskTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

__m256i laneMask(int64_t n) {
  n = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kMaskTable + 8 - n));
}

__attribute__((always_inline)) inline __m256 finish(__m256 acc, __m256 cv, float beta,
                                                    __m256 vbeta) {
  if (beta == 1.0f) return _mm256_add_ps(acc, cv);
  if (beta != 0.0f) return _mm256_fmadd_ps(vbeta, cv, acc);
  return acc;
}

template <int H>
void kernel(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc, float beta,
            int64_t cols, const float *rowBias) {
  __m256 acc[H][2];
#pragma GCC unroll 6
  for (int i = 0; i < H; ++i)
    acc[i][0] = acc[i][1] = rowBias ? _mm256_set1_ps(rowBias[i]) : _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b0 = _mm256_load_ps(pb);
    __m256 b1 = _mm256_load_ps(pb + 8);
#pragma GCC unroll 6
    for (int i = 0; i < H; ++i) {
      __m256 a = _mm256_broadcast_ss(pa + i);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
    pa += H;
    pb += kNr;
  }
  const __m256 vbeta = _mm256_set1_ps(beta);
  if (cols == kNr) {
#pragma GCC unroll 6
    for (int i = 0; i < H; ++i) {
      float *ci = c + i * ldc;
      __m256 c0 = beta != 0.0f ? _mm256_loadu_ps(ci) : _mm256_setzero_ps();
      __m256 c1 = beta != 0.0f ? _mm256_loadu_ps(ci + 8) : _mm256_setzero_ps();
      _mm256_storeu_ps(ci, finish(acc[i][0], c0, beta, vbeta));
      _mm256_storeu_ps(ci + 8, finish(acc[i][1], c1, beta, vbeta));
    }
    return;
  }
  const __m256i m0 = laneMask(cols), m1 = laneMask(cols - 8);
  for (int i = 0; i < H; ++i) {
    float *ci = c + i * ldc;
    __m256 c0 = beta != 0.0f ? _mm256_maskload_ps(ci, m0) : _mm256_setzero_ps();
    __m256 c1 = beta != 0.0f ? _mm256_maskload_ps(ci + 8, m1) : _mm256_setzero_ps();
    _mm256_maskstore_ps(ci, m0, finish(acc[i][0], c0, beta, vbeta));
    _mm256_maskstore_ps(ci + 8, m1, finish(acc[i][1], c1, beta, vbeta));
  }
}

} // namespace

GemmKernelInfo gemmKernelAvx2() {
  // 256 x 16 B micro-panel = 16 KiB in L1; mc x kc = 768 KiB in L2.
  return {kMr, kNr,  256,
          768, 4096, {nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>}};
}

} // namespace kiln::kernels::detail
