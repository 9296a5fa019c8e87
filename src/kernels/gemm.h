// kiln's packed f32 GEMM: C = alpha * op(A) * op(B) + beta * C, row-major,
// op(X) = X or X^T. BLIS-style: B is packed in KC x NC panels, A in MC x KC
// blocks, and a register-blocked microkernel per ISA (AVX-512, AVX2+FMA,
// portable C++) chosen at run time from the CPU's features computes each
// MR x NR tile. Work is split over runtime::ThreadPool (principle 6).
//
// An optional epilogue (per-column bias, then an activation) is applied to
// each tile while it is still in registers, so a fused matmul+bias+relu
// writes C once.
#pragma once

#include <cstdint>

namespace kiln::runtime {
class ThreadPool;
}

namespace kiln::kernels {

enum class GemmIsa { kAuto, kPortable, kAvx2, kAvx512 };
const char *gemmIsaName(GemmIsa isa);
// True when this CPU can run `isa` (kAuto and kPortable always can).
bool gemmIsaSupported(GemmIsa isa);
// The fastest ISA this CPU supports.
GemmIsa bestGemmIsa();

enum class Activation { kNone, kRelu };

// Applied after alpha * op(A) * op(B) + beta * C: C[i][j] = act(C[i][j] + bias[j]).
struct GemmEpilogue {
  const float *bias = nullptr; // N values, or null; not owned
  Activation activation = Activation::kNone;
};

struct GemmOptions {
  runtime::ThreadPool *pool = nullptr; // null: runtime::ThreadPool::global()
  GemmIsa isa = GemmIsa::kAuto;        // an unsupported ISA falls back to bestGemmIsa()
  GemmEpilogue epilogue;
};

// A is M x K (K x M when transA), B is K x N (N x K when transB), C is M x N;
// lda/ldb/ldc are row strides in elements. beta == 0 never reads C (NaNs in
// an uninitialized C do not propagate). C must not alias A or B. Blocks the
// calling thread until done; safe to call from several threads at once.
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
           int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
           const GemmOptions &options = {});

} // namespace kiln::kernels
