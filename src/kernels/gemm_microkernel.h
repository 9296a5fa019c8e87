// The contract between the GEMM driver (gemm_driver.cpp) and the per-ISA
// microkernel files. Those files are compiled with ISA flags, so they include
// nothing but this header and intrinsics: an inline std:: function emitted
// there with AVX-512 instructions could be picked by the linker for the whole
// program and crash CPUs without it.
#pragma once

#include <cstdint>

namespace kiln::kernels {
struct EpilogueOp;
}

namespace kiln::kernels::detail {

constexpr int kMaxMr = 16;

// Computes an h x NR tile, h fixed per function: acc = sum_k pa[k*h + i] *
// pb[k*NR + j] (an h-row packed A micro-panel and a zero-padded, 64-byte
// aligned NR-column packed B micro-panel), plus rowBias[i] when rowBias is
// not null (the accumulators start there: a conv's bias costs nothing), then
// c[i*ldc + j] = acc + beta * c[i*ldc + j] for j < cols (1 <= cols <= NR; c
// is not read when beta == 0; columns >= cols are not touched). Edge tiles
// are masked in the kernel, so the driver never copies a tile through a
// temporary.
using MicroKernelFn = void (*)(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc,
                               float beta, int64_t cols, const float *rowBias);

// Like MicroKernelFn for a full NR-column tile whose B is read in place, not
// packed: row k of the B micro-panel is the NR floats at b + boff[k] (any
// alignment). For tiles whose B panel already exists row by row in the
// source: the interior tiles of a stride-1 conv and every full tile of a 1x1
// conv, which then need no packing at all.
using DirectKernelFn = void (*)(int64_t kc, const float *pa, const float *b, const int32_t *boff,
                                float *c, int64_t ldc, float beta, const float *rowBias);

// Like MicroKernelFn, then ops[0..opCount) (epilogue_impl.h) applied to
// each finished value on its way to c, as element (row0 + i, col0 + j) of
// the epilogue's output: the tile's last K slice with its epilogue in one
// pass, without storing it, reloading it and calling the epilogue per tile
// (which cost small-depth convs 25-55% on AVX2). Row k of B is the NR
// floats at pb + k * ldb: ldb == NR for a packed micro-panel, or a full
// tile read in place from rows ldb apart (a 1x1 conv's input planes; there
// the separate epilogue pass, whose loads wait on the kernel's masked
// stores, took longer than the 16-deep GEMM itself). Optional per ISA.
using FusedKernelFn = void (*)(int64_t kc, const float *pa, const float *pb, int64_t ldb, float *c,
                               int64_t ldc, float beta, int64_t cols, const float *rowBias,
                               const EpilogueOp *ops, int opCount, int64_t row0, int64_t col0);

// The epilogues a fused kernel has compiled in, applied to the
// accumulators where they are: one activation, or a residual add then ReLU
// (kAddRelu: ops kAddTensor, kRelu; ResNet-style blocks). kGeneral
// interprets any op list; its dispatch, and the accumulators it spills
// around its switch, cost a small-depth conv (16-32 input channels) 15-30%
// of its speed for a mere ReLU on AVX2, where a compiled-in ReLU is one max
// per vector.
enum class EpilogueForm : uint8_t { kGeneral, kRelu, kClip, kHardSwish, kSilu, kAddRelu };
constexpr int kEpilogueForms = 6;

// One row times 4 full, consecutive NR-column panels of packed B (panel
// p at pb + p * NR * kc): c[j] = acc + beta * c[j] for j < 4 * NR, as
// MicroKernelFn with h = 1 and rowBias[0]. Optional per ISA.
using Row1KernelFn = void (*)(int64_t kc, const float *pa, const float *pb, float *c, float beta,
                              const float *rowBias);

// Packs h <= mr rows of a row-major (not transposed) A into one micro-panel:
// dst[k*h + i] = alpha * a[i*lda + k] for i < h, k < kc. Optional: the
// driver's scalar packing is used when null.
using PackAFn = void (*)(const float *a, int64_t lda, int64_t kc, int h, float alpha, float *dst);

struct GemmKernelInfo {
  int mr, nr;     // largest register tile
  int kc, mc, nc; // cache blocking: mc x kc A block in L2, kc x nc B panel in L2/L3
  MicroKernelFn kernels[kMaxMr + 1]; // kernels[h] computes h rows, 1 <= h <= mr
  PackAFn packA = nullptr;
  DirectKernelFn direct[kMaxMr + 1] = {}; // optional, as kernels
  // Optional, as kernels: fused[form][h] for each EpilogueForm (a missing
  // form takes kGeneral's kernel).
  FusedKernelFn fused[kEpilogueForms][kMaxMr + 1] = {};
  Row1KernelFn row1x4 = nullptr;          // optional
};

GemmKernelInfo gemmKernelPortable();
GemmKernelInfo gemmKernelAvx2();
GemmKernelInfo gemmKernelAvx512();

} // namespace kiln::kernels::detail
