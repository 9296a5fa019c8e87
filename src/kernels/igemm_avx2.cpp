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

// 8 values per step: f32 convert, scale, clamp, round half to even by the
// 1.5 * 2^23 addition (as the portable loop: the clamp bounds are a few
// hundred, so the value is far below 2^22), zero point, clamp, then packed
// to bytes with saturation (exact: the value is already in range).
void requantizeRowAvx2(const int32_t *acc, int32_t bias, float scale, int cols, float below,
                       float above, float zeroPoint, float lo, float hi, bool outSigned, void *o) {
  const __m256i vbias = _mm256_set1_epi32(bias);
  const __m256 vscale = _mm256_set1_ps(scale), vbelow = _mm256_set1_ps(below),
               vabove = _mm256_set1_ps(above), magic = _mm256_set1_ps(0x1.8p23f),
               vzp = _mm256_set1_ps(zeroPoint), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  uint8_t *out = static_cast<uint8_t *>(o);
  int j = 0;
  for (; j + 8 <= cols; j += 8) {
    const __m256i v =
        _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(acc + j)), vbias);
    __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(v), vscale);
    x = _mm256_min_ps(_mm256_max_ps(x, vbelow), vabove);
    x = _mm256_sub_ps(_mm256_add_ps(x, magic), magic);
    x = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(x, vzp), vlo), vhi);
    const __m256i q = _mm256_cvttps_epi32(x);
    const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i q8 = outSigned ? _mm_packs_epi16(q16, q16) : _mm_packus_epi16(q16, q16);
    _mm_storel_epi64(reinterpret_cast<__m128i *>(out + j), q8);
  }
  for (; j < cols; ++j) { // the same steps, one value
    const __m256i v = _mm256_add_epi32(_mm256_set1_epi32(acc[j]), vbias);
    __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(v), vscale);
    x = _mm256_min_ps(_mm256_max_ps(x, vbelow), vabove);
    x = _mm256_sub_ps(_mm256_add_ps(x, magic), magic);
    x = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(x, vzp), vlo), vhi);
    out[j] = uint8_t(_mm_cvtsi128_si32(_mm256_castsi256_si128(_mm256_cvttps_epi32(x))));
  }
}

IgemmKernelInfo igemmKernelAvx2() {
  return {kMr,
          kNr,
          {2, 2},
          {nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>},
          requantizeRowAvx2};
}

} // namespace kiln::kernels::detail
