// The pooling row loops (pool_rows.h) written once over a vector type V
// (simd_avx2.h, simd_avx512.h): V::load/store with a lane count (masked
// edges, no scalar tail), V::max/add, V::isNaN/select, and V::evens, the
// stride-2 load. Included only by the per-ISA files, after their traits;
// everything is in an unnamed namespace (see gemm_microkernel.h).
#pragma once

#include "kernels/pool_rows.h"

#include <algorithm>
#include <cstdint>

namespace kiln::kernels::detail {
namespace {

// acc combined with x: for max, x when x > acc or x is NaN, else acc --
// exactly the portable combine (pool.cpp), zeros' signs included. V::max(x,
// acc) is (x > acc ? x : acc) and returns acc when either is NaN, so only a
// NaN x needs the select.
template <class V, bool kMax> inline typename V::T combine(typename V::T acc, typename V::T x) {
  if constexpr (kMax)
    return V::select(V::isNaN(x), x, V::max(x, acc));
  else
    return V::add(acc, x);
}

template <class V, bool kMax>
void reduceRows(float *v, const float *x, int64_t stride, int64_t rows, int64_t n) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) {
    typename V::T acc = V::loadFull(x + i);
    for (int64_t r = 1; r < rows; ++r) acc = combine<V, kMax>(acc, V::loadFull(x + r * stride + i));
    V::storeFull(v + i, acc);
  }
  if (i < n) {
    const int lanes = int(n - i);
    typename V::T acc = V::load(x + i, lanes);
    for (int64_t r = 1; r < rows; ++r)
      acc = combine<V, kMax>(acc, V::load(x + r * stride + i, lanes));
    V::store(v + i, acc, lanes);
  }
}

// p[0], p[S], ..., p[S * (lanes - 1)]; reads nothing past the last of them.
template <class V, int S> inline typename V::T strided(const float *p, int lanes) {
  if constexpr (S == 1)
    return V::load(p, lanes);
  else
    return V::evens(p, lanes);
}

template <class V, bool kMax, int S>
void windows(const float *buf, float *y, int64_t outW, int64_t kernel, int64_t dw) {
  for (int64_t ow = 0; ow < outW; ow += V::kLanes) {
    const int lanes = int(std::min<int64_t>(V::kLanes, outW - ow));
    const float *b = buf + ow * S;
    typename V::T acc = strided<V, S>(b, lanes);
    for (int64_t t = 1; t < kernel; ++t)
      acc = combine<V, kMax>(acc, strided<V, S>(b + t * dw, lanes));
    V::store(y + ow, acc, lanes);
  }
}

template <class V> PoolRowKernels poolRowKernels() {
  return {reduceRows<V, true>,
          reduceRows<V, false>,
          {windows<V, true, 1>, windows<V, true, 2>},
          {windows<V, false, 1>, windows<V, false, 2>}};
}

} // namespace
} // namespace kiln::kernels::detail
