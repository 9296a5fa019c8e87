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

struct IgemmKernelInfo {
  int mr, nr;
  IgemmLayout layout;
  IgemmKernelFn kernels[kIgemmMaxMr + 1]; // kernels[h] computes h rows, 1 <= h <= mr
};

IgemmKernelInfo igemmKernelPortable();
IgemmKernelInfo igemmKernelAvx2();
IgemmKernelInfo igemmKernelVnni();

} // namespace kiln::kernels::detail
