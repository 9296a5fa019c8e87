// The im2col micro-panel packer with AVX-512 (NR = 32 columns per panel, two
// zmm). A panel's 32 output pixels are cut once into segments that lie in
// one output row (one segment when outW >= 32 and the panel does not wrap);
// then every im2col row (c, r, s) costs, per segment, one bounds check on
// the input row and a masked load of the valid input columns: stride 1 reads
// contiguous floats, stride 2 reads twice as many and keeps the even ones
// (vpermt2ps), other strides gather. Masked-off lanes (padding) read as 0 and
// never fault. Compiled with -mavx512f -mavx512vl -mfma (see
// gemm_microkernel.h for why nothing else is included).
#include "kernels/conv_kernels.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

constexpr int kNr = 32;

// Lanes outside a segment are 0 in both operands (AVX512F has no or_ps).
inline __m512 orPs(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

// Panel columns [lane, lane + len) are output pixels of one output row whose
// windows start at input row ih and column iw (before the tap offsets).
struct Segment {
  int64_t ih, iw;
  int lane, len;
};

int buildSegments(const Im2colSource &s, int64_t p, int cols, Segment *seg) {
  int n = 0;
  int64_t oh = p / s.outW, ow = p % s.outW;
  for (int lane = 0; lane < cols; ++oh, ow = 0) {
    const int64_t left = s.outW - ow;
    const int len = left < cols - lane ? int(left) : cols - lane;
    seg[n++] = {oh * s.strideH - s.padTop, ow * s.strideW - s.padLeft, lane, len};
    lane += len;
  }
  return n;
}

// Bits [lo, hi) of a 64-bit mask, clipped to [0, 64).
inline uint64_t bitRange(int64_t lo, int64_t hi) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > 64 ? 64 : hi;
  if (hi <= lo) return 0;
  const uint64_t upto = hi >= 64 ? ~uint64_t(0) : (uint64_t(1) << hi) - 1;
  return upto & ~((uint64_t(1) << lo) - 1);
}

// Adds segment g's values for input row `row` (tap column offset applied in
// iw0) into the panel row (v0: lanes 0-15, v1: lanes 16-31). Lanes outside
// the segment stay untouched (zero until some segment fills them).
template <int SW>
__attribute__((always_inline)) inline void loadSegment(const Im2colSource &s, const float *row,
                                                       int64_t iw0, int lane, int len, __m512 &v0,
                                                       __m512 &v1) {
  if constexpr (SW == 1) {
    // lane l reads row[iw0 + l - lane], valid while that column is in [0, W).
    const float *base = row + iw0 - lane;
    const uint64_t m = bitRange(lane > lane - iw0 ? lane : lane - iw0,
                                lane + len < lane - iw0 + s.W ? lane + len : lane - iw0 + s.W);
    v0 = _mm512_mask_loadu_ps(v0, __mmask16(m), base);
    v1 = _mm512_mask_loadu_ps(v1, __mmask16(m >> 16), base + 16);
  } else if constexpr (SW == 2) {
    // lane l reads element t = 2l of base[0..64).
    const float *base = row + iw0 - 2 * lane;
    const int64_t lo = 2 * lane, hi = 2 * (lane + len) - 1, inLo = 2 * lane - iw0;
    const uint64_t m = bitRange(lo > inLo ? lo : inLo, hi < inLo + s.W ? hi : inLo + s.W);
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    if (lane < 16) {
      __m512 a = _mm512_maskz_loadu_ps(__mmask16(m), base);
      __m512 b = _mm512_maskz_loadu_ps(__mmask16(m >> 16), base + 16);
      v0 = orPs(v0, _mm512_permutex2var_ps(a, even, b));
    }
    if (lane + len > 16) {
      __m512 a = _mm512_maskz_loadu_ps(__mmask16(m >> 32), base + 32);
      __m512 b = _mm512_maskz_loadu_ps(__mmask16(m >> 48), base + 48);
      v1 = orPs(v1, _mm512_permutex2var_ps(a, even, b));
    }
  } else {
    const int32_t sw = int32_t(s.strideW);
    const __m512i iota =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(sw));
    const __m512i w = _mm512_set1_epi32(int32_t(s.W)), zero = _mm512_setzero_si512();
    const uint64_t lanes = bitRange(lane, lane + len);
    __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(int32_t(iw0 - int64_t(lane) * sw)), iota);
    for (int h = 0; h < 2; ++h) {
      __mmask16 m = __mmask16(lanes >> (16 * h));
      m &= _mm512_cmpge_epi32_mask(idx, zero) & _mm512_cmplt_epi32_mask(idx, w);
      __m512 &v = h == 0 ? v0 : v1;
      v = _mm512_mask_i32gather_ps(v, m, idx, row, 4);
      idx = _mm512_add_epi32(idx, _mm512_set1_epi32(16 * sw));
    }
  }
}

