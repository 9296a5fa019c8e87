// Packing an 8-bit convolution's im2col panels (igemm_conv.h). The source
// reads every tap in bounds (the image copied with its padding, or an input
// without padding in place). Per group of 4 im2col rows (4 consecutive
// (c, r, s) taps), the panel's output pixels are gathered into 4 byte rows
// (one strided vector copy per output-row segment), then shifted,
// interleaved into the layout of igemm.h and summed per column for the
// zero-point correction, 8 columns per SSE2 step.
// Compiled for the baseline ISA (SSE2 on x86-64).
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
// Bytes past a gather row's kMaxNr columns that a vector copy may write.
constexpr int kRowSlack = 16;

// One run of consecutive output pixels within one output row.
struct Segment {
  int64_t oh, ow0;
  int j0, len; // panel columns [j0, j0 + len)
};

#if defined(__SSE2__)
// The 8 bytes at p, top bit flipped when `flip` has it set, as i16 lanes
// sign-extended from i8 (the shifted B values).
inline __m128i widenFlipped(const uint8_t *p, __m128i flip) {
  const __m128i v = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)), flip);
  return _mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8);
}
#endif

// One group of 4 k (rows[t][j]: tap k0 + t of column j, raw input bytes)
// into the packed layout, the top bit flipped by `flip` (B's type is i8: a
// u8 input is shifted by -128), and each column's 4 shifted values added
// to colAcc[j] (i32). Columns in steps of 8 (nr is a multiple of 8).
void packGroup(const uint8_t (*rows)[kMaxNr + kRowSlack], int nr, uint8_t flip,
               const IgemmPanelFormat &f, void *dst, int32_t *colAcc) {
#if defined(__SSE2__)
  const __m128i flips = _mm_set1_epi8(char(flip));
  for (int j = 0; j < nr; j += 8) {
    const __m128i a = widenFlipped(rows[0] + j, flips), b = widenFlipped(rows[1] + j, flips);
    const __m128i c = widenFlipped(rows[2] + j, flips), d = widenFlipped(rows[3] + j, flips);
    if (f.elemBytes == 1) { // [column][4 k] as bytes
      const __m128i ab = _mm_packs_epi16(a, b), cd = _mm_packs_epi16(c, d); // i8 again
      const __m128i abLo = _mm_unpacklo_epi8(ab, _mm_srli_si128(ab, 8));
      const __m128i cdLo = _mm_unpacklo_epi8(cd, _mm_srli_si128(cd, 8));
      int8_t *out = static_cast<int8_t *>(dst) + 4 * j;
      _mm_storeu_si128(reinterpret_cast<__m128i *>(out), _mm_unpacklo_epi16(abLo, cdLo));
      _mm_storeu_si128(reinterpret_cast<__m128i *>(out + 16), _mm_unpackhi_epi16(abLo, cdLo));
    } else { // [column][2 k] as i16, twice: k0, k1 then k2, k3
      int16_t *out = static_cast<int16_t *>(dst) + 2 * j;
      _mm_storeu_si128(reinterpret_cast<__m128i *>(out), _mm_unpacklo_epi16(a, b));
      _mm_storeu_si128(reinterpret_cast<__m128i *>(out + 8), _mm_unpackhi_epi16(a, b));
      _mm_storeu_si128(reinterpret_cast<__m128i *>(out + 2 * nr), _mm_unpacklo_epi16(c, d));
      _mm_storeu_si128(reinterpret_cast<__m128i *>(out + 2 * nr + 8), _mm_unpackhi_epi16(c, d));
    }
    // |sum of 4| <= 512 fits i16; widened to i32 by sign.
    const __m128i sum = _mm_add_epi16(_mm_add_epi16(a, b), _mm_add_epi16(c, d));
    __m128i *acc = reinterpret_cast<__m128i *>(colAcc + j);
    _mm_storeu_si128(
        acc, _mm_add_epi32(_mm_loadu_si128(acc), _mm_srai_epi32(_mm_unpacklo_epi16(sum, sum), 16)));
    _mm_storeu_si128(acc + 1, _mm_add_epi32(_mm_loadu_si128(acc + 1),
                                            _mm_srai_epi32(_mm_unpackhi_epi16(sum, sum), 16)));
  }
#else
  for (int j = 0; j < nr; ++j) {
    int8_t v[4];
    for (int t = 0; t < 4; ++t) v[t] = int8_t(rows[t][j] ^ flip);
    if (f.elemBytes == 1) {
      for (int t = 0; t < 4; ++t) static_cast<int8_t *>(dst)[4 * j + t] = v[t];
    } else {
      int16_t *out = static_cast<int16_t *>(dst);
      out[2 * j] = v[0], out[2 * j + 1] = v[1];
      out[2 * nr + 2 * j] = v[2], out[2 * nr + 2 * j + 1] = v[3];
    }
    colAcc[j] += int32_t(v[0]) + v[1] + v[2] + v[3];
  }
#endif
}

