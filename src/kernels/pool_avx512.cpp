// The pooling row loops (pool_simd.h) with AVX-512: 16 floats a vector.
#include "kernels/simd_avx512.h"

#include "kernels/pool_simd.h"

namespace kiln::kernels::detail {

PoolRowKernels poolRowsAvx512() {
  return poolRowKernels<Avx512>();
}

} // namespace kiln::kernels::detail
