// The attention tile (attention_tile.h), written once over a vector type V
// (simd_avx512.h, simd_avx2.h, or the portable file's scalar one) and
// instantiated by the ISA files. For one tile of Q rows it walks the K/V
// blocks:
//   1. scores: S = scale * Q_tile K^T_block + mask, register-blocked R rows
//      x two vectors of columns;
//   2. online softmax per row: m' = max(m, max_j S), alpha = exp(m - m'),
//      S = exp(S - m'), l = alpha * l + sum_j S, O_row *= alpha;
//   3. O_tile += S V_block, register-blocked R rows x NV vectors of Dv;
// and divides each output row by its l at the end. The tile's output rows
// are the accumulator, so the only scratch is one tile x block of S.
//
// Included only by ISA files: nothing but this family's headers and
// intrinsics (gemm_microkernel.h says why), so no std:: helpers here.
#pragma once

#include "kernels/attention_tile.h"
#include "kernels/epilogue_simd.h"

namespace kiln::kernels::detail::simd {

constexpr float kMinusInf = -__builtin_inff();

template <class V> inline int lanesLeft(int64_t n) {
  return n <= 0 ? 0 : n >= V::kLanes ? V::kLanes : static_cast<int>(n);
}

// Rows [0, rows) in groups of R, then the rest one at a time (only a
// tile's last rows; one remainder size keeps the code small):
// f.template operator()<N>(firstRow) for each group of N rows.
template <int R, class F> inline void forRowGroups(int64_t rows, F &&f) {
  int64_t r = 0;
  for (; r + R <= rows; r += R) f.template operator()<R>(r);
  if constexpr (R > 1)
    for (; r < rows; ++r) f.template operator()<1>(r);
}

// s[r * kAttentionBlockCols + j] = scale * sum_k q[r * d + k] * kt[k * ldk + j]
// + mask(r, j), for r < R and j < cols. `mask` points at (row 0, column 0)
// of this block or is null.
template <class V, int R>
inline void scoreRows(const AttentionProblem &p, const float *q, const float *kt, const float *mask,
                      int64_t cols, float *s) {
  using T = typename V::T;
  constexpr int L = V::kLanes;
  const int64_t d = p.d, ldk = p.sk;
  const T scale = V::set1(p.scale);
  for (int64_t j = 0; j < cols; j += 2 * L) {
    const int n0 = lanesLeft<V>(cols - j), n1 = lanesLeft<V>(cols - j - L);
    T acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = V::set1(0.0f);
    const float *b = kt + j;
    for (int64_t k = 0; k < d; ++k, b += ldk) {
      const T b0 = V::load(b, n0), b1 = V::load(b + L, n1);
      for (int r = 0; r < R; ++r) {
        const T a = V::set1(q[r * d + k]);
        acc0[r] = V::fmadd(a, b0, acc0[r]);
        acc1[r] = V::fmadd(a, b1, acc1[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      T x0 = V::mul(acc0[r], scale), x1 = V::mul(acc1[r], scale);
      if (mask) {
        const float *m = mask + r * p.maskRowStride;
        if (p.maskColStride) {
          x0 = V::add(x0, V::load(m + j, n0));
          x1 = V::add(x1, V::load(m + j + L, n1));
        } else {
          x0 = V::add(x0, V::set1(m[0]));
          x1 = V::add(x1, V::set1(m[0]));
        }
      }
      float *row = s + r * kAttentionBlockCols + j;
      V::store(row, x0, n0);
      if (n1 > 0) V::store(row + L, x1, n1);
    }
  }
}

template <class V> inline float horizontalMax(typename V::T x) {
  float lanes[V::kLanes];
  V::store(lanes, x, V::kLanes);
  float m = lanes[0];
  for (int i = 1; i < V::kLanes; ++i) m = lanes[i] > m ? lanes[i] : m;
  return m;
}

template <class V> inline float horizontalSum(typename V::T x) {
  float lanes[V::kLanes];
  V::store(lanes, x, V::kLanes);
  float sum = 0.0f;
  for (int i = 0; i < V::kLanes; ++i) sum += lanes[i];
  return sum;
}

template <class V> inline void scaleRow(float *o, int64_t n, float factor) {
  const typename V::T f = V::set1(factor);
  for (int64_t c = 0; c < n; c += V::kLanes) {
    const int lanes = lanesLeft<V>(n - c);
    V::store(o + c, V::mul(V::load(o + c, lanes), f), lanes);
  }
}

// exp(x) for x = score - row max <= 0, except that NaN stays NaN (exp<V>
// clamps it away): a NaN score, or +inf - +inf where the mask overflowed to
// +inf, makes the row NaN as in the unfused softmax.
template <class V> inline typename V::T expKeepingNaN(typename V::T x) {
  return V::select(V::lessThan(x, V::set1(1.0f)), exp<V>(x), x);
}

// Step 2 for one row of the block: turns its scores into exp(s - m') and
// updates the row's running max m, sum l and output o.
template <class V>
inline void softmaxRow(float *s, int64_t cols, float &m, float &l, float *o, int64_t dv) {
  using T = typename V::T;
  constexpr int L = V::kLanes;
  const int64_t full = cols - cols % L;
  T mx = V::set1(kMinusInf);
  for (int64_t j = 0; j < full; j += L) mx = V::max(mx, V::load(s + j, L));
  float blockMax = horizontalMax<V>(mx);
  for (int64_t j = full; j < cols; ++j) blockMax = s[j] > blockMax ? s[j] : blockMax;
  const float next = blockMax > m ? blockMax : m;
  if (next == kMinusInf) { // every score so far is -inf: they add nothing yet
    for (int64_t j = 0; j < cols; ++j) s[j] = 0.0f;
    return;
  }
  const T shift = V::set1(next);
  T sum = V::set1(0.0f);
  for (int64_t j = 0; j < full; j += L) {
    const T e = expKeepingNaN<V>(V::sub(V::load(s + j, L), shift));
    V::store(s + j, e, L);
    sum = V::add(sum, e);
  }
  float total = horizontalSum<V>(sum);
  if (full < cols) {
    const int lanes = static_cast<int>(cols - full);
    V::store(s + full, expKeepingNaN<V>(V::sub(V::load(s + full, lanes), shift)), lanes);
    for (int64_t j = full; j < cols; ++j) total += s[j];
  }
  // m == -inf (first finite block): alpha = 0, and o and l are still 0.
  const float alpha = __builtin_expf(m - next);
  if (alpha != 1.0f) scaleRow<V>(o, dv, alpha);
  l = l * alpha + total;
  m = next;
}

// Step 3 for R rows: o[r * dv + c] += sum_j s[r * kAttentionBlockCols + j]
// * v[j * dv + c], NV vectors of columns at a time.
template <class V, int R, int NV>
inline void accumulateRows(const float *s, const float *v, int64_t cols, int64_t dv, float *o) {
  using T = typename V::T;
  constexpr int L = V::kLanes;
  for (int64_t c = 0; c < dv; c += NV * L) {
    int n[NV];
    for (int k = 0; k < NV; ++k) n[k] = lanesLeft<V>(dv - c - k * L);
    T acc[R][NV];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < NV; ++k) acc[r][k] = V::load(o + r * dv + c + k * L, n[k]);
    const float *b = v + c;
    for (int64_t j = 0; j < cols; ++j, b += dv) {
      T bv[NV];
      for (int k = 0; k < NV; ++k) bv[k] = V::load(b + k * L, n[k]);
      for (int r = 0; r < R; ++r) {
        const T a = V::set1(s[r * kAttentionBlockCols + j]);
        for (int k = 0; k < NV; ++k) acc[r][k] = V::fmadd(a, bv[k], acc[r][k]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < NV; ++k)
        if (n[k] > 0) V::store(o + r * dv + c + k * L, acc[r][k], n[k]);
  }
}

// The tile function (AttentionTileFn) for V: RS rows per register block of
// step 1, RP rows and NV vectors of Dv per register block of step 3.
template <class V, int RS, int RP, int NV>
void attentionTile(const AttentionProblem &p, int64_t b, int64_t row0, int64_t rows) {
  alignas(64) float s[kAttentionTileRows * kAttentionBlockCols];
  float m[kAttentionTileRows], l[kAttentionTileRows];
  const int64_t d = p.d, dv = p.dv;
  const float *q = p.q + p.qOffset[b] + row0 * d;
  const float *kt = p.kt + p.ktOffset[b];
  const float *v = p.v + p.vOffset[b];
  const float *mask = p.mask ? p.mask + p.maskOffset[b] + row0 * p.maskRowStride : nullptr;
  float *o = p.out + (b * p.sq + row0) * dv;
  for (int64_t i = 0; i < rows * dv; ++i) o[i] = 0.0f;
  if (p.sk == 0) return; // an empty sum
  for (int64_t r = 0; r < rows; ++r) m[r] = kMinusInf, l[r] = 0.0f;
  for (int64_t j0 = 0; j0 < p.sk; j0 += kAttentionBlockCols) {
    const int64_t cols = p.sk - j0 < kAttentionBlockCols ? p.sk - j0 : kAttentionBlockCols;
    const float *maskBlock = mask ? mask + j0 * p.maskColStride : nullptr;
    forRowGroups<RS>(rows, [&]<int N>(int64_t r) {
      scoreRows<V, N>(p, q + r * d, kt + j0, maskBlock ? maskBlock + r * p.maskRowStride : nullptr,
                      cols, s + r * kAttentionBlockCols);
    });
    for (int64_t r = 0; r < rows; ++r)
      softmaxRow<V>(s + r * kAttentionBlockCols, cols, m[r], l[r], o + r * dv, dv);
    forRowGroups<RP>(rows, [&]<int N>(int64_t r) {
      accumulateRows<V, N, NV>(s + r * kAttentionBlockCols, v + j0 * dv, cols, dv, o + r * dv);
    });
  }
  // l == 0 only when every score of the row was -inf: 0 * (1/0) is NaN,
  // as the unfused softmax gives.
  for (int64_t r = 0; r < rows; ++r) scaleRow<V>(o + r * dv, dv, 1.0f / l[r]);
}

} // namespace kiln::kernels::detail::simd
