// AVX2+FMA microkernel: 6 x 16 tile in 12 ymm accumulators (of 16), two B
// loads and six broadcasts per k step. Compiled with -mavx2 -mfma; see
// gemm_microkernel.h for why nothing else is included.
#include "kernels/gemm_microkernel.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

__attribute__((always_inline)) inline __m256 finish(__m256 acc, const float *c, float beta,
                                                    __m256 vbeta, __m256 bias, bool relu) {
  if (beta == 1.0f)
    acc = _mm256_add_ps(acc, _mm256_loadu_ps(c));
  else if (beta != 0.0f)
    acc = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(c), acc);
  acc = _mm256_add_ps(acc, bias);
  if (relu) acc = _mm256_max_ps(acc, _mm256_setzero_ps());
  return acc;
}

void kernel6x16(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc, float beta,
                const float *bias, bool relu) {
  __m256 acc[kMr][2];
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b0 = _mm256_load_ps(pb);
    __m256 b1 = _mm256_load_ps(pb + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      __m256 a = _mm256_broadcast_ss(pa + i);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
    pa += kMr;
    pb += kNr;
  }
  __m256 vbeta = _mm256_set1_ps(beta);
  __m256 bias0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  __m256 bias1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) {
    float *ci = c + i * ldc;
    _mm256_storeu_ps(ci, finish(acc[i][0], ci, beta, vbeta, bias0, relu));
    _mm256_storeu_ps(ci + 8, finish(acc[i][1], ci + 8, beta, vbeta, bias1, relu));
  }
}

} // namespace

GemmKernelInfo gemmKernelAvx2() {
  // 256 x 16 B micro-panel = 16 KiB in L1; mc x kc = 768 KiB in L2.
  return {kMr, kNr, 256, 768, 4096, kernel6x16};
}

} // namespace kiln::kernels::detail
