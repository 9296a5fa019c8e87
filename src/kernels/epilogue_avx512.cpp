// The epilogue with AVX-512 (simd_avx512.h). Compiled with -mavx512f
// -mavx512vl -mfma; see gemm_microkernel.h for why nothing but the epilogue
// headers and intrinsics is included.
#include "kernels/epilogue_impl.h"
#include "kernels/epilogue_simd.h"
#include "kernels/simd_avx512.h"

namespace kiln::kernels::detail {
EpilogueFn epilogueAvx512() {
  return simd::applyEpilogueTile<Avx512>;
}

} // namespace kiln::kernels::detail
