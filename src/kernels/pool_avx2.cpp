// The pooling row loops (pool_simd.h) with AVX2: 8 floats a vector.
#include "kernels/simd_avx2.h"

#include "kernels/pool_simd.h"

namespace kiln::kernels::detail {

PoolRowKernels poolRowsAvx2() {
  return poolRowKernels<Avx2>();
}

} // namespace kiln::kernels::detail
