// The depthwise conv plane kernel with AVX-512: 16 output columns per
// vector, bias-initialized accumulators, one FMA per tap.
//
// Fast path (3x3 and 5x5 windows, strides 1 and 2, column dilation 1: every
// depthwise layer of MobileNetV3 / PP-OCR): the column geometry is the same
// for every output row, so each 16-column chunk's load masks (padding reads
// as 0 and never faults) are computed once per call, not per row and tap;
// rows whose window lies inside the input use taps held in registers and a
// fully unrolled window. Stride 2 loads each input row of a chunk once (3
// vectors: the 32 + S - 1 columns the chunk's windows span) and derives
// every tap's columns with permutes (even/odd lanes, shifted by one or two),
// instead of two loads and a permute per tap.
//
// 7x7 windows run the AVX2 kernel's fast path (see depthwiseAvx512). Other
// shapes (other sizes, strides, dilations) take the generic loops
// with per-tap masks (stride 1, 2) or gathers. No padded copy of the plane is
// made. The epilogue runs on the accumulators before the store (one pass
// over the output, not two: depthwise does so little math per output that a
// second pass would cost as much as the conv). Compiled with -mavx512f -mavx512vl -mfma (see
// gemm_microkernel.h for why nothing else is included).
#include "kernels/conv_kernels.h"
#include "kernels/simd_avx512.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

// Bits [lo, hi) of a 64-bit mask, clipped to [0, 64).
inline uint64_t bitRange(int64_t lo, int64_t hi) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > 64 ? 64 : hi;
  if (hi <= lo) return 0;
  const uint64_t upto = hi >= 64 ? ~uint64_t(0) : (uint64_t(1) << hi) - 1;
  return upto & ~((uint64_t(1) << lo) - 1);
}

// ---- generic path: any window, stride and dilation -------------------------

// Input columns iw0 + l*sw (l < lanes) of `row`, 0 outside [0, W).
__attribute__((always_inline)) inline __m512 loadColumns(const float *row, int64_t iw0, int lanes,
                                                         int64_t W, int64_t sw) {
  if (sw == 1)
    return _mm512_maskz_loadu_ps(__mmask16(bitRange(-iw0, lanes < W - iw0 ? lanes : W - iw0)),
                                 row + iw0);
  if (sw == 2) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const uint64_t m = bitRange(-iw0, 2 * lanes - 1 < W - iw0 ? 2 * lanes - 1 : W - iw0);
    return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(__mmask16(m), row + iw0), even,
                                  _mm512_maskz_loadu_ps(__mmask16(m >> 16), row + iw0 + 16));
  }
  const __m512i idx = _mm512_add_epi32(
      _mm512_set1_epi32(int32_t(iw0)),
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(int32_t(sw))));
  const __mmask16 m = __mmask16(bitRange(0, lanes)) &
                      _mm512_cmpge_epi32_mask(idx, _mm512_setzero_si512()) &
                      _mm512_cmplt_epi32_mask(idx, _mm512_set1_epi32(int32_t(W)));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, row, 4);
}

void planeGeneric(const DepthwiseArgs &a) {
  for (int64_t oh = a.oh0; oh < a.oh1; ++oh) {
    int64_t rBegin, rEnd;
    validTapRows(a, oh, rBegin, rEnd);
    const int64_t ih0 = oh * a.strideH - a.padTop;
    float *yrow = a.y + oh * a.outW;
    for (int64_t ow0 = 0; ow0 < a.outW; ow0 += 16) {
      const int lanes = a.outW - ow0 < 16 ? int(a.outW - ow0) : 16;
      const int64_t iwBase = ow0 * a.strideW - a.padLeft;
      __m512 acc = _mm512_set1_ps(a.bias);
      for (int64_t r = rBegin; r < rEnd; ++r) {
        const float *xrow = a.x + (ih0 + r * a.dilationH) * a.W;
        for (int64_t s = 0; s < a.S; ++s)
          acc = _mm512_fmadd_ps(_mm512_set1_ps(a.w[r * a.S + s]),
                                loadColumns(xrow, iwBase + s * a.dilationW, lanes, a.W, a.strideW),
                                acc);
      }
      _mm512_mask_storeu_ps(yrow + ow0, __mmask16(bitRange(0, lanes)), acc);
    }
  }
}

// ---- fast path: KS x KS window, stride SW in {1, 2}, column dilation 1 -----

constexpr int kMaxChunks = 64; // chunks per column batch (1024 output columns)

