// The epilogue with AVX2+FMA (simd_avx2.h). Compiled with -mavx2 -mfma; see
// gemm_microkernel.h for why nothing but the epilogue headers and
// intrinsics is included.
#include "kernels/epilogue_impl.h"
#include "kernels/epilogue_simd.h"
#include "kernels/simd_avx2.h"

namespace kiln::kernels::detail {
EpilogueFn epilogueAvx2() {
  return simd::applyEpilogueTile<Avx2>;
}

} // namespace kiln::kernels::detail
