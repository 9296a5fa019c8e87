// The im2col micro-panel packer with AVX2 (NR = 16 columns per panel, two
// ymm); the same segment scheme and per-panel tables as
// conv_im2col_avx512.cpp, with maskload (masked-off lanes read 0 and never
// fault) and shuffles for stride 2.
// Compiled with -mavx2 -mfma (see gemm_microkernel.h for why nothing else is
// included).
#include "kernels/conv_kernels.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

constexpr int kNr = 16;

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

// Lanes l of an 8-lane vector with lo <= l + first < hi, as a maskload mask.
inline __m256i laneRange(int64_t lo, int64_t hi, int first) {
  lo -= first, hi -= first;
  lo = lo < -1 ? -1 : lo > 8 ? 8 : lo;
  hi = hi < 0 ? 0 : hi > 9 ? 9 : hi;
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(int(hi)), iota),
                          _mm256_cmpgt_epi32(iota, _mm256_set1_epi32(int(lo) - 1)));
}

// Even elements of the 16 floats a:b, in order.
inline __m256 evens(__m256 a, __m256 b) {
  __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); // a0 a2 b0 b2 | a4 a6 b4 b6
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
}

template <int SW>
__attribute__((always_inline)) inline void loadSegment(const Im2colSource &s, const float *row,
                                                       int64_t iw0, int lane, int len, __m256 &v0,
                                                       __m256 &v1) {
  if constexpr (SW == 1) {
    const float *base = row + iw0 - lane;
    const int64_t lo = lane > lane - iw0 ? lane : lane - iw0;
    const int64_t hi = lane + len < lane - iw0 + s.W ? lane + len : lane - iw0 + s.W;
    if (lo >= hi) return;
    if (lo < 8) v0 = _mm256_or_ps(v0, _mm256_maskload_ps(base, laneRange(lo, hi, 0)));
    if (hi > 8) v1 = _mm256_or_ps(v1, _mm256_maskload_ps(base + 8, laneRange(lo, hi, 8)));
  } else if constexpr (SW == 2) {
    // lane l reads element t = 2l of base[0..32).
    const float *base = row + iw0 - 2 * lane;
    const int64_t inLo = 2 * lane - iw0;
    const int64_t lo = 2 * lane > inLo ? 2 * lane : inLo;
    const int64_t hi = 2 * (lane + len) - 1 < inLo + s.W ? 2 * (lane + len) - 1 : inLo + s.W;
    if (lo >= hi) return;
    if (lane < 8)
      v0 = _mm256_or_ps(v0, evens(_mm256_maskload_ps(base, laneRange(lo, hi, 0)),
                                  _mm256_maskload_ps(base + 8, laneRange(lo, hi, 8))));
    if (lane + len > 8)
      v1 = _mm256_or_ps(v1, evens(_mm256_maskload_ps(base + 16, laneRange(lo, hi, 16)),
                                  _mm256_maskload_ps(base + 24, laneRange(lo, hi, 24))));
  } else {
    const int32_t sw = int32_t(s.strideW);
    const __m256i iota =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(sw));
    const __m256i w = _mm256_set1_epi32(int32_t(s.W));
    __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(int32_t(iw0 - int64_t(lane) * sw)), iota);
    for (int h = 0; h < 2; ++h) {
      __m256i m = _mm256_and_si256(laneRange(lane, lane + len, 8 * h),
                                   _mm256_and_si256(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(-1)),
                                                    _mm256_cmpgt_epi32(w, idx)));
      __m256 &v = h == 0 ? v0 : v1;
      v = _mm256_mask_i32gather_ps(v, row, idx, _mm256_castsi256_ps(m), 4);
      idx = _mm256_add_epi32(idx, _mm256_set1_epi32(8 * sw));
    }
  }
}

// Windows up to this size get per-panel tables (below); larger ones (e.g. a
// strided Conv1d STFT with 64 taps) compute masks per row.
constexpr int kTableTaps = 8;

// Per panel, segment g and window row r / column t: the input row's offset
// (-1 in the padding), and the column offset and maskload masks of tap t
// (2 vectors for stride 1, 4 for stride 2). They do not depend on the
// channel, so each im2col row costs table lookups and masked loads only,
// not a mask computation per row and segment (as conv_im2col_avx512.cpp).
struct Tables {
  int64_t rowOff[kNr][kTableTaps], colOff[kNr][kTableTaps];
  __m256i mask[kNr][kTableTaps][4];
};

