// The contract between the convolution driver (conv.cpp) and its per-ISA
// pieces: the im2col micro-panel packer (conv_im2col_*.cpp) and the
// depthwise plane kernel (conv_depthwise_*.cpp, conv_portable.cpp). The ISA
// files include only this header, the epilogue contract and intrinsics (see
// gemm_microkernel.h for why).
#pragma once

#include "kernels/epilogue_impl.h"

#include <cstdint>

namespace kiln::kernels::detail {

// One image-group's input as the B operand of the conv GEMM: row k = (c*R +
// r)*S + s of the virtual im2col matrix, column p = output pixel oh*outW +
// ow, value x[c][oh*strideH - padTop + r*dilationH][ow*strideW - padLeft +
// s*dilationW], 0 in the padding. A 1x1 stride-1 unpadded conv is described
// as H = 1, W = outW = H*W: one long row per channel.
struct Im2colSource {
  const float *x; // channel 0 of the group in this image; channel c at x + c*H*W
  int64_t H, W, outW;
  int64_t R, S, strideH, strideW, dilationH, dilationW, padTop, padLeft;
};

// A PackBFn (gemm_driver.h) with ctx = const Im2colSource *: rows [p0, p0 +
// kc) x columns [j0, j0 + cols) into NR-column micro-panels (nr must be the
// ISA's GEMM nr), zero-padded past cols.
void im2colPackPortable(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
                        float *dst);
void im2colPackAvx2(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
                    float *dst);
void im2colPackAvx512(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
                      float *dst);

// Output rows [oh0, oh1) of one depthwise output plane: y[oh][ow] = bias +
// sum_{r,s} w[r*S + s] * x[oh*strideH - padTop + r*dilationH][ow*strideW -
// padLeft + s*dilationW] (0 in the padding), then the epilogue on the
// finished rows, as row `channel` (column oh*outW + ow) of the K x
// (outH*outW) output matrix.
struct DepthwiseArgs {
  const float *x; // input plane, H x W
  float *y;       // output plane, outH x outW
  const float *w; // R x S taps
  float bias;
  int64_t H, W, outH, outW;
  int64_t R, S, strideH, strideW, dilationH, dilationW, padTop, padLeft;
  int64_t oh0, oh1;
  const EpilogueOp *ops;
  int opCount;
  int64_t channel;
  EpilogueFn epilogue;
};

using DepthwiseFn = void (*)(const DepthwiseArgs &a);
void depthwisePortable(const DepthwiseArgs &a);
void depthwiseAvx2(const DepthwiseArgs &a);
void depthwiseAvx512(const DepthwiseArgs &a);

// Eight (AVX2) or sixteen (AVX-512) depthwise planes at once, vectorized
// over the channels: for small planes (7x7, 14x14), where a vector along a
// row is mostly padding or a partial tail. The input planes are interleaved
// into a zero-padded [rows][cols][channels] buffer, every output pixel
// accumulates its taps as one FMA over the channels (8 pixels in flight),
// and the results are scattered back to the planes; then the epilogue runs
// on each plane. Channel c reads plane
// x + c*H*W, taps w + c*R*S, bias bias[c] (bias may be null), writes y +
// c*outH*outW, and is row channel0 + c of the epilogue's output.
struct DepthwiseBlockArgs {
  const float *x;
  float *y;
  const float *w;
  const float *bias;
  int64_t H, W, outH, outW;
  int64_t R, S, strideH, strideW, dilationH, dilationW, padTop, padLeft;
  const EpilogueOp *ops;
  int opCount;
  int64_t channel0;
  EpilogueFn epilogue;
  // The ops are elementwise (epilogueIsElementwise): the block's planes may
  // take them as one row.
  bool epilogueFlat = false;
};
// The path is for windows of at most kChannelBlockTaps taps whose buffer
// (rows x cols x channels floats) is at most kChannelBlockFloats.
// Rows of the buffer from input row -padTop, columns from -padLeft: what
// output rows [0, outH) and columns [0, roundUp(outW, 8)) read.
inline int64_t channelBlockRows(const DepthwiseBlockArgs &a) {
  return (a.outH - 1) * a.strideH + (a.R - 1) * a.dilationH + 1;
}
inline int64_t channelBlockCols(const DepthwiseBlockArgs &a) {
  return ((a.outW + 7) / 8 * 8 - 1) * a.strideW + (a.S - 1) * a.dilationW + 1;
}
constexpr int64_t kChannelBlockFloats = int64_t(1) << 14; // 64 KiB
constexpr int64_t kChannelBlockTaps = 64;
void depthwiseChannelsAvx2(const DepthwiseBlockArgs &a);   // 8 channels
void depthwiseChannelsAvx512(const DepthwiseBlockArgs &a); // 16 channels

// Winograd F(4x4, 3x3) tile transforms (conv_winograd.cpp has the
// algorithm), vectorized over a chunk of n <= 16 consecutive tiles of one
// tile row: lane l is tile l, whose 6x6 input patch starts at input row iy0
// and column ix0 + 4*l, and whose 4x4 output block at output row oy0 and
// column ox0 + 4*l. Transform index xi = 6*r + s is entry (r, s) of the 6x6
// transformed tile.
//
// Input: v[xi*vXi + c*ldv + lane0 + l] = (B^T d B)[xi] of tile l's patch d
// of channel c (plane c at x + c*H*W; 0 outside the H x W input), for every
// channel c in [0, C). Lanes past n are not written.
struct WinogradInputArgs {
  const float *x;
  int64_t C, H, W;
  int64_t iy0, ix0;
  int n;
  float *v;
  int64_t vXi, ldv, lane0;
};
// Output: for channels k in [k0, k1), the 4x4 blocks A^T m A + bias[k] of
// the tiles, m[xi] = m[xi*mXi + k*ldm + lane0 + l], into plane k of y
// (outH x outW; rows and columns past the plane are not written).
struct WinogradOutputArgs {
  const float *m;
  int64_t mXi, ldm, lane0;
  int64_t k0, k1;
  const float *bias; // per channel, or null
  float *y;
  int64_t outH, outW;
  int64_t oy0, ox0;
  int n;
};
void winogradInputAvx512(const WinogradInputArgs &a);
void winogradOutputAvx512(const WinogradOutputArgs &a);

// Depthwise kernels run the epilogue on batches of finished rows holding >=
// kEpilogueBatch values, so a narrow plane does not pay one call per row.
constexpr int64_t kEpilogueBatch = 256;

// Valid tap rows for output row oh: r in [rBegin, rEnd) keeps the input row
// inside [0, H). Shared by every ISA's depthwise kernel; called once per
// output row, so the common dilation 1 avoids integer divisions.
inline void validTapRows(const DepthwiseArgs &a, int64_t oh, int64_t &rBegin, int64_t &rEnd) {
  const int64_t ih0 = oh * a.strideH - a.padTop;
  const int64_t last = a.H - 1 - ih0; // r * dilationH <= last
  if (a.dilationH == 1) {
    rBegin = ih0 >= 0 ? 0 : -ih0;
    rEnd = last < 0 ? 0 : last + 1;
  } else {
    rBegin = ih0 >= 0 ? 0 : (-ih0 + a.dilationH - 1) / a.dilationH;
    rEnd = last < 0 ? 0 : last / a.dilationH + 1;
  }
  if (rEnd > a.R) rEnd = a.R;
  if (rBegin > rEnd) rBegin = rEnd;
}

} // namespace kiln::kernels::detail
