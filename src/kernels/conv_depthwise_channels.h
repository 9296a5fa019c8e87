// The channel-interleaved depthwise kernel (conv_kernels.h,
// DepthwiseBlockArgs), written once over a vector type V of kLanes channels
// (8: conv_depthwise_channels_avx2.cpp, 16: ..._avx512.cpp), and the 8x8
// register transposes its interleave and scatter use. Included only by
// those ISA files, after <immintrin.h>; everything here has internal
// linkage, so each file keeps the copy compiled with its own flags (see
// gemm_microkernel.h for why that matters).
//
// Interleaving the planes costs a pass over them in and out, but every FMA
// then does kLanes useful MACs with no masks, and 8 output pixels keep 8
// chains in flight; on a 7x7 plane a row vector would be 7 of 8 or 16 lanes
// with one chain per row.
#pragma once

#include <immintrin.h>

#include "kernels/conv_kernels.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

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

// A grow-only, 64-byte aligned float buffer, one per thread. Not a
// std::vector: its member templates would be instantiated here with this
// file's ISA flags and could be the copy the linker keeps for the whole
// program (gemm_microkernel.h).
struct ThreadBuffer {
  float *data = nullptr;
  int64_t cap = 0;
  ~ThreadBuffer() { std::free(data); }
  float *get(int64_t n) {
    if (n > cap) {
      std::free(data);
      data = static_cast<float *>(std::aligned_alloc(64, size_t((n * 4 + 63) / 64 * 64)));
      cap = data ? n : 0;
    }
    return data;
  }
};

// Lanes [0, n) set.
inline __m256i firstLanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Pixels [w, w + 8) of input row h of 8 planes (channels c0 .. c0 + 7 of
// plane stride `plane`), lanes past `n` pixels zero, as 8 vectors of the 8
// channels of one pixel each.
inline void loadPixels8(const float *x, int64_t plane, int64_t rowOffset, int64_t n,
                        __m256 v[8]) {
  const __m256i m = firstLanes(n);
  for (int c = 0; c < 8; ++c) v[c] = _mm256_maskload_ps(x + c * plane + rowOffset, m);
  transpose8x8(v);
}

// The inverse: v[j] holds pixel j's 8 channels; stores the first n pixels
// of each channel at y + c * outPlane.
inline void storePixels8(__m256 v[8], float *y, int64_t outPlane, int64_t n) {
  transpose8x8(v);
  const __m256i m = firstLanes(n);
  for (int c = 0; c < 8; ++c) {
    if (n == 8)
      _mm256_storeu_ps(y + c * outPlane, v[c]);
    else
      _mm256_maskstore_ps(y + c * outPlane, m, v[c]);
  }
}

// V: the ISA's vector traits (simd_avx2.h, simd_avx512.h) plus
// interleave8 / scatter8, which move 8 pixels of kLanes planes between the
// planes and [pixel][channel] vectors (loadPixels8 / storePixels8 per 8
// channels).
template <class V> void depthwiseChannels(const DepthwiseBlockArgs &a) {
  using Reg = typename V::T;
  constexpr int kC = V::kLanes;
  const int64_t rows = channelBlockRows(a), cols = channelBlockCols(a);
  const int64_t plane = a.H * a.W, outPlane = a.outH * a.outW, taps = a.R * a.S;
  // 64-byte aligned (a 16-byte aligned buffer split the vector loads
  // across two cache lines), + 8 pixels of slack (below), written, never
  // read.
  thread_local ThreadBuffer tBuf;
  float *buf = tBuf.get(rows * cols * kC + 8 * kC);
  const int64_t inCols = a.W < cols - a.padLeft ? a.W : cols - a.padLeft; // pads are >= 0
  const int64_t inRows = a.H < rows - a.padTop ? a.H : rows - a.padTop;
  // Zero the padding around the input rows and columns the fill writes
  // (zeroing the whole buffer took 5% of a 7x7 plane's time).
  auto zero = [&](int64_t row, int64_t col0, int64_t col1) {
    col1 = col1 < cols ? col1 : cols;
    if (col1 > col0)
      std::memset(buf + (row * cols + col0) * kC, 0, size_t((col1 - col0) * kC) * sizeof(float));
  };
  for (int64_t r = 0; r < rows; ++r) {
    if (r < a.padTop || r >= a.padTop + inRows) {
      zero(r, 0, cols);
    } else {
      zero(r, 0, a.padLeft);
      zero(r, a.padLeft + inCols, cols);
    }
  }
  // buf[(ih + padTop) * cols + iw + padLeft][c]; the padding stays 0, input
  // the outputs never read is left out. 8 pixels at a time, transposed in
  // registers (scalar copies took most of a 7x7 or 14x14 plane's time).
  // Pixels past the row come out as zeros (masked lanes) and are stored
  // too: into padding, the next row (filled later) or the slack. (A loop to
  // the row's end compiled to a memcpy through the stack: 25% of the time.)
  for (int64_t h = 0; h < inRows; ++h) {
    float *dstRow = buf + ((h + a.padTop) * cols + a.padLeft) * kC;
    for (int64_t w = 0; w < inCols; w += 8)
      V::interleave8(a.x, plane, h * a.W + w, inCols - w < 8 ? inCols - w : 8, dstRow + w * kC);
  }
  // Taps as [tap][channel] vectors, bias as a vector.
  alignas(64) float wt[kChannelBlockTaps * kC];
  for (int64_t t = 0; t < taps; ++t)
    for (int c = 0; c < kC; ++c) wt[t * kC + c] = a.w[c * taps + t];
  alignas(64) float b[kC];
  for (int c = 0; c < kC; ++c) b[c] = a.bias ? a.bias[c] : 0.0f;
  const Reg bias = V::loadFull(b);
  const int64_t colStep = a.strideW * kC;
  for (int64_t oh = 0; oh < a.outH; ++oh) {
    for (int64_t ow0 = 0; ow0 < a.outW; ow0 += 8) {
      Reg acc[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) acc[j] = bias;
      for (int64_t r = 0; r < a.R; ++r) {
        const float *row =
            buf + ((oh * a.strideH + r * a.dilationH) * cols + ow0 * a.strideW) * kC;
        for (int64_t s = 0; s < a.S; ++s) {
          const Reg w = V::loadFull(wt + (r * a.S + s) * kC);
          const float *p = row + s * a.dilationW * kC;
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) acc[j] = V::fmadd(w, V::loadFull(p + j * colStep), acc[j]);
        }
      }
      // acc[j] holds pixel j's channels: back to each channel's plane.
      V::scatter8(acc, a.y + oh * a.outW + ow0, outPlane, a.outW - ow0 < 8 ? a.outW - ow0 : 8);
    }
  }
  // The planes are consecutive: one call for all of them (a call per plane
  // cost more than the taps on a 7x7 map), as one long row when the ops
  // allow (a 7x7 row is 3 vectors and a 1-lane tail).
  if (a.opCount == 0) return;
  if (a.epilogueFlat)
    a.epilogue(a.ops, a.opCount, a.y, 0, a.channel0, 0, 1, kC * outPlane);
  else
    a.epilogue(a.ops, a.opCount, a.y, outPlane, a.channel0, 0, kC, outPlane);
}

} // namespace
} // namespace kiln::kernels::detail