template <int SW> void fillTables(const Im2colSource &s, const Segment *seg, int nseg, Tables &tb) {
  for (int g = 0; g < nseg; ++g) {
    const int lane = seg[g].lane, len = seg[g].len;
    for (int64_t r = 0; r < s.R; ++r) {
      const int64_t ih = seg[g].ih + r * s.dilationH;
      tb.rowOff[g][r] = ih >= 0 && ih < s.H ? ih * s.W : -1;
    }
    for (int64_t t = 0; t < s.S; ++t) {
      const int64_t iw0 = seg[g].iw + t * s.dilationW;
      tb.colOff[g][t] = iw0 - int64_t(lane) * SW;
      // Element e of the run loaded from colOff is input column e - inLo,
      // valid for e in [inLo, inLo + W); the segment's lanes want elements
      // [SW * lane, ...) (stride 2: the even ones of them).
      const int64_t inLo = int64_t(lane) * SW - iw0;
      const int64_t lo = SW * lane > inLo ? SW * lane : inLo;
      const int64_t want = SW == 1 ? lane + len : 2 * (lane + len) - 1;
      const int64_t hi = want < inLo + s.W ? want : inLo + s.W;
      for (int v = 0; v < SW * 2; ++v)
        tb.mask[g][t][v] = lo < hi ? laneRange(lo, hi, 8 * v) : _mm256_setzero_si256();
    }
  }
}

template <int SW>
void pack(const Im2colSource &s, int64_t p0, int64_t kc, int64_t j0, int64_t cols, float *dst) {
  Segment seg[kNr];
  const int64_t plane = s.H * s.W;
  const bool tables = s.R <= kTableTaps && s.S <= kTableTaps && SW != 0;
  Tables tb;
  for (int64_t q = 0; q * kNr < cols; ++q) {
    const int width = cols - q * kNr < kNr ? int(cols - q * kNr) : kNr;
    const int nseg = buildSegments(s, j0 + q * kNr, width, seg);
    if (tables) fillTables<SW>(s, seg, nseg, tb);
    int64_t c = p0 / (s.R * s.S), r = p0 / s.S % s.R, t = p0 % s.S;
    const float *x = s.x + c * plane;
    for (int64_t k = 0; k < kc; ++k, dst += kNr) {
      __m256 v0 = _mm256_setzero_ps(), v1 = _mm256_setzero_ps();
      if (tables) {
        for (int g = 0; g < nseg; ++g) {
          if (tb.rowOff[g][r] < 0) continue; // a padding row: zeros
          const float *base = x + tb.rowOff[g][r] + tb.colOff[g][t];
          const __m256i *m = tb.mask[g][t];
          if constexpr (SW == 1) {
            v0 = _mm256_or_ps(v0, _mm256_maskload_ps(base, m[0]));
            v1 = _mm256_or_ps(v1, _mm256_maskload_ps(base + 8, m[1]));
          } else {
            v0 = _mm256_or_ps(
                v0, evens(_mm256_maskload_ps(base, m[0]), _mm256_maskload_ps(base + 8, m[1])));
            v1 = _mm256_or_ps(v1, evens(_mm256_maskload_ps(base + 16, m[2]),
                                        _mm256_maskload_ps(base + 24, m[3])));
          }
        }
      } else {
        const int64_t rowOff = r * s.dilationH, colOff = t * s.dilationW;
        for (int g = 0; g < nseg; ++g) {
          const int64_t ih = seg[g].ih + rowOff;
          if (uint64_t(ih) >= uint64_t(s.H)) continue; // a padding row: zeros
          loadSegment<SW>(s, x + ih * s.W, seg[g].iw + colOff, seg[g].lane, seg[g].len, v0, v1);
        }
      }
      _mm256_store_ps(dst, v0);
      _mm256_store_ps(dst + 8, v1);
      if (++t == s.S) {
        t = 0;
        if (++r == s.R) r = 0, x += plane;
      }
    }
  }
}

} // namespace

void im2colPackAvx2(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
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
