// 2-D (and 1-D) f32 transposed convolution (ONNX ConvTranspose) on NCHW
// tensors with weights packed once: the kernel behind the CPU backend's
// ConvTranspose step.
//
// Algorithm: GEMM + col2im. Per image and group, the products of every input
// pixel with every kernel tap are one GEMM,
//   cols[Kg*R*S x P] = W_g^T[Kg*R*S x Cg] * X_g[Cg x P],   P = input pixels,
// with W_g^T packed once in the GEMM's A format; then each row (m, r, s) of
// cols is added into output channel m at the positions that tap lands on
// (output = input * stride + tap * dilation - padBegin): the col2im scatter.
// The GEMM runs on blocks of input rows, so cols stays in L2 (a few hundred
// KiB) and is scattered right after it is made.
//
// Kernel == stride without padding (the common upsampling layer: 2x2,
// stride 2) covers every output pixel exactly once: the scatter becomes a
// strided write that adds the bias, and the output is never zero-filled.
// Otherwise the output is first filled with the bias (or zeros) and the
// scatter adds.
//
// Threads: tasks are (image, group, block of input rows). Blocks write
// disjoint output rows when the kernel's extent along H is at most the
// stride; otherwise only blocks two apart are disjoint (blocks are made tall
// enough for that), so even blocks run first and odd blocks after them.
//
// 1-D (H = 1 in the caller's view) is best passed with the sequence along
// H (H = length, W = 1, R = kernel, S = 1): the row blocks then split it.
#pragma once

#include "kernels/gemm.h"
#include "kernels/isa.h"

#include <cstdint>
#include <vector>

namespace kiln::runtime {
class ThreadPool;
}

namespace kiln::kernels {

struct ConvTransposeShape {
  int64_t N = 1, C = 1, H = 1, W = 1; // input NCHW
  int64_t K = 1, R = 1, S = 1;        // output channels, kernel height, width
  int64_t strideH = 1, strideW = 1, dilationH = 1, dilationW = 1;
  // Padding at the start of each axis (may be negative when an explicit
  // output_shape asks for more than the full result); the end padding only
  // shows in outH/outW.
  int64_t padTop = 0, padLeft = 0;
  int64_t outH = 1, outW = 1; // the output's spatial size
  int64_t groups = 1;

  // The ONNX output size along one axis: stride * (in - 1) + outputPadding +
  // (kernel - 1) * dilation + 1 - padBegin - padEnd.
  static int64_t outSize(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                         int64_t padBegin, int64_t padEnd, int64_t outputPadding);
  // Positive sizes, strides and dilations, groups dividing C and K, a
  // non-empty output. pack() and run() require it.
  bool valid() const;
};

// A transposed convolution's weights packed for one ISA. Immutable after
// pack(): one PackedConvTranspose may run on any number of threads at once.
// Move-only.
class PackedConvTranspose {
public:
  PackedConvTranspose() = default;

  // weights: [C][K/groups][R][S] (ONNX layout); bias: K values or null; both
  // copied. Only C, K, R, S and groups of `s` are fixed here; everything else
  // may change on every run.
  static PackedConvTranspose pack(const ConvTransposeShape &s, const float *weights,
                                  const float *bias, GemmIsa isa = GemmIsa::kAuto);

  // y[N][K][outH][outW] = convTranspose(x) + bias. pool: null means
  // runtime::ThreadPool::global(). x and y must not overlap. Scratch is a
  // thread-local buffer per thread (grown on demand). Blocks until done.
  void run(const ConvTransposeShape &s, const float *x, float *y, runtime::ThreadPool *pool) const;

  GemmIsa isa() const { return isa_; }

private:
  ConvTransposeShape shape_;
  GemmIsa isa_ = GemmIsa::kPortable;
  std::vector<PackedA> groupWeights_; // one W_g^T [Kg*R*S x Cg] per group
  std::vector<float> bias_;           // K values, or empty
};

} // namespace kiln::kernels