// Per chunk: first input column and masks. Stride 1: mask[s] for tap s's
// 16 columns. Stride 2: one 48-bit mask over the 3 vectors loaded from iw.
struct Chunk {
  int64_t iw;
  uint64_t mask[5];
  __mmask16 out;
  int lanes;
};

// The columns tap s of the window reads for a chunk, from one input row.
template <int SW, int KS> struct RowTaps {
  __m512 v[KS];
  __attribute__((always_inline)) inline RowTaps(const float *row, const Chunk &c) {
    const float *p = row + c.iw;
    if constexpr (SW == 1) {
#pragma GCC unroll 5
      for (int s = 0; s < KS; ++s) v[s] = _mm512_maskz_loadu_ps(__mmask16(c.mask[s]), p + s);
    } else {
      // Columns t = 0..47 from p; tap s at output lane l reads t = 2l + s.
      const uint64_t m = c.mask[0];
      const __m512 A = _mm512_maskz_loadu_ps(__mmask16(m), p);
      const __m512 B = _mm512_maskz_loadu_ps(__mmask16(m >> 16), p + 16);
      const __m512 C = _mm512_maskz_loadu_ps(__mmask16(m >> 32), p + 32);
      const __m512i even =
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      const __m512i odd =
          _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
      const __m512i next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
      v[0] = _mm512_permutex2var_ps(A, even, B); // t = 2l
      v[1] = _mm512_permutex2var_ps(A, odd, B);  // t = 2l + 1
      // t = 2l + 2: lanes 1..15 of v[0], then C[0] (t = 32).
      v[2] = _mm512_permutex2var_ps(v[0], next, C);
      if constexpr (KS == 5) {
        const __m512i next2 =
            _mm512_setr_epi32(2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18);
        const __m512i nextOdd =
            _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
        v[3] = _mm512_permutex2var_ps(v[1], nextOdd, C); // t = 2l + 3
        v[4] = _mm512_permutex2var_ps(v[0], next2, C);   // t = 2l + 4
      }
    }
  }
};

