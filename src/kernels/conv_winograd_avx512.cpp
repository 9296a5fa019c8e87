// Winograd F(4x4, 3x3) tile transforms with AVX-512 (contract in
// conv_kernels.h): 16 tiles of one tile row per vector, so every transform
// is plain vector arithmetic and only the gathering of the tiles' overlapping
// patches (tile i reads input columns 4i .. 4i+5) and the interleaving of
// their 4-pixel output rows need permutes. Compiled with -mavx512f
// -mavx512vl -mfma (see gemm_microkernel.h for why nothing else is
// included).
#include "kernels/conv_kernels.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

using V = __m512;

// (std::min would instantiate a template with this file's ISA flags.)
inline int64_t minOf(int64_t a, int64_t b) {
  return a < b ? a : b;
}

__mmask16 laneMask(int64_t lo, int64_t hi) { // lanes [lo, hi) of 16
  if (lo < 0) lo = 0;
  if (hi > 16) hi = 16;
  if (hi <= lo) return 0;
  return __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// out = B^T d for one 6-vector (B^T's rows: [4 0 -5 0 1 0], [0 -4 -4 1 1 0],
// [0 4 -4 -1 1 0], [0 -2 -1 2 1 0], [0 2 -1 -2 1 0], [0 4 0 -5 0 1]).
__attribute__((always_inline)) inline void inputTransform(const V d[6], V out[6]) {
  const V four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f), two = _mm512_set1_ps(2.0f);
  out[0] = _mm512_fmadd_ps(four, d[0], _mm512_fnmadd_ps(five, d[2], d[4]));
  const V s12 = _mm512_add_ps(d[1], d[2]), s34 = _mm512_add_ps(d[3], d[4]);
  out[1] = _mm512_fnmadd_ps(four, s12, s34);
  const V d12 = _mm512_sub_ps(d[1], d[2]), d43 = _mm512_sub_ps(d[4], d[3]);
  out[2] = _mm512_fmadd_ps(four, d12, d43);
  const V d42 = _mm512_sub_ps(d[4], d[2]), d31 = _mm512_sub_ps(d[3], d[1]);
  out[3] = _mm512_fmadd_ps(two, d31, d42);
  out[4] = _mm512_fnmadd_ps(two, d31, d42);
  out[5] = _mm512_fmadd_ps(four, d[1], _mm512_fnmadd_ps(five, d[3], d[5]));
}

// out = A^T m for one 6-vector (A^T's rows: [1 1 1 1 1 0], [0 1 -1 2 -2 0],
// [0 1 1 4 4 0], [0 1 -1 8 -8 1]).
__attribute__((always_inline)) inline void outputTransform(const V m[6], V out[4]) {
  const V s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[1], m[2]);
  const V s34 = _mm512_add_ps(m[3], m[4]), d34 = _mm512_sub_ps(m[3], m[4]);
  out[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), s34);
  out[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), d34, d12);
  out[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), s34, s12);
  out[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0f), d34, d12), m[5]);
}

// Column j of six rows of vectors.
template <int N>
__attribute__((always_inline)) inline void column(const V (&rows)[6][N], int j, V out[6]) {
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) out[i] = rows[i][j];
}

// v[j] lane i = row[ix0 + 4i + j] for the n tiles (0 outside [0, W)): five
// masked loads of the 4n + 2 floats the tiles read, then columns 0-3 of
// each tile by two two-register permutes (tiles 0-7 from the first 32
// floats, 8-15 from the next 32) and a merge, columns 4 and 5 as columns 0
// and 1 of the next tile.
__attribute__((always_inline)) inline void gatherRow(const float *row, int64_t ix0, int64_t W,
                                                     int n, V v[6]) {
  const int64_t width = 4 * int64_t(n) + 2;
  V a[5];
#pragma GCC unroll 5
  for (int q = 0; q < 5; ++q) {
    const int64_t start = ix0 + 16 * q;
    // Lanes inside the row and inside the tiles' span; a masked-off lane
    // reads nothing, so a start before the row or past it is safe.
    const __mmask16 m = laneMask(-start, minOf(W - start, width - 16 * q));
    a[q] = m ? _mm512_maskz_loadu_ps(m, row + start) : _mm512_setzero_ps();
  }
  const __m512i idx0 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  const __m512i one = _mm512_set1_epi32(1);
  __m512i idx = idx0;
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const V lo = _mm512_permutex2var_ps(a[0], idx, a[1]);
    const V hi = _mm512_permutex2var_ps(a[2], idx, a[3]);
    v[j] = _mm512_shuffle_f32x4(lo, hi, 0x44); // lo's lanes 0-7, then hi's
    idx = _mm512_add_epi32(idx, one);
  }
  const __m512i a4 = _mm512_castps_si512(a[4]);
  v[4] = _mm512_castsi512_ps(_mm512_alignr_epi32(a4, _mm512_castps_si512(v[0]), 1));
  v[5] = _mm512_castsi512_ps(
      _mm512_alignr_epi32(_mm512_alignr_epi32(a4, a4, 1), _mm512_castps_si512(v[1]), 1));
}

