// The depthwise conv plane kernel with AVX-512: 16 output columns per
// vector, one accumulator per vector started at the bias, one FMA per tap
// with the tap broadcast from memory. Interior vectors load straight from
// the input row (stride 2: two loads and a vpermt2ps keep the even
// columns); vectors that touch the left/right padding or the row's end use
// masked loads (padding reads as 0, never faults), and padding rows are
// skipped, so no padded copy of the plane is made. Specialized for 3x3 and
// 5x5 windows (MobileNetV3 / PP-OCR) and strides 1 and 2; other shapes take
// the generic loops. Compiled with -mavx512f -mavx512vl -mfma (see
// gemm_microkernel.h for why nothing else is included).
#include "kernels/conv_kernels.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

inline __mmask16 bitRange(int64_t lo, int64_t hi) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > 16 ? 16 : hi;
  if (hi <= lo) return 0;
  return __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// Input columns iw0 + l*SW (l < lanes) of `row`, 0 outside [0, W).
template <int SW>
__attribute__((always_inline)) inline __m512 loadMasked(const float *row, int64_t iw0, int lanes,
                                                        int64_t W, int64_t sw) {
  if constexpr (SW == 1) {
    return _mm512_maskz_loadu_ps(bitRange(-iw0, lanes < W - iw0 ? lanes : W - iw0), row + iw0);
  } else if constexpr (SW == 2) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    // Element t = 2l of row + iw0; 32-bit mask over t.
    int64_t lo = -iw0 < 0 ? 0 : -iw0, hi = 2 * lanes - 1 < W - iw0 ? 2 * lanes - 1 : W - iw0;
    hi = hi > 32 ? 32 : hi;
    const uint32_t m =
        hi <= lo ? 0u : (hi >= 32 ? ~0u : (1u << hi) - 1) & ~((1u << (lo > 31 ? 31 : lo)) - 1);
    __m512 a = _mm512_maskz_loadu_ps(__mmask16(m), row + iw0);
    __m512 b = _mm512_maskz_loadu_ps(__mmask16(m >> 16), row + iw0 + 16);
    return _mm512_permutex2var_ps(a, even, b);
  } else {
    const __m512i idx = _mm512_add_epi32(
        _mm512_set1_epi32(int32_t(iw0)),
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(int32_t(sw))));
    __mmask16 m = bitRange(0, lanes) & _mm512_cmpge_epi32_mask(idx, _mm512_setzero_si512()) &
                  _mm512_cmplt_epi32_mask(idx, _mm512_set1_epi32(int32_t(W)));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, row, 4);
  }
}

// SW: stride 1, 2 or 0 (any); KS: window width 3, 5 or 0 (any).
template <int SW, int KS> void planeRows(const DepthwiseArgs &a) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const int64_t S = KS ? KS : a.S;
  const int64_t sw = SW ? SW : a.strideW, dw = a.dilationW;
  // An interior vector's loads (16 floats, 32 for stride 2) stay in the row.
  const int64_t span = SW == 1 ? 16 : 32;
  const __m512 bias = _mm512_set1_ps(a.bias);
  int64_t batchStart = a.oh0;
  for (int64_t oh = a.oh0; oh < a.oh1; ++oh) {
    int64_t rBegin, rEnd;
    validTapRows(a, oh, rBegin, rEnd);
    const int64_t ih0 = oh * a.strideH - a.padTop;
    float *yrow = a.y + oh * a.outW;
    for (int64_t ow0 = 0; ow0 < a.outW; ow0 += 16) {
      const int lanes = a.outW - ow0 < 16 ? int(a.outW - ow0) : 16;
      const int64_t iwBase = ow0 * sw - a.padLeft;
      const bool interior =
          SW != 0 && lanes == 16 && iwBase >= 0 && iwBase + (S - 1) * dw + span <= a.W;
      __m512 acc = bias;
      for (int64_t r = rBegin; r < rEnd; ++r) {
        const float *xrow = a.x + (ih0 + r * a.dilationH) * a.W;
        const float *wr = a.w + r * S;
        if (interior) {
#pragma GCC unroll 5
          for (int64_t s = 0; s < S; ++s) {
            const float *p = xrow + iwBase + s * dw;
            __m512 v = SW == 1 ? _mm512_loadu_ps(p)
                               : _mm512_permutex2var_ps(_mm512_loadu_ps(p), even,
                                                        _mm512_loadu_ps(p + 16));
            acc = _mm512_fmadd_ps(_mm512_set1_ps(wr[s]), v, acc);
          }
        } else {
#pragma GCC unroll 5
          for (int64_t s = 0; s < S; ++s)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(wr[s]),
                                  loadMasked<SW>(xrow, iwBase + s * dw, lanes, a.W, sw), acc);
        }
      }
      _mm512_mask_storeu_ps(yrow + ow0, bitRange(0, lanes), acc);
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

void depthwiseAvx512(const DepthwiseArgs &a) {
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
