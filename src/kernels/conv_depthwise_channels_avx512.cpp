// The channel-interleaved depthwise kernel (conv_depthwise_channels.h) with
// AVX-512: 16 channels per vector, twice the MACs per FMA of the AVX2 one;
// the interleave and the scatter run as two 8x8 register transposes per 8
// pixels, one per half of the channels. Compiled with -mavx512f
// -mavx512vl -mfma (see gemm_microkernel.h for why nothing else is
// included).
#include "kernels/conv_kernels.h"

#include <immintrin.h>

#include "kernels/conv_depthwise_channels.h"
#include "kernels/simd_avx512.h"

namespace kiln::kernels::detail {
namespace {

struct Channels : Avx512 {
  static void interleave8(const float *x, int64_t plane, int64_t offset, int64_t n, float *dst) {
    __m256 lo[8], hi[8];
    loadPixels8(x, plane, offset, n, lo);
    loadPixels8(x + 8 * plane, plane, offset, n, hi);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j)
      _mm512_storeu_ps(dst + j * 16, _mm512_castpd_ps(_mm512_insertf64x4(
                                         _mm512_castpd256_pd512(_mm256_castps_pd(lo[j])),
                                         _mm256_castps_pd(hi[j]), 1)));
  }
  static void scatter8(T acc[8], float *y, int64_t outPlane, int64_t n) {
    __m256 lo[8], hi[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      lo[j] = _mm512_castps512_ps256(acc[j]);
      hi[j] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[j]), 1));
    }
    storePixels8(lo, y, outPlane, n);
    storePixels8(hi, y + 8 * outPlane, outPlane, n);
  }
};

} // namespace

void depthwiseChannelsAvx512(const DepthwiseBlockArgs &a) {
  depthwiseChannels<Channels>(a);
}

} // namespace kiln::kernels::detail