// The panel's output pixels as runs within one output row. A conv that
// reads pixel p for output p (1x1, stride 1, no padding) is one long row.
int panelSegments(const ConvShape &cs, int64_t j0, int cols, bool flat, Segment *segs) {
  const int64_t outW = flat ? cs.outH() * cs.outW() : cs.outW();
  int nseg = 0;
  for (int j = 0; j < cols;) {
    const int64_t p = j0 + j, oh = p / outW, ow = p % outW;
    const int len = int(std::min<int64_t>(cols - j, outW - ow));
    segs[nseg++] = {oh, ow, j, len};
    j += len;
  }
  return nseg;
}

// Packs the 4-k groups of one panel; fill(row, c, r, s) gathers tap
// (c, r, s) of every column of the panel into `row` (raw input bytes).
template <class Fill>
void packTaps(const ConvShape &cs, int nr, int cols, uint8_t padValue, uint8_t flip,
              const IgemmPanelFormat &f, void *dstv, int32_t *colSums, Fill &&fill) {
  const int64_t depth = cs.C / cs.groups * cs.R * cs.S;
  // Columns >= cols keep the pad value: packed, multiplied, never stored.
  alignas(16) uint8_t rows[4][kMaxNr + kRowSlack];
  std::memset(rows, padValue, sizeof(rows));
  alignas(16) int32_t colAcc[kMaxNr] = {};
  // Groups of 4 k: one group of the byte layout, two of the i16 layout (the
  // packed depth is a multiple of 4 for both).
  uint8_t *dst = static_cast<uint8_t *>(dstv);
  const int64_t groupBytes = 4 * int64_t(nr) * f.elemBytes;
  int64_t c = 0, r = 0, sCol = 0; // tap k = (c * R + r) * S + sCol, advanced per k
  for (int64_t k0 = 0; k0 < depth; k0 += 4, dst += groupBytes) {
    for (int t = 0; t < 4 && k0 + t < depth; ++t) {
      fill(rows[t], c, r, sCol);
      if (++sCol == cs.S) {
        sCol = 0;
        if (++r == cs.R) r = 0, ++c;
      }
    }
    if (k0 + 4 > depth) // the last, partial group: k past the depth are zero
      for (int t = int(depth - k0); t < 4; ++t) std::memset(rows[t], flip, sizeof(rows[t]));
    packGroup(rows, nr, flip, f, dst, colAcc);
  }
  for (int j = 0; j < nr; ++j) colSums[j] = j < cols ? colAcc[j] : 0;
}

// len values from `in` at stride sw into out (which has kRowSlack bytes of
// room past len); vector loads while they end before `end`.
inline void copyStrided(const uint8_t *in, int64_t sw, int len, const uint8_t *end, uint8_t *out) {
  int t = 0;
#if defined(__SSE2__)
  if (sw == 1) {
    for (; t < len && in + t + 16 <= end; t += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i *>(out + t),
                       _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + t)));
  } else if (sw == 2) {
    const __m128i evens = _mm_set1_epi16(0x00FF);
    for (; t < len && in + 2 * t + 16 <= end; t += 8) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + 2 * t));
      _mm_storel_epi64(reinterpret_cast<__m128i *>(out + t),
                       _mm_packus_epi16(_mm_and_si128(v, evens), _mm_setzero_si128()));
    }
  }