// RB output rows at once (stride SW in both directions, row dilation 1),
// all with their whole window inside the input: each input row's taps are
// loaded once and feed every output row of the block that uses it, so a
// 3x3 stride-1 window costs 6 loads per 4 x 16 outputs' row (not 12): the
// unaligned loads, not the FMAs, bound the one-row loop.
template <int SW, int KS, int RB>
__attribute__((always_inline)) inline void rowBlock(const DepthwiseArgs &a, int64_t oh, int64_t ow0,
                                                    const float *x0, float *y0, const Chunk *info,
                                                    int64_t count, const __m512 *w, __m512 bias) {
  const int64_t rowStep = a.W, ldy = a.outW;
  constexpr int kSpan = (RB - 1) * SW + KS;
  for (int64_t c = 0; c < count; ++c) {
    const Chunk &k = info[c];
    __m512 acc[RB];
#pragma GCC unroll 4
    for (int j = 0; j < RB; ++j) acc[j] = bias;
#pragma GCC unroll 11
    for (int i = 0; i < kSpan; ++i) {
      RowTaps<SW, KS> t(x0 + i * rowStep, k);
#pragma GCC unroll 4
      for (int j = 0; j < RB; ++j) {
        const int r = i - j * SW;
        if (r < 0 || r >= KS) continue;
#pragma GCC unroll 5
        for (int s = 0; s < KS; ++s) acc[j] = _mm512_fmadd_ps(w[r * KS + s], t.v[s], acc[j]);
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < RB; ++j) _mm512_mask_storeu_ps(y0 + j * ldy + c * 16, k.out, acc[j]);
  }
}

template <int SW, int KS, int RB> void planeFast(const DepthwiseArgs &a) {
  __m512 w[KS * KS];
#pragma GCC unroll 25
  for (int i = 0; i < KS * KS; ++i) w[i] = _mm512_set1_ps(a.w[i]);
  const __m512 bias = _mm512_set1_ps(a.bias);
  const int64_t chunks = (a.outW + 15) / 16;
  const bool blocks = a.strideH == SW && a.dilationH == 1;
  Chunk info[kMaxChunks];
  for (int64_t cb = 0; cb < chunks; cb += kMaxChunks) {
    const int64_t ce = chunks - cb < kMaxChunks ? chunks : cb + kMaxChunks;
    for (int64_t c = cb; c < ce; ++c) {
      Chunk &k = info[c - cb];
      const int64_t ow0 = c * 16, lanes = a.outW - ow0 < 16 ? a.outW - ow0 : 16;
      k.iw = ow0 * SW - a.padLeft;
      k.out = __mmask16(bitRange(0, lanes));
      k.lanes = int(lanes);
      // Column t from k.iw is needed up to the last lane's last tap, and
      // must lie in [0, W).
      const int64_t need = (lanes - 1) * SW + KS, lo = -k.iw, hi = a.W - k.iw;
      if constexpr (SW == 1) {
        for (int s = 0; s < KS; ++s)
          k.mask[s] = bitRange(lo - s, (need < hi ? need : hi) - s) & 0xFFFF;
      } else {
        k.mask[0] = bitRange(lo, need < hi ? need : hi);
      }
    }
    const int64_t rowStep = a.dilationH * a.W;
    for (int64_t oh = a.oh0; oh < a.oh1;) {
      const int64_t ih0 = oh * a.strideH - a.padTop;
      const float *x0 = a.x + ih0 * a.W;
      float *yrow = a.y + oh * a.outW;
      if (blocks && oh + RB <= a.oh1 && ih0 >= 0 && ih0 + (RB - 1) * SW + KS <= a.H) {
        // The next block's new input rows: start them on their way to L1
        // (stride 2 reads 4x the output; the planes stream from L2/L3).
        const int64_t next = ih0 + (RB - 1) * SW + KS;
        const int64_t last = next + RB * SW < a.H ? next + RB * SW : a.H;
        for (const float *p = a.x + next * a.W, *e = a.x + last * a.W; p < e; p += 16)
          _mm_prefetch(reinterpret_cast<const char *>(p), _MM_HINT_T0);
        rowBlock<SW, KS, RB>(a, oh, cb * 16, x0, yrow + cb * 16, info, ce - cb, w, bias);
        oh += RB;
      } else {
        int64_t rBegin, rEnd;
        validTapRows(a, oh, rBegin, rEnd);
        if (rBegin == 0 && rEnd == KS && blocks) {
          rowBlock<SW, KS, 1>(a, oh, cb * 16, x0, yrow + cb * 16, info, ce - cb, w, bias);
        } else {
          for (int64_t c = cb; c < ce; ++c) {
            const Chunk &k = info[c - cb];
            __m512 acc = bias;
            for (int64_t r = rBegin; r < rEnd; ++r) {
              RowTaps<SW, KS> t(x0 + r * rowStep, k);
#pragma GCC unroll 5
              for (int s = 0; s < KS; ++s)
                acc = _mm512_fmadd_ps(_mm512_set1_ps(a.w[r * KS + s]), t.v[s], acc);
            }
            _mm512_mask_storeu_ps(yrow + c * 16, k.out, acc);
          }
        }
        ++oh;
      }
    }
  }
}

// Stored without the epilogue: it runs afterwards (depthwiseAvx512).
void planeAvx512(const DepthwiseArgs &a) {
  if (a.R == a.S && a.dilationW == 1 && (a.strideW == 1 || a.strideW == 2)) {
    const bool s1 = a.strideW == 1;
    // Row blocks: 4 rows for 3x3 stride 1; fewer where the taps held in
    // registers (25 for 5x5) leave no room, or where stride 2 shares only
    // one input row between neighbours.
    if (a.S == 3) return s1 ? planeFast<1, 3, 4>(a) : planeFast<2, 3, 2>(a);
    if (a.S == 5) return s1 ? planeFast<1, 5, 2>(a) : planeFast<2, 5, 2>(a);
  }
  planeGeneric(a);
}

} // namespace

void depthwiseAvx512(const DepthwiseArgs &a) {
  // 7x7 (ConvNeXt): 49 taps do not fit in registers beside a row block's
  // accumulators, and the generic loops run one dependent FMA chain per
  // vector (9 GF/s against oneDNN's 80 on a Sapphire Rapids core). The
  // AVX2 fast path keeps 8 chains in flight; AVX-512 CPUs run it as is.
  if (a.R == 7 && a.S == 7 && a.dilationW == 1 && (a.strideW == 1 || a.strideW == 2))
    return depthwiseAvx2(a);
  planeAvx512(a);
  // The epilogue as one pass over the rows (contiguous in the plane): per
  // stored vector, its dispatch and dependency chain cost more than the pass.
  if (a.opCount)
    a.epilogue(a.ops, a.opCount, a.y + a.oh0 * a.outW, 0, a.channel, a.oh0 * a.outW, 1,
               (a.oh1 - a.oh0) * a.outW);
}

} // namespace kiln::kernels::detail
