// sgemm and the pre-packed operands: argument plumbing into the shared loop
// nest (gemm_driver.cpp), which does the blocking, packing and threading.
#include "kernels/gemm.h"

#include "kernels/gemm_driver.h"
#include "runtime/thread_pool.h"

#include <cstdlib>

namespace kiln::kernels {

using detail::GemmKernels;
using detail::GemmProblem;

void detail::AlignedFree::operator()(float *p) const {
  std::free(p);
}

namespace {

runtime::ThreadPool &poolOf(const GemmOptions &o) {
  return o.pool ? *o.pool : runtime::ThreadPool::global();
}

std::unique_ptr<float[], detail::AlignedFree> allocFloats(int64_t n) {
  size_t bytes = size_t(detail::roundUp(std::max<int64_t>(n, 1) * int64_t(sizeof(float)), 64));
  return std::unique_ptr<float[], detail::AlignedFree>(
      static_cast<float *>(std::aligned_alloc(64, bytes)));
}

void setEpilogue(GemmProblem &p, const GemmOptions &o) {
  p.ops = o.epilogue.ops;
  p.opCount = o.epilogue.count;
  detail::hoistRowBias(p);
}

} // namespace

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
           int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
           const GemmOptions &options) {
  if (M <= 0 || N <= 0) return;
  const GemmKernels k = detail::gemmKernelsFor(options.isa);
  const detail::MatrixB mb{B, ldb, transB};
  GemmProblem p;
  p.M = M, p.N = N, p.K = alpha == 0.0f ? 0 : K;
  p.a.a = A, p.a.lda = lda, p.a.trans = transA, p.a.alpha = alpha;
  p.b.pack = detail::packMatrixB, p.b.ctx = &mb;
  p.beta = beta, p.c = C, p.ldc = ldc;
  setEpilogue(p, options);
  detail::gemmParallel(p, k, poolOf(options));
}

PackedA PackedA::pack(bool transA, int64_t M, int64_t K, const float *A, int64_t lda, GemmIsa isa,
                      float alpha) {
  PackedA out;
  out.isa_ = resolveGemmIsa(isa);
  out.M_ = std::max<int64_t>(M, 0);
  out.K_ = std::max<int64_t>(K, 0);
  out.data_ = allocFloats(out.M_ * out.K_);
  if (out.M_ > 0 && out.K_ > 0)
    detail::packAFull(detail::gemmKernelsFor(out.isa_).info, transA, M, K, A, lda, alpha,
                      out.data_.get());
  return out;
}

void PackedA::unpack(float *dst) const {
  const detail::GemmKernelInfo ki = detail::gemmKernelsFor(isa_).info;
  const detail::RowPanels panels(M_, ki.mr);
  const int64_t kcMax = detail::sliceDepth(K_, ki.kc);
  for (int64_t pc = 0; pc < K_; pc += kcMax) {
    const int64_t kc = std::min(kcMax, K_ - pc);
    for (int64_t p = 0; p < panels.count; ++p) {
      const int64_t row0 = panels.start(p), h = panels.height(p);
      const float *panel = data_.get() + pc * M_ + row0 * kc;
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t i = 0; i < h; ++i) dst[(row0 + i) * K_ + pc + k] = panel[k * h + i];
    }
  }
}

void sgemmPacked(const PackedA &A, bool transB, int64_t N, const float *B, int64_t ldb, float beta,
                 float *C, int64_t ldc, const GemmOptions &options) {
  if (A.rows() <= 0 || N <= 0) return;
  const GemmKernels k = detail::gemmKernelsFor(A.isa());
  const detail::MatrixB mb{B, ldb, transB};
  GemmProblem p;
  p.M = A.rows(), p.N = N, p.K = A.depth();
  p.a.packed = A.data();
  p.b.pack = detail::packMatrixB, p.b.ctx = &mb;
  p.beta = beta, p.c = C, p.ldc = ldc;
  setEpilogue(p, options);
  detail::gemmParallel(p, k, poolOf(options));
}

PackedB PackedB::pack(bool transB, int64_t K, int64_t N, const float *B, int64_t ldb, GemmIsa isa) {
  PackedB out;
  out.isa_ = resolveGemmIsa(isa);
  out.K_ = std::max<int64_t>(K, 0);
  out.N_ = std::max<int64_t>(N, 0);
  const detail::GemmKernelInfo ki = detail::gemmKernelsFor(out.isa_).info;
  const int64_t floats = out.K_ * detail::roundUp(out.N_, ki.nr);
  out.bytes_ = size_t(floats) * sizeof(float);
  out.data_ = allocFloats(floats);
  if (out.K_ > 0 && out.N_ > 0) detail::packBFull(ki, transB, K, N, B, ldb, out.data_.get());
  return out;
}

void PackedB::unpack(float *dst) const {
  const detail::GemmKernelInfo ki = detail::gemmKernelsFor(isa_).info;
  const int64_t kcMax = detail::sliceDepth(K_, ki.kc), nPad = detail::roundUp(N_, ki.nr);
  for (int64_t pc = 0; pc < K_; pc += kcMax) {
    const int64_t kc = std::min(kcMax, K_ - pc);
    const float *slice = data_.get() + pc * nPad;
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t j = 0; j < N_; ++j)
        dst[(pc + k) * N_ + j] = slice[j / ki.nr * ki.nr * kc + k * ki.nr + j % ki.nr];
  }
}

void sgemmPackedB(bool transA, int64_t M, float alpha, const float *A, int64_t lda,
                  const PackedB &B, float beta, float *C, int64_t ldc, const GemmOptions &options) {
  if (M <= 0 || B.cols() <= 0) return;
  const GemmKernels k = detail::gemmKernelsFor(B.isa());
  GemmProblem p;
  p.M = M, p.N = B.cols(), p.K = alpha == 0.0f ? 0 : B.depth();
  p.a.a = A, p.a.lda = lda, p.a.trans = transA, p.a.alpha = alpha;
  p.b.packed = B.data();
  p.beta = beta, p.c = C, p.ldc = ldc;
  setEpilogue(p, options);
  detail::gemmParallel(p, k, poolOf(options));
}

} // namespace kiln::kernels
