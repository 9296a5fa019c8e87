// Pooling kernels on NCHW f32 tensors with exact ONNX semantics: MaxPool and
// AveragePool in 2-D (1-D as H = 1) with kernel, strides, pads and
// dilations, and GlobalAveragePool / GlobalMaxPool.
//
// The caller computes the output size (ceil_mode is ONNX's rounding of it;
// with ceil_mode, windows may hang past the bottom/right padding, and those
// taps count nowhere). MaxPool ignores padding (a window with no input tap
// yields the lowest float, like the reference interpreter). AveragePool
// divides by the window's taps inside the input, or with count_include_pad
// by its taps inside the padded input [-padTop, H + padBottom) x
// [-padLeft, W + padRight) (ONNX Runtime's rule); an empty window yields 0.
//
// Each output row is computed as a vertical reduction of the window's input
// rows into a row buffer padded with the reduction's identity, then a
// horizontal reduction of that buffer: both loops run over contiguous
// floats and vectorize, and a k x k window costs k + k (not k * k) ops per
// output for stride 1. Planes (and row blocks of planes when there are few)
// are spread over the pool.
#pragma once

#include "kernels/isa.h"

#include <cstdint>

namespace kiln::runtime {
class ThreadPool;
}

namespace kiln::kernels {

struct PoolShape {
  int64_t N = 1, C = 1, H = 1, W = 1;
  int64_t outH = 1, outW = 1; // from the caller (ceil_mode applied)
  int64_t kernelH = 1, kernelW = 1;
  int64_t strideH = 1, strideW = 1, dilationH = 1, dilationW = 1;
  int64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  // Positive sizes, strides and dilations, non-negative pads.
  bool valid() const;
};

// pool: null means runtime::ThreadPool::global(). x and y must not overlap.
// isa picks the row loops (isa.h; kAuto: the fastest this CPU has); every
// ISA gives the same bits.
void maxPool2d(const PoolShape &s, const float *x, float *y, runtime::ThreadPool *pool = nullptr,
               GemmIsa isa = GemmIsa::kAuto);
void averagePool2d(const PoolShape &s, bool countIncludePad, const float *x, float *y,
                   runtime::ThreadPool *pool = nullptr, GemmIsa isa = GemmIsa::kAuto);

// y[n][c] = mean / max of the `spatial` values of plane (n, c).
void globalAveragePool(int64_t N, int64_t C, int64_t spatial, const float *x, float *y,
                       runtime::ThreadPool *pool = nullptr);
void globalMaxPool(int64_t N, int64_t C, int64_t spatial, const float *x, float *y,
                   runtime::ThreadPool *pool = nullptr);

} // namespace kiln::kernels
