// The contract between the integer GEMM driver (igemm.cpp) and its per-ISA
// microkernel files, which are compiled with ISA flags and so include
// nothing but this header and intrinsics (see gemm_microkernel.h for why).
#pragma once

#include <cstdint>

namespace kiln::kernels::detail {

constexpr int kIgemmMaxMr = 16;

// Stores the h x nr tile c[i * ldc + j] = sum over k of pa(i, k) * pb(k, j)
// for j < cols (1 <= cols <= nr; columns >= cols are not written), h fixed
// per function. pa is an h-row packed A panel, pb a 64-byte aligned packed B
// panel, both in the kernel's layout (igemm.h), `groups` k groups deep.
using IgemmKernelFn = void (*)(int64_t groups, const void *pa, const void *pb, int32_t *c,
                               int64_t ldc, int64_t cols);

// How a kernel wants its operands packed: k groups of kGroup consecutive k
// per row (A) or column (B), elements of elemBytes bytes: 4 x 1 byte (A u8,
// B i8; VNNI and portable) or 2 x 2 bytes (both i16, the shifted values
// widened; AVX2's vpmaddwd).
struct IgemmLayout {
  int kGroup, elemBytes;
};

// One row of the requantizing finisher with one bias and scale for the
// row: o[j] = clamp(roundHalfEven(clamp(f32(acc[j] + bias) * scale, below,
// above)) + zeroPoint, lo, hi) for j < cols, as igemm.cpp's portable loop,
// bit for bit (the i32 sum wraps; no contraction of the product into the
// rounding). outSigned: o is i8, else u8.
using RequantizeRowFn = void (*)(const int32_t *acc, int32_t bias, float scale, int cols,
                                 float below, float above, float zeroPoint, float lo, float hi,
                                 bool outSigned, void *o);

struct IgemmKernelInfo {
  int mr, nr;
  IgemmLayout layout;
  IgemmKernelFn kernels[kIgemmMaxMr + 1]; // kernels[h] computes h rows, 1 <= h <= mr
  RequantizeRowFn requantizeRow = nullptr; // optional: else the portable loop
};

// The AVX2 requantizing row (also in the VNNI table: those CPUs have AVX2).
void requantizeRowAvx2(const int32_t *acc, int32_t bias, float scale, int cols, float below,
                       float above, float zeroPoint, float lo, float hi, bool outSigned, void *o);

IgemmKernelInfo igemmKernelPortable();
IgemmKernelInfo igemmKernelAvx2();
IgemmKernelInfo igemmKernelVnni();

} // namespace kiln::kernels::detail
