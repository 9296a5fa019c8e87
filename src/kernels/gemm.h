// kiln's packed f32 GEMM: C = alpha * op(A) * op(B) + beta * C, row-major,
// op(X) = X or X^T. BLIS-style: B is packed in KC x NC panels, A in MC x KC
// blocks, and a register-blocked microkernel per ISA (AVX-512, AVX2+FMA,
// portable C++) chosen at run time from the CPU's features computes each
// tile. Work is split over runtime::ThreadPool (principle 6). The loop nest
// is in gemm_driver.h.
//
// A fused epilogue (bias, scale, residual, activation; see epilogue.h) is
// applied to each tile right after its last K slice, while it is in L1, so a
// fused matmul + bias + activation writes C once.
//
// Constant operands (weights) can be packed once and reused: PackedA for
// W * X (conv, Gemm with weights on the left), PackedB for X * W (MatMul with
// a constant right-hand side, the common case).
#pragma once

#include "kernels/epilogue.h"
#include "kernels/isa.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace kiln::runtime {
class ThreadPool;
}

namespace kiln::kernels {

struct GemmOptions {
  runtime::ThreadPool *pool = nullptr; // null: runtime::ThreadPool::global()
  GemmIsa isa = GemmIsa::kAuto;        // an unsupported ISA falls back to bestGemmIsa()
  // Applied last, to C as an M x N matrix: row i, column j (a per-row bias
  // is kAddRowBias, a MatMul/Gemm bias over N is kAddColBias).
  Epilogue epilogue;
};

// A is M x K (K x M when transA), B is K x N (N x K when transB), C is M x N;
// lda/ldb/ldc are row strides in elements. beta == 0 never reads C (NaNs in
// an uninitialized C do not propagate). C must not alias A or B. Blocks the
// calling thread until done; safe to call from several threads at once.
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
           int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
           const GemmOptions &options = {});

namespace detail {
struct AlignedFree {
  void operator()(float *p) const;
};
} // namespace detail

// alpha * op(A), M x K, packed once for one ISA (fixed at pack time; a
// GemmOptions::isa passed later is ignored). Immutable after pack(): one
// PackedA may be used by any number of threads at once. Move-only.
class PackedA {
public:
  PackedA() = default;
  static PackedA pack(bool transA, int64_t M, int64_t K, const float *A, int64_t lda,
                      GemmIsa isa = GemmIsa::kAuto, float alpha = 1.0f);
  int64_t rows() const { return M_; }
  int64_t depth() const { return K_; }
  GemmIsa isa() const { return isa_; }
  // The packed panels (layout in gemm_driver.h) and their size.
  const float *data() const { return data_.get(); }
  size_t bytes() const { return size_t(M_ * K_) * sizeof(float); }
  // Writes alpha * op(A) back out, row-major: dst[i * depth() + k].
  void unpack(float *dst) const;

private:
  std::unique_ptr<float[], detail::AlignedFree> data_;
  int64_t M_ = 0, K_ = 0;
  GemmIsa isa_ = GemmIsa::kPortable;
};

// C = A * op(B) + beta * C with a pre-packed A (M x K, alpha folded in); B is
// K x N (N x K when transB). As sgemm otherwise.
void sgemmPacked(const PackedA &A, bool transB, int64_t N, const float *B, int64_t ldb, float beta,
                 float *C, int64_t ldc, const GemmOptions &options = {});

// op(B), K x N, packed once for one ISA; as PackedA otherwise.
class PackedB {
public:
  PackedB() = default;
  static PackedB pack(bool transB, int64_t K, int64_t N, const float *B, int64_t ldb,
                      GemmIsa isa = GemmIsa::kAuto);
  int64_t depth() const { return K_; }
  int64_t cols() const { return N_; }
  GemmIsa isa() const { return isa_; }
  const float *data() const { return data_.get(); }
  size_t bytes() const { return bytes_; }
  // Writes op(B) back out, row-major: dst[k * cols() + j].
  void unpack(float *dst) const;

private:
  std::unique_ptr<float[], detail::AlignedFree> data_;
  int64_t K_ = 0, N_ = 0;
  size_t bytes_ = 0;
  GemmIsa isa_ = GemmIsa::kPortable;
};

// C = alpha * op(A) * B + beta * C with a pre-packed B (K x N); A is M x K
// (K x M when transA). As sgemm otherwise.
void sgemmPackedB(bool transA, int64_t M, float alpha, const float *A, int64_t lda,
                  const PackedB &B, float beta, float *C, int64_t ldc,
                  const GemmOptions &options = {});

} // namespace kiln::kernels
