// The depthwise conv plane kernel with AVX2+FMA, 8 output columns per
// vector.
//
// Fast path (3x3, 5x5 and 7x7 windows, strides 1 and 2, column dilation 1:
// MobileNet/EfficientNet/PP-OCR depthwise layers and ConvNeXt's 7x7): one
// accumulator per output vector makes a chain of KS*KS dependent FMAs (4
// cycles each), so a single chain runs at 1/8 of the FMA units' rate; the
// fast path keeps 8 independent chains in flight: 2 output rows x 4 vectors
// (32 columns), or 4 rows x 2 vectors on narrow planes, each input row's tap
// vectors loaded once for all the rows that use it. Window rows above or
// below the input read a row of zeros, so border rows take the same loop.
// Column groups whose loads all lie inside the input use plain loads; the
// others maskload (padding reads as 0 and never faults). The epilogue runs
// on the accumulators before the store. Every output sums bias then taps in
// (r, s) order, as the generic loops do (padding taps add exact zeros).
//
// Other shapes take the generic loops below: per output vector and tap a
// load (maskload at the borders, shuffles for stride 2, gathers otherwise),
// the epilogue over batches of finished rows. Compiled with -mavx2 -mfma
// (see gemm_microkernel.h for why nothing else is included).
#include "kernels/conv_kernels.h"
#include "kernels/simd_avx2.h"

#include <immintrin.h>

#include <vector>

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

// ---- fast path: KS x KS window, stride SW in {1, 2}, column dilation 1 -----

constexpr int kGroup = 4; // vectors (of 8 columns) per column group

// The 8 output columns of one vector: first input column (before the tap
// offset), how many lanes are outputs, and per tap s the maskload masks of
// its 8 (stride 1) or 16 (stride 2: mask[2s], mask[2s + 1]) input columns
// from iw + s: the columns inside [0, W) that an output lane reads. Made
// once per plane, so a masked load costs one more L1 load, not a mask
// computation per row.
struct Vec {
  int64_t iw;
  int lanes;
  __m256i mask[14];
};

template <int SW, int KS> void makeVec(Vec &v, int64_t ow, const DepthwiseArgs &a) {
  v.iw = ow * SW - a.padLeft;
  v.lanes = int(a.outW - ow < 8 ? a.outW - ow : 8);
  const int64_t need = SW == 1 ? v.lanes : 2 * v.lanes - 1;
  for (int s = 0; s < KS; ++s) {
    const int64_t iw = v.iw + s, hi = need < a.W - iw ? need : a.W - iw;
    if constexpr (SW == 1) {
      v.mask[s] = laneRange(-iw, hi, 0);
    } else {
      v.mask[2 * s] = laneRange(-iw, hi, 0);
      v.mask[2 * s + 1] = laneRange(-iw, hi, 8);
    }
  }
}

// Tap s's input columns for output vector v of `row`: lane l reads column
// v.iw + s + l*SW. Masked: only columns inside [0, W) and lanes < v.lanes.
template <int SW, bool kMasked>
__attribute__((always_inline)) inline __m256 tapColumns(const float *row, const Vec &v, int s) {
  const float *p = row + v.iw + s;
  if constexpr (!kMasked) {
    if constexpr (SW == 1)
      return _mm256_loadu_ps(p);
    else
      return evens(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8));
  } else {
    if constexpr (SW == 1)
      return _mm256_maskload_ps(p, v.mask[s]);
    else
      return evens(_mm256_maskload_ps(p, v.mask[2 * s]),
                   _mm256_maskload_ps(p + 8, v.mask[2 * s + 1]));
  }
}

// Vector v of output row oh, stored as computed: the fast path runs the
// epilogue over its rows afterwards (planeFast).
__attribute__((always_inline)) inline void storeVec(const DepthwiseArgs &a, __m256 acc, int64_t oh,
                                                    int64_t ow0, int lanes) {
  Avx2::store(a.y + oh * a.outW + ow0, acc, lanes);
}

// A row of zeros as wide as the input: window rows above or below the
// input read it, so border output rows take the same blocked loop as the
// others (their extra FMAs add exact zeros). Per thread, grown on demand.
const float *zeroRow(int64_t W) {
  thread_local std::vector<float> zeros;
  if (int64_t(zeros.size()) < W) zeros.assign(size_t(W), 0.0f);
  return zeros.data();
}

// RB output rows from oh x NV vectors from vecs[0]: RB * NV independent
// chains. Output row oh + j reads window row r from input row ih0 + (j*SW
// + r) * dh, so rows share loads when RB > 1 (then the caller guarantees
// strideH == SW and dh == 1).
template <int SW, int KS, int RB, int NV, bool kMasked>
__attribute__((always_inline)) inline void
rowBlock(const DepthwiseArgs &a, int64_t oh, const Vec *vecs, int64_t ow0, const float *zeros) {
  constexpr int kSpan = (RB - 1) * SW + KS;
  const int64_t ih0 = oh * a.strideH - a.padTop, dh = a.dilationH;
  __m256 acc[RB][NV];
  const __m256 bias = _mm256_set1_ps(a.bias);
#pragma GCC unroll 4
  for (int j = 0; j < RB; ++j)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) acc[j][c] = bias;
