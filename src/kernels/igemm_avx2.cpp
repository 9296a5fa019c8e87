// AVX2 integer microkernels (CPUs without VNNI): h x 16 tiles, h = 1..6, in
// 2h ymm accumulators. vpmaddubsw would multiply u8 by i8 in one step but
// saturates its i16 pair sums (255 * 127 * 2 > 32767: ONNX Runtime's and
// oneDNN's AVX2 int8 results are inexact for that reason), so both operands
// are packed widened to i16 in pairs of k, and vpmaddwd forms exact i32 pair
// sums: per 2 k, two B loads (8 columns x 2 k each), per row one 4-byte
// broadcast of A's pair (a load-port broadcast) and two vpmaddwd + vpaddd.
// Compiled with -mavx2 -mfma; called only after the driver checked the CPU.
#include "kernels/igemm_microkernel.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

template <int H>
void kernel(int64_t k2, const void *pav, const void *pbv, int32_t *c, int64_t ldc, int64_t cols) {
  const int16_t *pa = static_cast<const int16_t *>(pav);
  const int16_t *pb = static_cast<const int16_t *>(pbv);
  __m256i acc[H][2];
#pragma GCC unroll 6
  for (int i = 0; i < H; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int64_t g = 0; g < k2; ++g) {
    const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i *>(pb));
    const __m256i b1 = _mm256_load_si256(reinterpret_cast<const __m256i *>(pb + 16));
#pragma GCC unroll 6
    for (int i = 0; i < H; ++i) {
      int32_t a2;
      __builtin_memcpy(&a2, pa + 2 * i, 4);
      const __m256i a = _mm256_set1_epi32(a2);
      acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(a, b0));
      acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(a, b1));
    }
    pa += 2 * H;
    pb += 2 * kNr;
  }
#pragma GCC unroll 6
  for (int i = 0; i < H; ++i) {
    int32_t *ci = c + i * ldc;
    if (cols == kNr) {
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(ci), acc[i][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(ci + 8), acc[i][1]);
    } else {
      alignas(32) int32_t t[kNr];
      _mm256_store_si256(reinterpret_cast<__m256i *>(t), acc[i][0]);
      _mm256_store_si256(reinterpret_cast<__m256i *>(t + 8), acc[i][1]);
      for (int64_t j = 0; j < cols; ++j) ci[j] = t[j];
    }
  }
}

} // namespace

IgemmKernelInfo igemmKernelAvx2() {
  return {kMr,
          kNr,
          {2, 2},
          {nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>}};
}

} // namespace kiln::kernels::detail
