// The GEMM loop nest shared by sgemm (gemm.cpp) and the convolutions
// (conv.cpp): BLIS-style cache blocking around the per-ISA microkernels, with
// the operands abstracted so that A may be pre-packed (weights), packed on
// the fly, and B may be pre-packed, packed from a matrix, or packed by a
// callback (a convolution packs its im2col panel straight into the GEMM's
// B format, so the full im2col matrix never exists).
//
// Packed layouts (also the layout of PackedA/PackedB in gemm.h):
//  - K is cut into slices of nearly equal depth <= kc (sliceDepth);
//  - A, M x K: slice p0 (depth kcs) at offset p0 * M holds the row panels of
//    RowPanels(M, mr) in order, panel i at + start(i) * kcs, element (i, k)
//    of an h-row panel at [k * h + i];
//  - B, K x N: slice p0 at offset p0 * roundUp(N, nr) holds NR-column
//    panels, panel q at + q * nr * kcs, element (k, j) at [k * nr + j],
//    columns past N zero. Panels are 64-byte aligned when the base is.
#pragma once

#include "kernels/epilogue_impl.h"
#include "kernels/gemm_microkernel.h"
#include "kernels/isa.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace kiln::runtime {
class ThreadPool;
}

namespace kiln::kernels::detail {

inline int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
inline int64_t roundUp(int64_t a, int64_t b) {
  return ceilDiv(a, b) * b;
}

// A grow-only, 64-byte aligned buffer of T. Declared thread_local, one per
// thread and role, so packing and scratch work allocate nothing in steady
// state.
template <class T> class Scratch {
public:
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { std::free(data_); }
  T *get(int64_t count) {
    if (count > cap_) {
      std::free(data_);
      data_ =
          static_cast<T *>(std::aligned_alloc(64, size_t(roundUp(count * int64_t(sizeof(T)), 64))));
      cap_ = data_ ? count : 0;
    }
    return data_;
  }

private:
  T *data_ = nullptr;
  int64_t cap_ = 0;
};

// K slices of nearly equal depth: K = 576, kc = 512 gives 288 + 288, not
// 512 + 64 (a thin last slice costs a full pass over C for little work).
inline int64_t sliceDepth(int64_t K, int kc) {
  return K <= 0 ? 1 : ceilDiv(K, ceilDiv(K, kc));
}

// M cut into panels of at most mr rows of nearly equal height: 16 rows with
// mr = 14 become 8 + 8, not 14 + 2 (a 2-row kernel has too few independent
// accumulators to keep the FMA units busy, and padding to 14 wastes 12 rows).
struct RowPanels {
  RowPanels(int64_t m, int mr)
      : count(m > 0 ? ceilDiv(m, mr) : 0), base(count ? m / count : 0),
        extra(count ? m % count : 0) {}
  int64_t start(int64_t i) const { return i * base + std::min(i, extra); }
  int height(int64_t i) const { return int(base + (i < extra ? 1 : 0)); }
  int64_t count, base, extra;
};

struct GemmKernels {
  GemmKernelInfo info;
  EpilogueFn epilogue;
};
// The kernels for resolveGemmIsa(isa).
GemmKernels gemmKernelsFor(GemmIsa isa);

struct ASource {
  const float *packed = nullptr; // the layout above, or null: pack alpha * op(a)
  const float *a = nullptr;
  int64_t lda = 0;
  bool trans = false;
  float alpha = 1.0f;
};

// Packs op(B)[p0:p0+kc, j0:j0+cols) into ceil(cols/nr) NR-column panels of
// kc * nr floats each at dst (64-byte aligned), zero-padding columns >= cols.
using PackBFn = void (*)(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
                         float *dst);

// Optional, with a packer: true when B's columns [j0, j0 + nr) can be read
// in place, row k at *base + offsets[k] (see DirectKernelFn).
using DirectBFn = bool (*)(const void *ctx, int64_t j0, int nr, const float **base);

struct BSource {
  const float *packed = nullptr; // the layout above, or null: call pack(ctx, ...)
  PackBFn pack = nullptr;
  const void *ctx = nullptr;
  DirectBFn direct = nullptr;
  const int32_t *offsets = nullptr; // K values, for direct
  // Non-zero when offsets[k] == k * directStride (a 1x1 conv: one channel
  // plane per row): the fused-epilogue kernels can then read B in place.
  int64_t directStride = 0;
};

// A plain row-major B (ctx of packMatrixB).
struct MatrixB {
  const float *b;
  int64_t ldb;
  bool trans;
};
void packMatrixB(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
                 float *dst);

struct GemmProblem {
  int64_t M = 0, N = 0, K = 0;
  ASource a;
  BSource b;
  float beta = 0.0f;
  float *c = nullptr;
  int64_t ldc = 0;
  // Added to row i of the product before beta * C and the ops (one value
  // per row of c, not of the epilogue's output); folded into the
  // microkernel's accumulators.
  const float *rowBias = nullptr;
  // Applied to each finished tile; element (0, 0) of c is element
  // (epiRow0, epiCol0) of the epilogue's output.
  const EpilogueOp *ops = nullptr;
  int opCount = 0;
  int64_t epiRow0 = 0, epiCol0 = 0;
};

// Moves a leading kAddRowBias op into p.rowBias when that is equivalent
// (beta == 0: then "+ bias" commutes with nothing).
void hoistRowBias(GemmProblem &p);

// The fused-kernel form of an op list (gemm_microkernel.h): a lone
// activation with a compiled-in kernel, else kGeneral.
EpilogueForm epilogueFormOf(const EpilogueOp *ops, int count);

// Floats of the packing buffers gemmBlock needs (A: 0 when pre-packed).
int64_t packBufferFloatsA(const GemmProblem &p, const GemmKernelInfo &ki);
int64_t packBufferFloatsB(const GemmProblem &p, const GemmKernelInfo &ki, int64_t nc);

// Computes rows panels [panel0, panel1) of `panels` x columns [j0, j0+n)
// serially, in nc-wide column blocks (j0 and nc multiples of nr). aBuf and
// bBuf are 64-byte aligned buffers of the sizes above. Requires K > 0.
void gemmBlock(const GemmProblem &p, const GemmKernels &k, const RowPanels &panels, int64_t panel0,
               int64_t panel1, int64_t j0, int64_t n, int64_t nc, float *aBuf, float *bBuf);

// The whole product on the pool (sgemm's threading, thread-local packing
// buffers). K == 0 is handled too: C = beta * C, then the epilogue.
void gemmParallel(const GemmProblem &p, const GemmKernels &k, runtime::ThreadPool &pool);

// alpha * op(A) rows [r0, r0 + h), K slice [p0, p0 + kc) -> one h-row
// panel of the A layout above (with the ISA's packer when it has one).
void packAPanel(const GemmKernelInfo &ki, const float *a, int64_t lda, bool trans, float alpha,
                int64_t r0, int h, int64_t p0, int64_t kc, float *dst);

// Packs alpha * op(A) (M x K) into the A layout above; dst holds M * K floats.
void packAFull(const GemmKernelInfo &ki, bool trans, int64_t M, int64_t K, const float *a,
               int64_t lda, float alpha, float *dst);
// Packs op(B) (K x N) into the B layout above; dst holds K * roundUp(N, nr) floats.
void packBFull(const GemmKernelInfo &ki, bool trans, int64_t K, int64_t N, const float *b,
               int64_t ldb, float *dst);

} // namespace kiln::kernels::detail