#endif
  for (; t < len; ++t) out[t] = in[t * sw];
}

// Every tap is in bounds (src.padded: the padding is in the buffer, or the
// conv has none), so each tap of a segment is one strided copy, no checks.
void packPanel(const void *ctx, int64_t j0, int cols, const IgemmPanelFormat &f, void *dst,
               int32_t *colSums) {
  const Int8ConvSource &src = *static_cast<const Int8ConvSource *>(ctx);
  const ConvShape &cs = src.shape;
  const int64_t Hp = src.paddedH, Wp = src.paddedW;
  const bool flat = cs.R == 1 && cs.S == 1 && cs.strideH == 1 && cs.strideW == 1 && Hp == cs.H &&
                    Wp == cs.W; // pixel p reads input p: one row of H * W
  Segment segs[kMaxNr];
  const int nseg = panelSegments(cs, j0, cols, flat, segs);
  const uint8_t *base[kMaxNr];
  for (int g = 0; g < nseg; ++g)
    base[g] = flat ? src.padded + segs[g].ow0
                   : src.padded + segs[g].oh * cs.strideH * Wp + segs[g].ow0 * cs.strideW;
  const int64_t sw = cs.strideW;
  packTaps(cs, f.nr, cols, src.padValue, src.isSigned ? 0 : 0x80, f, dst, colSums,
           [&](uint8_t *row, int64_t c, int64_t r, int64_t s) {
             const int64_t off = (c * Hp + r * cs.dilationH) * Wp + s * cs.dilationW;
             for (int g = 0; g < nseg; ++g)
               copyStrided(base[g] + off, sw, segs[g].len, src.paddedEnd, row + segs[g].j0);
           });
}

} // namespace

IgemmBSource int8ConvPanels(const Int8ConvSource *ctx) {
  return {packPanel, ctx};
}

size_t int8ConvPaddedBytes(const ConvShape &s) {
  const int64_t Hp = s.H + s.padTop + s.padBottom, Wp = s.W + s.padLeft + s.padRight;
  return size_t(s.C * Hp * Wp) + kPaddedSlack;
}

void int8ConvPadImage(const ConvShape &s, const uint8_t *x, uint8_t padValue, uint8_t *dst) {
  const int64_t Hp = s.H + s.padTop + s.padBottom, Wp = s.W + s.padLeft + s.padRight;
  for (int64_t c = 0; c < s.C; ++c) {
    uint8_t *plane = dst + c * Hp * Wp;
    std::memset(plane, padValue, size_t(s.padTop * Wp));
    for (int64_t h = 0; h < s.H; ++h) {
      uint8_t *row = plane + (s.padTop + h) * Wp;
      std::memset(row, padValue, size_t(s.padLeft));
      std::memcpy(row + s.padLeft, x + (c * s.H + h) * s.W, size_t(s.W));
      std::memset(row + s.padLeft + s.W, padValue, size_t(s.padRight));
    }
    std::memset(plane + (s.padTop + s.H) * Wp, padValue, size_t(s.padBottom * Wp));
  }
  std::memset(dst + s.C * Hp * Wp, padValue, kPaddedSlack);
}

Int8ConvSource int8ConvSourceFor(const ConvShape &s, const uint8_t *image,
                                 const uint8_t *paddedImage, int64_t group, bool isSigned,
                                 uint8_t padValue) {
  const int64_t cg = s.C / s.groups;
  Int8ConvSource src;
  src.shape = s;
  src.isSigned = isSigned;
  src.padValue = padValue;
  const bool padding = s.padTop + s.padLeft + s.padBottom + s.padRight > 0;
  src.paddedH = s.H + s.padTop + s.padBottom, src.paddedW = s.W + s.padLeft + s.padRight;
  if (!padding) { // the input itself: reads stay inside this group's channels
    src.padded = image + group * cg * s.H * s.W;
    src.paddedEnd = src.padded + cg * s.H * s.W;
  } else {
    src.padded = paddedImage + group * cg * src.paddedH * src.paddedW;
    src.paddedEnd = paddedImage + s.C * src.paddedH * src.paddedW + kPaddedSlack;
  }
  return src;
}

} // namespace kiln::kernels
