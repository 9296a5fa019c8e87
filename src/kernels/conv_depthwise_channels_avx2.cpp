// The channel-interleaved depthwise kernel (conv_depthwise_channels.h) with
// AVX2+FMA: 8 channels per vector. Compiled with -mavx2 -mfma (see
// gemm_microkernel.h for why nothing else is included).
#include "kernels/conv_kernels.h"

#include <immintrin.h>

#include "kernels/conv_depthwise_channels.h"
#include "kernels/simd_avx2.h"

namespace kiln::kernels::detail {
namespace {

struct Channels : Avx2 {
  static void interleave8(const float *x, int64_t plane, int64_t offset, int64_t n, float *dst) {
    __m256 v[8];
    loadPixels8(x, plane, offset, n, v);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + j * 8, v[j]);
  }
  static void scatter8(T acc[8], float *y, int64_t outPlane, int64_t n) {
    storePixels8(acc, y, outPlane, n);
  }
};

} // namespace

void depthwiseChannelsAvx2(const DepthwiseBlockArgs &a) {
  depthwiseChannels<Channels>(a);
}

} // namespace kiln::kernels::detail