// Floats [16q, 16q + 16) of one output row of the tiles, whose column j of
// tile i is o[j] lane i: out[4i + j] = o[j][i].
__attribute__((always_inline)) inline void interleaveRow(const V o[4], V out[4]) {
  const __m512i pairLo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i pairHi =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i quadLo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
  const __m512i quadHi =
      _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
  const V p01lo = _mm512_permutex2var_ps(o[0], pairLo, o[1]);
  const V p23lo = _mm512_permutex2var_ps(o[2], pairLo, o[3]);
  const V p01hi = _mm512_permutex2var_ps(o[0], pairHi, o[1]);
  const V p23hi = _mm512_permutex2var_ps(o[2], pairHi, o[3]);
  out[0] = _mm512_permutex2var_ps(p01lo, quadLo, p23lo);
  out[1] = _mm512_permutex2var_ps(p01lo, quadHi, p23lo);
  out[2] = _mm512_permutex2var_ps(p01hi, quadLo, p23hi);
  out[3] = _mm512_permutex2var_ps(p01hi, quadHi, p23hi);
}

} // namespace

void winogradInputAvx512(const WinogradInputArgs &a) {
  const __mmask16 lanes = laneMask(0, a.n);
  const int64_t plane = a.H * a.W;
  for (int64_t c = 0; c < a.C; ++c) {
    const float *xc = a.x + c * plane;
    // h[r] = row r of the patch times B (its columns transformed). The row
    // loop is not unrolled: h lives on the stack either way, and six copies
    // of the gather cost 5 KiB of the runtime library and some speed.
    V h[6][6];
#pragma GCC unroll 1
    for (int r = 0; r < 6; ++r) {
      const int64_t iy = a.iy0 + r;
      if (iy < 0 || iy >= a.H) {
#pragma GCC unroll 6
        for (int j = 0; j < 6; ++j) h[r][j] = _mm512_setzero_ps();
        continue;
      }
      V d[6];
      gatherRow(xc + iy * a.W, a.ix0, a.W, a.n, d);
      inputTransform(d, h[r]);
    }
    float *vc = a.v + c * a.ldv + a.lane0;
#pragma GCC unroll 6
    for (int j = 0; j < 6; ++j) {
      V col[6], t[6];
      column(h, j, col);
      inputTransform(col, t);
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) _mm512_mask_storeu_ps(vc + (i * 6 + j) * a.vXi, lanes, t[i]);
    }
  }
}

void winogradOutputAvx512(const WinogradOutputArgs &a) {
  const __mmask16 lanes = laneMask(0, a.n);
  const int64_t P = a.outH * a.outW, cols = minOf(4 * a.n, a.outW - a.ox0);
  const int rows = int(minOf(4, a.outH - a.oy0));
  __mmask16 colMask[4];
  for (int q = 0; q < 4; ++q) colMask[q] = laneMask(0, cols - 16 * q);
  for (int64_t k = a.k0; k < a.k1; ++k) {
    const float *mk = a.m + k * a.ldm + a.lane0;
    V g[6][4]; // g[i] = row i of m times A
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      V row[6];
#pragma GCC unroll 6
      for (int j = 0; j < 6; ++j) row[j] = _mm512_maskz_loadu_ps(lanes, mk + (i * 6 + j) * a.mXi);
      outputTransform(row, g[i]);
    }
    const V bias = _mm512_set1_ps(a.bias ? a.bias[k] : 0.0f);
    V o[4][4]; // o[r][j]: output row r, column j of every tile
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      V col[6], t[4];
      column(g, j, col);
      outputTransform(col, t);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) o[r][j] = _mm512_add_ps(t[r], bias);
    }
    float *yk = a.y + k * P + a.oy0 * a.outW + a.ox0;
    for (int r = 0; r < rows; ++r) {
      V out[4];
      interleaveRow(o[r], out);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q)
        if (colMask[q]) _mm512_mask_storeu_ps(yk + r * a.outW + 16 * q, colMask[q], out[q]);
    }
  }
}

} // namespace kiln::kernels::detail
