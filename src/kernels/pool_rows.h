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
  // v[i] = max(v[i], row[i]) for i < n: the larger, or a NaN of either
  // (max lets a NaN win, like the reference interpreter and numpy).
  void (*maxInto)(float *v, const float *row, int64_t n);
  // v[i] = v[i] + row[i] for i < n.
  void (*sumInto)(float *v, const float *row, int64_t n);
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
