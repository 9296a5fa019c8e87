// The depthwise conv plane kernel with AVX2+FMA: the scheme of
// conv_depthwise_avx512.cpp with 8 output columns per vector; border vectors
// use maskload (padding reads as 0, never faults), stride 2 deinterleaves
// with shuffles, other strides gather. Compiled with -mavx2 -mfma (see
// gemm_microkernel.h for why nothing else is included).
#include "kernels/conv_kernels.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

// Lanes l (0..7) with lo <= l + first < hi, as a maskload mask.
inline __m256i laneRange(int64_t lo, int64_t hi, int first) {
  lo -= first, hi -= first;
  lo = lo < -1 ? -1 : lo > 8 ? 8 : lo;
  hi = hi < 0 ? 0 : hi > 9 ? 9 : hi;
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(int(hi)), iota),
                          _mm256_cmpgt_epi32(iota, _mm256_set1_epi32(int(lo) - 1)));
}

inline __m256 evens(__m256 a, __m256 b) {
  __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); // a0 a2 b0 b2 | a4 a6 b4 b6
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
}

// Input columns iw0 + l*SW (l < lanes) of `row`, 0 outside [0, W).
template <int SW>
__attribute__((always_inline)) inline __m256 loadMasked(const float *row, int64_t iw0, int lanes,
                                                        int64_t W, int64_t sw) {
  if constexpr (SW == 1) {
    return _mm256_maskload_ps(row + iw0, laneRange(-iw0, lanes < W - iw0 ? lanes : W - iw0, 0));
  } else if constexpr (SW == 2) {
    const int64_t hi = 2 * lanes - 1 < W - iw0 ? 2 * lanes - 1 : W - iw0;
    return evens(_mm256_maskload_ps(row + iw0, laneRange(-iw0, hi, 0)),
                 _mm256_maskload_ps(row + iw0 + 8, laneRange(-iw0, hi, 8)));
  } else {
    const __m256i idx =
        _mm256_add_epi32(_mm256_set1_epi32(int32_t(iw0)),
                         _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(int32_t(sw))));
    const __m256i m =
        _mm256_and_si256(laneRange(0, lanes, 0),
                         _mm256_and_si256(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(-1)),
                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(W)), idx)));
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), row, idx, _mm256_castsi256_ps(m), 4);
  }
}

template <int SW, int KS> void planeRows(const DepthwiseArgs &a) {
  const int64_t S = KS ? KS : a.S;
  const int64_t sw = SW ? SW : a.strideW, dw = a.dilationW;
  const int64_t span = SW == 1 ? 8 : 16;
  const __m256 bias = _mm256_set1_ps(a.bias);
  int64_t batchStart = a.oh0;
  for (int64_t oh = a.oh0; oh < a.oh1; ++oh) {
    int64_t rBegin, rEnd;
    validTapRows(a, oh, rBegin, rEnd);
    const int64_t ih0 = oh * a.strideH - a.padTop;
    float *yrow = a.y + oh * a.outW;
    for (int64_t ow0 = 0; ow0 < a.outW; ow0 += 8) {
      const int lanes = a.outW - ow0 < 8 ? int(a.outW - ow0) : 8;
      const int64_t iwBase = ow0 * sw - a.padLeft;
      const bool interior =
          SW != 0 && lanes == 8 && iwBase >= 0 && iwBase + (S - 1) * dw + span <= a.W;
      __m256 acc = bias;
      for (int64_t r = rBegin; r < rEnd; ++r) {
        const float *xrow = a.x + (ih0 + r * a.dilationH) * a.W;
        const float *wr = a.w + r * S;
        if (interior) {
#pragma GCC unroll 5
          for (int64_t s = 0; s < S; ++s) {
            const float *p = xrow + iwBase + s * dw;
            __m256 v =
                SW == 1 ? _mm256_loadu_ps(p) : evens(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8));
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(wr + s), v, acc);
          }
        } else {
#pragma GCC unroll 5
          for (int64_t s = 0; s < S; ++s)
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(wr + s),
                                  loadMasked<SW>(xrow, iwBase + s * dw, lanes, a.W, sw), acc);
        }
      }
      if (lanes == 8)
        _mm256_storeu_ps(yrow + ow0, acc);
      else
        _mm256_maskstore_ps(yrow + ow0, laneRange(0, lanes, 0), acc);
    }
    if (a.opCount && ((oh + 1 - batchStart) * a.outW >= kEpilogueBatch || oh + 1 == a.oh1)) {
      a.epilogue(a.ops, a.opCount, a.y + batchStart * a.outW, 0, a.channel, batchStart * a.outW, 1,
                 (oh + 1 - batchStart) * a.outW);
      batchStart = oh + 1;
    }
  }
}

template <int SW> void dispatchWidth(const DepthwiseArgs &a) {
  switch (a.S) {
  case 3:
    return planeRows<SW, 3>(a);
  case 5:
    return planeRows<SW, 5>(a);
  default:
    return planeRows<SW, 0>(a);
  }
}

} // namespace

void depthwiseAvx2(const DepthwiseArgs &a) {
  switch (a.strideW) {
  case 1:
    return dispatchWidth<1>(a);
  case 2:
    return dispatchWidth<2>(a);
  default:
    return planeRows<0, 0>(a);
  }
}

} // namespace kiln::kernels::detail
