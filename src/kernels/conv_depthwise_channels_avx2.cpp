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

void depthwiseChannelsAvx2(const DepthwiseBlockArgs &a) {
  const int64_t rows = channelBlockRows(a), cols = channelBlockCols(a);
  const int64_t plane = a.H * a.W, outPlane = a.outH * a.outW, taps = a.R * a.S;
  thread_local std::vector<float> tBuf;
  tBuf.assign(size_t(rows * cols * 8), 0.0f);
  float *buf = tBuf.data();
  // Interleave: buf[(ih + padTop) * cols + iw + padLeft][c]; the padding
  // stays 0, input the outputs never read is left out.
  for (int64_t h = 0; h < a.H && h + a.padTop < rows; ++h) {
    if (h + a.padTop < 0) continue;
    for (int64_t w = 0; w < a.W && w + a.padLeft < cols; ++w) {
      if (w + a.padLeft < 0) continue;
      float *dst = buf + ((h + a.padTop) * cols + w + a.padLeft) * 8;
      for (int c = 0; c < 8; ++c) dst[c] = a.x[c * plane + h * a.W + w];
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
      const int n = a.outW - ow0 < 8 ? int(a.outW - ow0) : 8;
      alignas(32) float out[8][8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm256_store_ps(out[j], acc[j]);
      for (int c = 0; c < 8; ++c) {
        float *y = a.y + c * outPlane + oh * a.outW + ow0;
        for (int j = 0; j < n; ++j) y[j] = out[j][c];
      }
    }
  }
  if (a.opCount)
    for (int c = 0; c < 8; ++c)
      a.epilogue(a.ops, a.opCount, a.y + c * outPlane, 0, a.channel0 + c, 0, 1, outPlane);
}

} // namespace kiln::kernels::detail
