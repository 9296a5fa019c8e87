// 2-D (and 1-D, as H = 1) f32 convolution on NCHW tensors with weights
// packed once (at compile/load time) and a fused epilogue: the kernel behind
// ONNX Conv for the executor and generated code.
//
// Algorithms, chosen by pack() from the weight shape:
//  - kGemm (every conv but depthwise): per image and group, Y_g[Kg x P] =
//    W_g[Kg x Cg*R*S] * im2col(X_g)[Cg*R*S x P], P = outH*outW, with W_g
//    pre-packed in the GEMM's A format. The im2col matrix never exists: the
//    GEMM driver asks for one B micro-panel (K-slice x NR output pixels) at a
//    time and the ISA's packer gathers it from X just before the microkernel
//    reads it from L1 (masked vector loads for stride 1 and 2, a gather
//    otherwise). Stride-1 tiles whose 32 pixels lie in one output row with
//    every tap inside the input are not packed at all when the conv has few
//    output channels: the AVX-512 microkernel reads their B rows in place
//    (row (c, r, s) = 32 contiguous input floats at a per-run offset).
//    kGemm1x1 (1x1, stride 1, no pads) is the same GEMM with X read as the
//    matrix [C x H*W]. Why not im2col + sgemm: the full im2col of a 3x3 conv
//    is 9x the input and falls out of cache (a 64-channel 3x3 conv at
//    160x160: 59 MB); packed just in time it costs ~1 masked load per 16
//    values and no extra memory. Why GEMM rows = output channels: the
//    output is written in place, in its final NCHW layout, and per-channel
//    data (bias, scales) is per row. The conv bias starts the accumulators.
//    Taps that read only padding (a dilated conv on a small map) are
//    dropped per band of output rows (conv_taps.h).
//    Small output maps turn the GEMM around (ConvOrientation::kPixelRows):
//    Y_g^T[P x Kg] = im2col(X_g)^T * W_g^T, output pixels as the rows and
//    output channels as the NR-wide columns, with W_g^T pre-packed as B.
//    The microkernel's columns are a vector's multiple, and a 7x7 map's 49
//    pixels fill 49 of 64 (AVX-512: 2 panels of 32) while 512 channels fill
//    all of theirs; 14x14 fills 196 of 224. The pixel rows are packed once
//    per image and group (the ISA's im2col packer, h pixels at a time) and
//    every thread shares them; each thread runs a block of channel columns
//    and transposes its finished block into Y's NCHW rows, adding the bias
//    and running the epilogue there (conv_pixel_rows.cpp).
//    3x3 stride-1 convs with one group on larger maps run as Winograd
//    F(4x4, 3x3) (ConvOrientation::kWinograd, conv_winograd.cpp): 4x4
//    output tiles, input and output transformed per tile, 36 GEMMs over
//    the transformed tiles with the transformed weights pre-packed as A:
//    36 multiply-adds per tile and channel pair instead of 144, at ~10x the
//    direct conv's rounding error (still ~1e-6 relative).
//  - kDepthwise (groups == C > 1, one input channel per group, any K = m*C;
//    a single-channel conv with one filter too):
//    a direct vector kernel per output plane, vectorized over output width
//    with masked loads at the borders (no padded copy), 3x3/5x5 stride 1/2
//    specialized (taps in registers, 2-4 output rows per pass sharing input
//    loads); a GEMM would have M = 1 and waste 13 of 14 rows.
// The epilogue runs on each finished tile while it is in L1 (depthwise: on
// the accumulators before the store).
//
// Threads: the work is cut into tasks (image x group x output-pixel tiles,
// or x output-channel blocks when that is too few; image x channel x row
// blocks for depthwise), >= 4 per thread where the shape allows; each
// thread runs a contiguous share first (its data stays in its L2 from one
// call to the next) and then helps with the others'.
//
// Measured on AVX2 (bench/conv, Zen 4 with AVX-512 hidden, 1 thread, vs
// oneDNN in its blocked layout): 3x3 and 1x1 convs with 64-512 channels
// 75-100%, 16-32 channel and stride-2 layers 30-90%, depthwise 25-55%
// (oneDNN vectorizes over 8 channels of its blocked layout; NCHW planes of
// 7x7 leave kiln one partial vector per row).
// Measured (bench/conv, AVX-512 Xeon, 1 thread; 2 threads scale ~2x): 3x3
// convs with 64-256 channels 160-185 GFLOP/s, 75-92% of oneDNN in its
// blocked nChw16c layout and 115-175% of oneDNN on NCHW; 1x1 convs 90-135%
// of blocked oneDNN; depthwise 60-95%; 16-32 channel 3x3 layers ~72% and the
// 3-channel stem ~53%, where packing B costs as much as the few output rows
// that reuse it.
#pragma once

#include "kernels/epilogue.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::runtime {
class ThreadPool;
}

namespace kiln::kernels {

namespace detail {
class TapWindowPacks;
}

struct ConvShape {
  int64_t N = 1, C = 1, H = 1, W = 1; // input NCHW (Conv1d: H = 1, R = 1)
  int64_t K = 1, R = 1, S = 1;        // output channels, kernel height, width
  int64_t strideH = 1, strideW = 1, dilationH = 1, dilationW = 1;
  int64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  int64_t groups = 1;

