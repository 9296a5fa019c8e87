// Packing an 8-bit convolution's im2col panels (igemm_conv.h). Per group of
// 4 im2col rows (4 consecutive (c, r, s) taps), the panel's output pixels
// are gathered into 4 byte rows (one contiguous copy per output-row segment
// at stride 1), then interleaved into the [pixel][4] layout of igemm.h with
// SSE2 byte/word unpacks, and summed per column for the zero-point
// correction. Compiled for the baseline ISA (SSE2 on x86-64).
#include "kernels/igemm_conv.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kiln::kernels {

namespace {

constexpr int kMaxNr = 64;

// One run of consecutive output pixels within one output row.
struct Segment {
  int64_t oh, ow0;
  int j0, len; // panel columns [j0, j0 + len)
};

// Fills row[j0 .. j0 + len) for tap (c, r, s) over one segment with the
// shifted input bytes (padding: the shifted pad value).
void gatherTap(const Int8ConvSource &src, const Segment &seg, int64_t c, int64_t r, int64_t s,
               uint8_t flip, uint8_t *row) {
  const ConvShape &cs = src.shape;
  const uint8_t pad = src.padValue ^ flip;
  uint8_t *out = row + seg.j0;
  const int64_t ih = seg.oh * cs.strideH - cs.padTop + r * cs.dilationH;
  if (ih < 0 || ih >= cs.H) {
    std::memset(out, pad, size_t(seg.len));
    return;
  }
  const uint8_t *in = src.x + (c * cs.H + ih) * cs.W;
  const int64_t iw0 = seg.ow0 * cs.strideW - cs.padLeft + s * cs.dilationW;
  const int64_t sw = cs.strideW;
  // Pixels t with 0 <= iw0 + t * sw < W read the input.
  int64_t lo = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
  int64_t hi = iw0 >= cs.W ? 0 : (cs.W - iw0 + sw - 1) / sw;
  lo = std::min<int64_t>(lo, seg.len);
  hi = std::clamp<int64_t>(hi, lo, seg.len);
  std::memset(out, pad, size_t(lo));
  if (sw == 1) {
    const uint8_t *p = in + iw0;
    for (int64_t t = lo; t < hi; ++t) out[t] = p[t] ^ flip;
  } else {
    for (int64_t t = lo; t < hi; ++t) out[t] = in[iw0 + t * sw] ^ flip;
  }
  std::memset(out + hi, pad, size_t(seg.len - hi));
}

// dst[4 * j + t] = rows[t][j] for j < nr (nr a multiple of 8): four k of
// each column, as bytes.
void interleave4(const uint8_t (*rows)[kMaxNr], int nr, int8_t *dst) {
#if defined(__SSE2__)
  for (int j = 0; j < nr; j += 8) {
    const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(rows[0] + j));
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(rows[1] + j));
    const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(rows[2] + j));
    const __m128i d = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(rows[3] + j));
    const __m128i ab = _mm_unpacklo_epi8(a, b), cd = _mm_unpacklo_epi8(c, d);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 4 * j), _mm_unpacklo_epi16(ab, cd));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 4 * j + 16), _mm_unpackhi_epi16(ab, cd));
  }
#else
  for (int j = 0; j < nr; ++j)
    for (int t = 0; t < 4; ++t) dst[4 * j + t] = int8_t(rows[t][j]);
#endif
}

// dst[2 * j + t] = i16(i8(rows[t][j])) for j < nr, t < 2: two k of each
// column, sign-extended (AVX2's layout).
void interleave2Wide(const uint8_t *row0, const uint8_t *row1, int nr, int16_t *dst) {
#if defined(__SSE2__)
  for (int j = 0; j < nr; j += 8) {
    const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(row0 + j));
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(row1 + j));
    const __m128i ab = _mm_unpacklo_epi8(a, b);
    // Each byte twice in an i16, shifted down arithmetically: sign extension.
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 2 * j),
                     _mm_srai_epi16(_mm_unpacklo_epi8(ab, ab), 8));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 2 * j + 8),
                     _mm_srai_epi16(_mm_unpackhi_epi8(ab, ab), 8));
  }
#else
  for (int j = 0; j < nr; ++j) {
    dst[2 * j] = int8_t(row0[j]);
    dst[2 * j + 1] = int8_t(row1[j]);
  }
#endif
}

void packPanel(const void *ctx, int64_t j0, int cols, const IgemmPanelFormat &f, void *dstv,
               int32_t *colSums) {
  const Int8ConvSource &src = *static_cast<const Int8ConvSource *>(ctx);
  const ConvShape &cs = src.shape;
  const int nr = f.nr;
  const int64_t outW = cs.outW();
  const int64_t cg = cs.C / cs.groups, taps = cs.R * cs.S, depth = cg * taps;
  // B's type is i8: a u8 input is shifted by -128 (flip the top bit).
  const uint8_t flip = src.isSigned ? 0 : 0x80;

  Segment segs[kMaxNr];
  int nseg = 0;
  for (int j = 0; j < cols;) {
    const int64_t p = j0 + j, oh = p / outW, ow = p % outW;
    const int len = int(std::min<int64_t>(cols - j, outW - ow));
    segs[nseg++] = {oh, ow, j, len};
    j += len;
  }
  std::fill(colSums, colSums + nr, 0);
  alignas(16) uint8_t rows[4][kMaxNr];
  for (auto &row : rows) std::memset(row, 0, sizeof(row)); // columns >= cols stay 0
  // Blocks of 4 k: one group of the byte layout, two of the i16 layout
  // (the packed depth is a multiple of 4 for both).
  int8_t *bytes = static_cast<int8_t *>(dstv);
  int16_t *wide = static_cast<int16_t *>(dstv);
  for (int64_t k0 = 0; k0 < depth; k0 += 4) {
    for (int t = 0; t < 4; ++t) {
      const int64_t k = k0 + t;
      if (k >= depth) {
        std::memset(rows[t], 0, size_t(nr));
        continue;
      }
      const int64_t c = k / taps, r = (k % taps) / cs.S, s = k % cs.S;
      for (int g = 0; g < nseg; ++g) gatherTap(src, segs[g], c, r, s, flip, rows[t]);
    }
    if (f.elemBytes == 1) {
      interleave4(rows, nr, bytes);
      bytes += 4 * nr;
    } else {
      interleave2Wide(rows[0], rows[1], nr, wide);
      interleave2Wide(rows[2], rows[3], nr, wide + 2 * nr);
      wide += 4 * nr;
    }
    for (int j = 0; j < cols; ++j)
      colSums[j] += int32_t(int8_t(rows[0][j])) + int8_t(rows[1][j]) + int8_t(rows[2][j]) +
                    int8_t(rows[3][j]);
  }
}

} // namespace

IgemmBSource int8ConvPanels(const Int8ConvSource *ctx) {
  return {packPanel, ctx};
}

} // namespace kiln::kernels
