// Eight depthwise planes at once with AVX2+FMA, one channel per lane (see
// conv_kernels.h, DepthwiseBlockArgs): the kernel for small planes, where
// the per-plane kernel's vectors along a row are mostly a partial tail
// (7x7 planes: 7 of 8 lanes, one chain per row). Interleaving 8 planes
// costs a pass over them in and out, but every FMA then does 8 useful
// MACs, with no masks, and 8 output pixels keep 8 chains in flight.
// Compiled with -mavx2 -mfma (see gemm_microkernel.h for why nothing else is
// included).
#include "kernels/conv_kernels.h"

#include <immintrin.h>

#include <vector>

namespace kiln::kernels::detail {
namespace {

// r[i] lane j -> r[j] lane i: 8 rows of 8 floats transposed in registers.
inline void transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Lanes [0, n) set.
inline __m256i firstLanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

} // namespace

void depthwiseChannelsAvx2(const DepthwiseBlockArgs &a) {
  const int64_t rows = channelBlockRows(a), cols = channelBlockCols(a);
  const int64_t plane = a.H * a.W, outPlane = a.outH * a.outW, taps = a.R * a.S;
  thread_local std::vector<float> tBuf;
  tBuf.assign(size_t(rows * cols * 8 + 64), 0.0f); // + 8 pixels of slack, below
  float *buf = tBuf.data();
  // Interleave: buf[(ih + padTop) * cols + iw + padLeft][c]; the padding
  // stays 0, input the outputs never read is left out. 8 pixels of the 8
  // channels at a time, transposed in registers (scalar copies took most
  // of a 7x7 or 14x14 plane's time).
  const int64_t inCols = a.W < cols - a.padLeft ? a.W : cols - a.padLeft; // pads are >= 0
  for (int64_t h = 0; h < a.H && h + a.padTop < rows; ++h) {
    float *dstRow = buf + ((h + a.padTop) * cols + a.padLeft) * 8;
    for (int64_t w = 0; w < inCols; w += 8) {
      const int64_t n = inCols - w < 8 ? inCols - w : 8;
      const __m256i m = firstLanes(n);
      __m256 v[8];
      for (int c = 0; c < 8; ++c) v[c] = _mm256_maskload_ps(a.x + c * plane + h * a.W + w, m);
      transpose8x8(v);
      // Pixels j >= n are zeros (masked lanes): storing them only writes
      // zeros into padding, into the next row (filled later) or the slack.
      // (A loop to n became a memcpy through the stack: 25% of the time.)
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dstRow + (w + j) * 8, v[j]);
    }
  }
  // Taps as [tap][channel] vectors, bias as a vector.
  alignas(32) float wt[kChannelBlockTaps * 8];
  for (int64_t t = 0; t < taps; ++t)
    for (int c = 0; c < 8; ++c) wt[t * 8 + c] = a.w[c * taps + t];
  alignas(32) float b[8];
  for (int c = 0; c < 8; ++c) b[c] = a.bias ? a.bias[c] : 0.0f;
  const __m256 bias = _mm256_load_ps(b);
  const int64_t colStep = a.strideW * 8;
  for (int64_t oh = 0; oh < a.outH; ++oh) {
    for (int64_t ow0 = 0; ow0 < a.outW; ow0 += 8) {
      __m256 acc[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) acc[j] = bias;
      for (int64_t r = 0; r < a.R; ++r) {
        const float *row = buf + ((oh * a.strideH + r * a.dilationH) * cols + ow0 * a.strideW) * 8;
        for (int64_t s = 0; s < a.S; ++s) {
          const __m256 w = _mm256_load_ps(wt + (r * a.S + s) * 8);
          const float *p = row + s * a.dilationW * 8;
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j)
            acc[j] = _mm256_fmadd_ps(w, _mm256_loadu_ps(p + j * colStep), acc[j]);
        }
      }
      // acc[j] holds pixel j's 8 channels; transposed, acc[c] is channel
      // c's 8 pixels, one (masked) store into its plane.
      transpose8x8(acc);
      const int64_t n = a.outW - ow0 < 8 ? a.outW - ow0 : 8;
      const __m256i m = firstLanes(n);
      for (int c = 0; c < 8; ++c) {
        float *y = a.y + c * outPlane + oh * a.outW + ow0;
        if (n == 8)
          _mm256_storeu_ps(y, acc[c]);
        else
          _mm256_maskstore_ps(y, m, acc[c]);
      }
    }
  }
  if (a.opCount)
    for (int c = 0; c < 8; ++c)
      a.epilogue(a.ops, a.opCount, a.y + c * outPlane, 0, a.channel0 + c, 0, 1, outPlane);
}

} // namespace kiln::kernels::detail