#pragma GCC unroll 1
  for (int i = 0; i < kSpan; ++i) {
    const int64_t ih = ih0 + i * dh;
    const float *row = ih >= 0 && ih < a.H ? a.x + ih * a.W : zeros;
#pragma GCC unroll 7
    for (int s = 0; s < KS; ++s) {
      __m256 v[NV];
#pragma GCC unroll 4
      for (int c = 0; c < NV; ++c) v[c] = tapColumns<SW, kMasked>(row, vecs[c], s);
#pragma GCC unroll 4
      for (int j = 0; j < RB; ++j) {
        const int r = i - j * SW;
        if (r < 0 || r >= KS) continue;
        const __m256 w = _mm256_broadcast_ss(a.w + r * KS + s);
#pragma GCC unroll 4
        for (int c = 0; c < NV; ++c) acc[j][c] = _mm256_fmadd_ps(w, v[c], acc[j][c]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < RB; ++j)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) storeVec(a, acc[j][c], oh + j, ow0 + 8 * c, vecs[c].lanes);
}

// Output rows [a.oh0, a.oh1) x the NV vectors from vecs[0]: blocks of RB
// rows (8 chains with NV), the rest one row at a time.
template <int SW, int KS, int NV, bool kMasked>
void columnGroup(const DepthwiseArgs &a, const Vec *vecs, int64_t ow0, const float *zeros) {
  constexpr int kRb = NV >= 4 ? 2 : 4;
  const bool blocks = a.strideH == SW && a.dilationH == 1;
  int64_t oh = a.oh0;
  if (blocks)
    for (; oh + kRb <= a.oh1; oh += kRb)
      rowBlock<SW, KS, kRb, NV, kMasked>(a, oh, vecs, ow0, zeros);
  for (; oh < a.oh1; ++oh) rowBlock<SW, KS, 1, NV, kMasked>(a, oh, vecs, ow0, zeros);
}

// A group of NV vectors: unmasked when every load of every tap lies inside
// the input row.
template <int SW, int KS, int NV>
void group(const DepthwiseArgs &a, const Vec *vecs, int64_t ow0, const float *zeros) {
  bool inside = true;
  for (int c = 0; c < NV; ++c)
    inside =
        inside && vecs[c].lanes == 8 && vecs[c].iw >= 0 && vecs[c].iw + (KS - 1) + 8 * SW <= a.W;
  if (inside)
    columnGroup<SW, KS, NV, false>(a, vecs, ow0, zeros);
  else
    columnGroup<SW, KS, NV, true>(a, vecs, ow0, zeros);
}

// Column groups of 4 vectors, then 2 and 1 for the rest of the row. Each
// group runs over all rows of the block: its input columns stay in L1.
template <int SW, int KS> void planeFast(const DepthwiseArgs &a) {
  const float *zeros = zeroRow(a.W);
  const int64_t count = (a.outW + 7) / 8;
  Vec vecs[kGroup];
  for (int64_t v0 = 0; v0 < count;) {
    const int64_t n = count - v0 >= kGroup ? kGroup : count - v0 >= 2 ? 2 : 1;
    for (int64_t c = 0; c < n; ++c) makeVec<SW, KS>(vecs[c], (v0 + c) * 8, a);
    if (n == kGroup)
      group<SW, KS, kGroup>(a, vecs, v0 * 8, zeros);
    else if (n == 2)
      group<SW, KS, 2>(a, vecs, v0 * 8, zeros);
    else
      group<SW, KS, 1>(a, vecs, v0 * 8, zeros);
    v0 += n;
  }
  // The epilogue as one pass over the block's rows (contiguous in the plane,
  // so one row of the epilogue's matrix): per stored vector, its dispatch
  // and dependency chain cost more than the pass (the block is in L1/L2).
  if (a.opCount)
    a.epilogue(a.ops, a.opCount, a.y + a.oh0 * a.outW, 0, a.channel, a.oh0 * a.outW, 1,
               (a.oh1 - a.oh0) * a.outW);
}

template <int SW> bool fastPath(const DepthwiseArgs &a) {
  switch (a.S) {
  case 3:
    return planeFast<SW, 3>(a), true;
  case 5:
    return planeFast<SW, 5>(a), true;
  case 7:
    return planeFast<SW, 7>(a), true;
  default:
    return false;
  }
}

} // namespace

void depthwiseAvx2(const DepthwiseArgs &a) {
  if (a.R == a.S && a.dilationW == 1) {
    if (a.strideW == 1 && fastPath<1>(a)) return;
    if (a.strideW == 2 && fastPath<2>(a)) return;
  }
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