  int64_t outH() const { return (H + padTop + padBottom - dilationH * (R - 1) - 1) / strideH + 1; }
  int64_t outW() const { return (W + padLeft + padRight - dilationW * (S - 1) - 1) / strideW + 1; }
  // Positive sizes, strides and dilations, non-negative pads, groups dividing
  // C and K, a non-empty output. pack() and run() require it.
  bool valid() const;
};

enum class ConvAlgo { kGemm, kGemm1x1, kDepthwise };
const char *convAlgoName(ConvAlgo algo);

// Which way a kGemm/kGemm1x1 conv maps onto the GEMM: output channels as its
// rows (kChannelRows) or output pixels (kPixelRows, small maps), or, for a
// 3x3 stride-1 conv, Winograd F(4x4, 3x3): 36 GEMMs over transformed 4x4
// output tiles, 4x fewer multiply-adds (kWinograd, conv_winograd.cpp; AVX-512
// only). kAuto chooses per run from the output size
// (PackedConv::orientationFor).
enum class ConvOrientation { kAuto, kChannelRows, kPixelRows, kWinograd };

// A convolution's weights packed for one ISA. Immutable after pack(): one
// PackedConv may run on any number of threads at once. Move-only.
class PackedConv {
public:
  PackedConv() = default;
  PackedConv(PackedConv &&) = default;
  PackedConv &operator=(PackedConv &&) = default;
  PackedConv(const PackedConv &) = delete;
  PackedConv &operator=(const PackedConv &) = delete;

  // weights: [K][C/groups][R][S] (ONNX layout); bias: K values or null; both
  // copied. Only the weight-related fields of `s` (C, K, R, S, strides,
  // dilations, pads, groups) are fixed here; N, H, W may change on every run.
  // The weights are packed for the orientation `s` chooses, and packed for
  // the other one (from the first) on the first run that chooses it, so a
  // conv whose size is known when it is packed holds one copy of them.
  static PackedConv pack(const ConvShape &s, const float *weights, const float *bias,
                         GemmIsa isa = GemmIsa::kAuto);

  // Bytes of scratch run() needs for this input size when at most `threads`
  // threads run it (the pool's threads() count), for the orientation the
  // run takes: channel rows, one packed B block of <= ~256 KiB per thread;
  // pixel rows, the image's packed pixel rows and Y^T; Winograd, the
  // transformed tiles of one panel per thread (36 x (C + K) x NR floats);
  // 0 for depthwise. The executor plans it with the activations.
  size_t workspaceBytes(const ConvShape &s, int threads) const;

  // y[N][K][outH][outW] = epilogue(conv(x) + bias).
  //
  // The epilogue sees each image's output as a K x (outH*outW) matrix: rows
  // are output channels (kAddRowBias / kMulRowScale: one value per channel),
  // columns are output pixels. kAddTensor is a residual with y's layout: its
  // data points at element (0,0,0,0) of the whole residual tensor, its ld
  // must be outH*outW, and the kernel adds the per-image offset n*K*ld
  // itself. Other data pointers are shared by all images.
  //
  // workspace: workspaceBytes(s, pool->threads()) bytes, 64-byte aligned, or
  // null to use a thread-local buffer (allocated once per thread, grown on
  // demand). pool: null means runtime::ThreadPool::global(). x and y must not
  // overlap. Blocks until done.
  void run(const ConvShape &s, const float *x, float *y, const Epilogue &ep, void *workspace,
           runtime::ThreadPool *pool) const;

  ConvAlgo algo() const { return algo_; }
  GemmIsa isa() const { return isa_; }
  // The orientation run() takes for shape `s` (never kAuto): kPixelRows when
  // the channels fill the GEMM's columns better than the pixels do by a
  // margin that pays for the transposition; always kChannelRows for
  // depthwise convs and for tap windows that drop taps (conv_taps.h);
  // kWinograd where it applies and its cost model predicts a clear win over
  // the better of the two.
  ConvOrientation orientationFor(const ConvShape &s) const;
  // Overrides the choice (tests and bench/conv run each); kAuto restores it.
  // kWinograd where it does not apply runs kChannelRows. Not thread-safe
  // against concurrent run() calls.
  void forceOrientation(ConvOrientation o) { forced_ = o; }

private:
  void runGemm(const ConvShape &s, const float *x, float *y, const Epilogue &ep, void *workspace,
               runtime::ThreadPool &pool) const;
  void runPixelRows(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                    void *workspace, runtime::ThreadPool &pool) const;
  void runDepthwise(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                    runtime::ThreadPool &pool) const;
  void runWinograd(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                   void *workspace, runtime::ThreadPool &pool) const;
  size_t pixelRowsWorkspaceBytes(const ConvShape &s, int threads) const;
  size_t winogradWorkspaceBytes(const ConvShape &s, int threads) const;
  // The orientation the weights' shape and the ISA prefer for `s`, Winograd
  // aside.
  ConvOrientation gemmOrientationFor(const ConvShape &s) const;
  // The weights of each group packed for each orientation, made on first
  // use (thread-safe); winogradWeights: U_xi [K x C] as A, xi = 0..35.
  const std::vector<PackedA> &channelRowWeights() const;
  const std::vector<PackedB> &pixelRowWeights() const;
  const std::vector<PackedA> &winogradWeights() const;

  ConvShape shape_;
  ConvAlgo algo_ = ConvAlgo::kGemm;
  GemmIsa isa_ = GemmIsa::kPortable;
  // kGemm*: per group, W_g [Kg x Cg*R*S] as A and W_g^T as B (and the
  // Winograd transform of W as 36 As), each packed on first use from the
  // one pack() made; shared_ptr because the type is incomplete here.
  struct GroupWeights;
  std::shared_ptr<GroupWeights> weights_;
  ConvOrientation forced_ = ConvOrientation::kAuto;
  // kGemm: the weights of reduced tap windows (conv_taps.h), packed on first
  // use; shared_ptr because the type is incomplete here.
  std::shared_ptr<detail::TapWindowPacks> windows_;
  std::vector<float> taps_; // kDepthwise: [K][R*S]
  std::vector<float> bias_; // K values, or empty
};

} // namespace kiln::kernels
