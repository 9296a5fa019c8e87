// The attention tile with AVX-512 (simd_avx512.h): 4 rows x 32 columns of
// scores, 4 rows x 64 columns of output per register block. Compiled with
// -mavx512f -mavx512vl -mfma; includes nothing but its family's headers and
// intrinsics (see gemm_microkernel.h).
#include "kernels/attention_simd.h"
#include "kernels/simd_avx512.h"

namespace kiln::kernels::detail {

AttentionTileFn attentionTileAvx512() {
  return simd::attentionTile<Avx512, 4, 4, 4>;
}

} // namespace kiln::kernels::detail
