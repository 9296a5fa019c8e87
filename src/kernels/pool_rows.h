// The contract between the pooling driver (pool.cpp) and its per-ISA row
// loops (pool_avx2.cpp, pool_avx512.cpp; the portable ones live in
// pool.cpp). Each output row of a pool is a vertical reduction of the
// window's input rows into a row buffer, then a horizontal reduction of that
// buffer over each output's window (pool.h); these are those two loops.
// Every loop reduces each element in the same order as the portable one, so
// all ISAs give the same bits.
#pragma once

#include <cstdint>

namespace kiln::kernels::detail {

struct PoolRowKernels {
  // v[i] = the max over r < rows of x[r * stride + i], for i < n (rows >=
  // 1), r in order: the larger, or a NaN of either (max lets a NaN win, like
  // the reference interpreter and numpy). One pass, the rows' vectors
  // combined in registers: copying the first row into v and folding each
  // further row into it, every pass reloading what the last had just
  // stored, made SqueezeNet's first 3x3 pool 0.158 ms instead of 0.135.
  using RowsFn = void (*)(float *v, const float *x, int64_t stride, int64_t rows, int64_t n);
  RowsFn maxRows;
  // v[i] = the sum over r < rows of x[r * stride + i], added in order.
  RowsFn sumRows;
  // y[ow] = reduce over t < kernel of buf[ow * S + t * dw], for ow < outW,
  // reducing t in order; [0] is stride S = 1, [1] is S = 2 (every table
  // has both); the driver handles every other stride itself.
  using WindowsFn = void (*)(const float *buf, float *y, int64_t outW, int64_t kernel, int64_t dw);
  WindowsFn maxWindows[2];
  WindowsFn sumWindows[2];
};

PoolRowKernels poolRowsAvx2();
PoolRowKernels poolRowsAvx512();

} // namespace kiln::kernels::detail
