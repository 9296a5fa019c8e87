// The contract between the attention driver (attention.cpp) and its per-ISA
// tile functions. The ISA files are compiled with ISA flags, so they include
// nothing but this header, attention_simd.h, epilogue_simd.h and
// intrinsics (see gemm_microkernel.h for why).
#pragma once

#include "kernels/attention.h"

namespace kiln::kernels::detail {

// The largest tile of Q rows and block of K/V columns one call handles.
constexpr int kAttentionTileRows = 32;
constexpr int kAttentionBlockCols = 128;

// Computes rows [row0, row0 + rows) of problem b's output, rows <=
// kAttentionTileRows.
using AttentionTileFn = void (*)(const AttentionProblem &p, int64_t b, int64_t row0, int64_t rows);

AttentionTileFn attentionTilePortable();
AttentionTileFn attentionTileAvx2();
AttentionTileFn attentionTileAvx512();

} // namespace kiln::kernels::detail
