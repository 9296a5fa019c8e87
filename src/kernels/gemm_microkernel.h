// The contract between the GEMM driver (gemm.cpp) and the per-ISA
// microkernel files. Those files are compiled with ISA flags, so they include
// nothing but this header and intrinsics: an inline std:: function emitted
// there with AVX-512 instructions could be picked by the linker for the whole
// program and crash CPUs without it.
#pragma once

#include <cstdint>

namespace kiln::kernels::detail {

// Computes a full MR x NR tile: acc = sum_k pa[k*MR + i] * pb[k*NR + j]
// (packed A and B micro-panels, zero-padded, 64-byte aligned), then
// c[i*ldc + j] = acc + beta * c (c not read when beta == 0),
// + bias[j] when bias != null, then max(., 0) when relu.
using MicroKernelFn = void (*)(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc,
                               float beta, const float *bias, bool relu);

// Packs one full MR-row micro-panel of a row-major (not transposed) A:
// dst[k*MR + i] = alpha * a[i*lda + k] for i < MR, k < kc. Optional: the
// driver's scalar packing is used when null or when 32-bit offsets overflow.
using PackAFn = void (*)(const float *a, int64_t lda, int64_t kc, float alpha, float *dst);

struct GemmKernelInfo {
  int mr, nr;     // register tile
  int kc, mc, nc; // cache blocking: mc x kc A block in L2, kc x nc B panel in L2/L3
  MicroKernelFn kernel;
  PackAFn packA = nullptr;
};

GemmKernelInfo gemmKernelPortable();
GemmKernelInfo gemmKernelAvx2();
GemmKernelInfo gemmKernelAvx512();

} // namespace kiln::kernels::detail
