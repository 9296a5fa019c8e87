// Packing an 8-bit convolution's im2col panels (igemm_conv.h). Per group of
// 4 im2col rows (4 consecutive (c, r, s) taps), the panel's output pixels
// are gathered into 4 byte rows (one contiguous copy per output-row segment
// at stride 1), then interleaved into the [pixel][4] layout of igemm.h with
// SSE2 byte/word unpacks, and summed per column for the zero-point
// correction. Compiled for the baseline ISA (SSE2 on x86-64).
#include "kernels/igemm_conv.h"

#include <algorithm>
#include <cstring>
#include <vector>

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

// The column geometry of one segment for one kernel column s: pixels t in
// [lo, hi) read input column iw0 + t * strideW, the others are padding.
// The same for every channel and kernel row, so it is worked out once per
// panel (the divisions took a third of a small-K conv's packing).
struct SegmentColumns {
  int64_t iw0;
  int lo, hi;
};

SegmentColumns segmentColumns(const ConvShape &cs, const Segment &seg, int64_t s) {
  const int64_t iw0 = seg.ow0 * cs.strideW - cs.padLeft + s * cs.dilationW;
  const int64_t sw = cs.strideW;
  int64_t lo = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
  int64_t hi = iw0 >= cs.W ? 0 : (cs.W - iw0 + sw - 1) / sw;
  lo = std::min<int64_t>(lo, seg.len);
  hi = std::clamp<int64_t>(hi, lo, seg.len);
  return {iw0, int(lo), int(hi)};
}

// Fills row[j0 .. j0 + len) for tap (c, r, s) over one segment with the
// shifted input bytes (padding: the shifted pad value); `in` is input row
// ih of channel c, null when ih lies in the padding.
void gatherTap(const ConvShape &cs, const Segment &seg, const SegmentColumns &g, const uint8_t *in,
               uint8_t flip, uint8_t pad, uint8_t *row) {
  const int64_t sw = cs.strideW;
  uint8_t *out = row + seg.j0;
  if (!in) {
    std::memset(out, pad, size_t(seg.len));
    return;
  }
  std::memset(out, pad, size_t(g.lo));
  if (sw == 1) {
    const uint8_t *p = in + g.iw0;
    for (int t = g.lo; t < g.hi; ++t) out[t] = p[t] ^ flip;
  } else {
    int t = g.lo;
#if defined(__SSE2__)
    if (sw == 2) { // 8 outputs from 16 input bytes: their even bytes
      const __m128i evens = _mm_set1_epi16(0x00FF), flips = _mm_set1_epi8(char(flip));
      for (; t + 8 <= g.hi && g.iw0 + 2 * t + 16 <= cs.W; t += 8) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + g.iw0 + 2 * t));
        const __m128i even = _mm_packus_epi16(_mm_and_si128(v, evens), _mm_setzero_si128());
        _mm_storel_epi64(reinterpret_cast<__m128i *>(out + t), _mm_xor_si128(even, flips));
      }
    }
#endif
    for (; t < g.hi; ++t) out[t] = in[g.iw0 + t * sw] ^ flip;
  }
  std::memset(out + g.hi, pad, size_t(seg.len - g.hi));
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
  thread_local std::vector<SegmentColumns> columns; // [segment][s]
  columns.resize(size_t(nseg * cs.S));
  for (int g = 0; g < nseg; ++g)
    for (int64_t sIdx = 0; sIdx < cs.S; ++sIdx)
      columns[size_t(g * cs.S + sIdx)] = segmentColumns(cs, segs[g], sIdx);
  const uint8_t pad = src.padValue ^ flip;
  std::fill(colSums, colSums + nr, 0);
  alignas(16) uint8_t rows[4][kMaxNr];
  for (auto &row : rows) std::memset(row, 0, sizeof(row)); // columns >= cols stay 0
  // Blocks of 4 k: one group of the byte layout, two of the i16 layout
  // (the packed depth is a multiple of 4 for both).
  int8_t *bytes = static_cast<int8_t *>(dstv);
  int16_t *wide = static_cast<int16_t *>(dstv);
  int64_t c = 0, r = 0, sCol = 0; // tap k = (c * R + r) * S + sCol, advanced per k
  for (int64_t k0 = 0; k0 < depth; k0 += 4) {
    for (int t = 0; t < 4; ++t) {
      if (k0 + t >= depth) {
        std::memset(rows[t], 0, size_t(nr));
        continue;
      }
      const uint8_t *plane = src.x + c * cs.H * cs.W;
      for (int g = 0; g < nseg; ++g) {
        const int64_t ih = segs[g].oh * cs.strideH - cs.padTop + r * cs.dilationH;
        const uint8_t *in = ih >= 0 && ih < cs.H ? plane + ih * cs.W : nullptr;
        gatherTap(cs, segs[g], columns[size_t(g * cs.S + sCol)], in, flip, pad, rows[t]);
      }
      if (++sCol == cs.S) {
        sCol = 0;
        if (++r == cs.R) r = 0, ++c;
      }
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