// Windows up to this size get per-panel tables (below); larger ones (e.g. a
// strided Conv1d STFT with 64 taps) compute masks per row.
constexpr int kTableTaps = 8;

template <int SW>
void pack(const Im2colSource &s, int64_t p0, int64_t kc, int64_t j0, int64_t cols, float *dst) {
  Segment seg[kNr];
  const int64_t plane = s.H * s.W;
  const bool tables = s.R <= kTableTaps && s.S <= kTableTaps && SW != 0;
  // Per panel, segment g and window row r / column t: the input row's
  // offset (or -1 in the padding) and the load mask and column offset. They
  // do not depend on the channel, so each im2col row costs table lookups
  // and masked loads only.
  int64_t rowOff[kNr][kTableTaps], colOff[kNr][kTableTaps];
  uint64_t mask[kNr][kTableTaps];
  for (int64_t q = 0; q * kNr < cols; ++q) {
    const int width = cols - q * kNr < kNr ? int(cols - q * kNr) : kNr;
    const int nseg = buildSegments(s, j0 + q * kNr, width, seg);
    if (tables) {
      for (int g = 0; g < nseg; ++g) {
        const int lane = seg[g].lane, len = seg[g].len;
        for (int64_t r = 0; r < s.R; ++r) {
          const int64_t ih = seg[g].ih + r * s.dilationH;
          rowOff[g][r] = ih >= 0 && ih < s.H ? ih * s.W : -1;
        }
        for (int64_t t = 0; t < s.S; ++t) {
          const int64_t iw0 = seg[g].iw + t * s.dilationW;
          colOff[g][t] = iw0 - int64_t(lane) * SW;
          const int64_t inLo = int64_t(lane) * SW - iw0; // element index of column 0
          if (SW == 1)
            mask[g][t] = bitRange(lane > inLo ? lane : inLo,
                                  lane + len < inLo + s.W ? lane + len : inLo + s.W);
          else
            mask[g][t] =
                bitRange(2 * lane > inLo ? 2 * lane : inLo,
                         2 * (lane + len) - 1 < inLo + s.W ? 2 * (lane + len) - 1 : inLo + s.W);
        }
      }
    }
    int64_t c = p0 / (s.R * s.S), r = p0 / s.S % s.R, t = p0 % s.S;
    const float *x = s.x + c * plane;
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (int64_t k = 0; k < kc; ++k, dst += kNr) {
      __m512 v0 = _mm512_setzero_ps(), v1 = _mm512_setzero_ps();
      if (tables) {
        for (int g = 0; g < nseg; ++g) {
          if (rowOff[g][r] < 0) continue; // a padding row: zeros
          const float *base = x + rowOff[g][r] + colOff[g][t];
          const uint64_t m = mask[g][t];
          if constexpr (SW == 1) {
            v0 = _mm512_mask_loadu_ps(v0, __mmask16(m), base);
            v1 = _mm512_mask_loadu_ps(v1, __mmask16(m >> 16), base + 16);
          } else {
            if (m & 0xFFFFFFFFu)
              v0 = orPs(
                  v0, _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(__mmask16(m), base), even,
                                             _mm512_maskz_loadu_ps(__mmask16(m >> 16), base + 16)));
            if (m >> 32)
              v1 = orPs(v1, _mm512_permutex2var_ps(
                                _mm512_maskz_loadu_ps(__mmask16(m >> 32), base + 32), even,
                                _mm512_maskz_loadu_ps(__mmask16(m >> 48), base + 48)));
          }
        }
      } else {
        const int64_t rowStep = r * s.dilationH, colStep = t * s.dilationW;
        for (int g = 0; g < nseg; ++g) {
          const int64_t ih = seg[g].ih + rowStep;
          if (uint64_t(ih) >= uint64_t(s.H)) continue; // a padding row: zeros
          loadSegment<SW>(s, x + ih * s.W, seg[g].iw + colStep, seg[g].lane, seg[g].len, v0, v1);
        }
      }
      _mm512_store_ps(dst, v0);
      _mm512_store_ps(dst + 16, v1);
      if (++t == s.S) {
        t = 0;
        if (++r == s.R) r = 0, x += plane;
      }
    }
  }
}

} // namespace

void im2colPackAvx512(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
                      float *dst) {
  const Im2colSource &s = *static_cast<const Im2colSource *>(ctx);
  switch (s.strideW) {
  case 1:
    return pack<1>(s, p0, kc, j0, cols, dst);
  case 2:
    return pack<2>(s, p0, kc, j0, cols, dst);
  default:
    return pack<0>(s, p0, kc, j0, cols, dst);
  }
}

} // namespace kiln::kernels::detail
