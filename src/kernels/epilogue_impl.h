// The contract between applyEpilogue (epilogue.cpp) and its per-ISA
// implementations, also used by the GEMM and conv drivers, which call the
// ISA's function directly on every output tile. The ISA files include only
// this header, epilogue_simd.h and intrinsics (see gemm_microkernel.h).
#pragma once

#include "kernels/epilogue.h"
#include "kernels/isa.h"

namespace kiln::kernels::detail {

// Applies ops[0..count) in order to the tile c[rows x cols] (row stride ldc)
// at (row0, col0) of the full output; see applyEpilogue.
using EpilogueFn = void (*)(const EpilogueOp *ops, int count, float *c, int64_t ldc, int64_t row0,
                            int64_t col0, int64_t rows, int64_t cols);

EpilogueFn epiloguePortable();
EpilogueFn epilogueAvx2();
EpilogueFn epilogueAvx512();
// The implementation for resolveGemmIsa(isa).
EpilogueFn epilogueFor(GemmIsa isa);

} // namespace kiln::kernels::detail
