// The attention tile with AVX2+FMA (simd_avx2.h): 4 rows x 16 columns of
// scores and of output per register block, 8 accumulators of 16 registers.
// Compiled with -mavx2 -mfma; includes nothing but its family's headers and
// intrinsics (see gemm_microkernel.h).
#include "kernels/attention_simd.h"
#include "kernels/simd_avx2.h"

namespace kiln::kernels::detail {

AttentionTileFn attentionTileAvx2() {
  return simd::attentionTile<Avx2, 4, 4, 2>;
}

} // namespace kiln::kernels::detail
