// The GEMM loop nest (see gemm_driver.h). For one block of C:
//   for each nc-wide column block jc, for each K slice pc,
//     for each group of row panels holding <= mc rows:
//       1. get its A panels (pre-packed, or packed now; the group stays in L2),
//       2. for each NR-column B micro-panel: get it (pre-packed, or packed
//          now into the caller's buffer by a matrix copy or an im2col, while
//          the first group runs, so it is in L1), then run the microkernel on
//          every A panel of the group with it (B outer, A inner).
// beta applies on the first K slice only; the epilogue on the last, right
// after the microkernel stored the tile, so the tile is still in L1.
#include "kernels/gemm_driver.h"

#include "runtime/thread_pool.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace kiln::kernels::detail {

GemmKernels gemmKernelsFor(GemmIsa isa) {
  switch (resolveGemmIsa(isa)) {
#if defined(__x86_64__)
  case GemmIsa::kAvx512:
    return {gemmKernelAvx512(), epilogueAvx512()};
  case GemmIsa::kAvx2:
    return {gemmKernelAvx2(), epilogueAvx2()};
#endif
  default:
    return {gemmKernelPortable(), epiloguePortable()};
  }
}

namespace {

thread_local Scratch<float> tPackA;
thread_local Scratch<float> tPackB;

} // namespace

void packAPanel(const GemmKernelInfo &ki, const float *a, int64_t lda, bool trans, float alpha,
                int64_t r0, int h, int64_t p0, int64_t kc, float *dst) {
  if (!trans) {
    if (ki.packA) {
      ki.packA(a + r0 * lda + p0, lda, kc, h, alpha, dst);
      return;
    }
    for (int i = 0; i < h; ++i) {
      const float *src = a + (r0 + i) * lda + p0;
      for (int64_t k = 0; k < kc; ++k) dst[k * h + i] = alpha * src[k];
    }
    return;
  }
  for (int64_t k = 0; k < kc; ++k) {
    const float *src = a + (p0 + k) * lda + r0;
    for (int i = 0; i < h; ++i) dst[k * h + i] = alpha * src[i];
  }
}

namespace {

// C = rowBias + beta * C, then the epilogue: the whole product when K == 0
// or alpha == 0.
void scaleOnly(const GemmProblem &p, const GemmKernels &k) {
  for (int64_t i = 0; i < p.M; ++i) {
    float *ci = p.c + i * p.ldc;
    const float bias = p.rowBias ? p.rowBias[i] : 0.0f;
    for (int64_t j = 0; j < p.N; ++j) ci[j] = bias + (p.beta == 0.0f ? 0.0f : p.beta * ci[j]);
  }
  if (p.opCount) k.epilogue(p.ops, p.opCount, p.c, p.ldc, p.epiRow0, p.epiCol0, p.M, p.N);
}

} // namespace

void hoistRowBias(GemmProblem &p) {
  if (p.beta != 0.0f || p.rowBias || p.opCount == 0 || p.ops[0].kind != EpilogueKind::kAddRowBias)
    return;
  p.rowBias = p.ops[0].data + p.epiRow0;
  ++p.ops;
  --p.opCount;
}

void packMatrixB(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
                 float *dst) {
  const MatrixB &m = *static_cast<const MatrixB *>(ctx);
  for (int64_t q = 0; q * nr < cols; ++q, dst += nr * kc) {
    const int64_t jq = j0 + q * nr, w = std::min<int64_t>(nr, cols - q * nr);
    if (w < nr) std::memset(dst, 0, sizeof(float) * nr * kc);
    if (!m.trans) {
      for (int64_t k = 0; k < kc; ++k)
        std::memcpy(dst + k * nr, m.b + (p0 + k) * m.ldb + jq, sizeof(float) * w);
    } else {
      for (int64_t j = 0; j < w; ++j) {
        const float *src = m.b + (jq + j) * m.ldb + p0;
        for (int64_t k = 0; k < kc; ++k) dst[k * nr + j] = src[k];
      }
    }
  }
}

int64_t packBufferFloatsA(const GemmProblem &p, const GemmKernelInfo &ki) {
  if (p.a.packed) return 0;
  return (ki.mc + ki.mr) * sliceDepth(p.K, ki.kc);
}

int64_t packBufferFloatsB(const GemmProblem &p, const GemmKernelInfo &ki, int64_t nc) {
  if (p.b.packed) return 0;
  return roundUp(nc, ki.nr) * sliceDepth(p.K, ki.kc);
}

EpilogueForm epilogueFormOf(const EpilogueOp *ops, int count) {
  if (count == 2 && ops[0].kind == EpilogueKind::kAddTensor && ops[1].kind == EpilogueKind::kRelu)
    return EpilogueForm::kAddRelu;
  if (count != 1) return EpilogueForm::kGeneral;
  switch (ops[0].kind) {
  case EpilogueKind::kRelu:
    return EpilogueForm::kRelu;
  case EpilogueKind::kClip:
    return EpilogueForm::kClip;
  case EpilogueKind::kHardSwish:
    return EpilogueForm::kHardSwish;
  case EpilogueKind::kSilu:
    return EpilogueForm::kSilu;
  default:
    return EpilogueForm::kGeneral;
  }
}

void gemmBlock(const GemmProblem &p, const GemmKernels &k, const RowPanels &panels, int64_t panel0,
               int64_t panel1, int64_t j0, int64_t n, int64_t nc, float *aBuf, float *bBuf) {
  const GemmKernelInfo &ki = k.info;
  // The fused kernels of this epilogue's form, else the general ones.
  const FusedKernelFn *fusedKernels = ki.fused[int(epilogueFormOf(p.ops, p.opCount))];
  if (!fusedKernels[1]) fusedKernels = ki.fused[int(EpilogueForm::kGeneral)];
  const int nr = ki.nr;
  const int64_t kcMax = sliceDepth(p.K, ki.kc);
  const int64_t nPad = roundUp(p.N, nr);
  for (int64_t jc = j0; jc < j0 + n; jc += nc) {
    const int64_t ncur = std::min(nc, j0 + n - jc);
    const int64_t nPanels = ceilDiv(ncur, nr);
    for (int64_t pc = 0; pc < p.K; pc += kcMax) {
      const int64_t kc = std::min(kcMax, p.K - pc);
      const float beta = pc == 0 ? p.beta : 1.0f;
      const bool epilogue = pc + kc == p.K && p.opCount > 0;
      // jc / nr panels of nr * kc precede this block in a pre-packed B.
      const float *pb = p.b.packed ? p.b.packed + pc * nPad + jc * kc : bBuf;

      for (int64_t g0 = panel0, g1; g0 < panel1; g0 = g1) {
        // A group of whole panels with <= mc rows (at least one panel).
        g1 = g0 + 1;
        while (g1 < panel1 && panels.start(g1 + 1) - panels.start(g0) <= ki.mc) ++g1;
        const int64_t rowBase = panels.start(g0);
        const float *pa = aBuf;
        if (p.a.packed) {
          pa = p.a.packed + pc * p.M + rowBase * kc;
        } else {
          for (int64_t i = g0; i < g1; ++i)
            packAPanel(ki, p.a.a, p.a.lda, p.a.trans, p.a.alpha, panels.start(i), panels.height(i),
                       pc, kc, aBuf + (panels.start(i) - rowBase) * kc);
        }
        // One row (a GEMV: batch-1 MatMul heads, a transposed conv of one
        // output pixel): kernels[1] keeps only 2 accumulators, one FMA
        // chain per 8 columns, so it waits on FMA latency; row1x4 covers 4
        // full panels with 8 chains (same order of sums, same results).
        const bool oneRow = ki.row1x4 && g1 == g0 + 1 && panels.height(g0) == 1;
        for (int64_t q = 0; q < nPanels; ++q) {
          const int64_t col = jc + q * nr;
          const int64_t cols = std::min<int64_t>(nr, ncur - q * nr);
          const float *pbq = pb + q * nr * kc;
          if (oneRow && q % 4 == 0 && ncur - q * nr >= 4 * nr) {
            if (!p.b.packed && g0 == panel0)
              p.b.pack(p.b.ctx, pc, kc, col, 4 * nr, nr, bBuf + q * nr * kc);
            const int64_t row = panels.start(g0);
            float *c = p.c + row * p.ldc + col;
            ki.row1x4(kc, pa, pbq, c, beta, pc == 0 && p.rowBias ? p.rowBias + row : nullptr);
            if (epilogue)
              k.epilogue(p.ops, p.opCount, c, p.ldc, p.epiRow0 + row, p.epiCol0 + col, 1, 4 * nr);
            q += 3;
            continue;
          }
          const float *direct = nullptr;
          if (p.b.direct && ki.direct[1] && cols == nr && !p.b.direct(p.b.ctx, col, nr, &direct))
            direct = nullptr;
          // Otherwise B is packed one micro-panel at a time, just before the
          // first group uses it, so the kernels read it from L1; later
          // groups (M > mc) find it in the buffer.
          if (!direct && !p.b.packed && g0 == panel0)
            p.b.pack(p.b.ctx, pc, kc, col, cols, nr, bBuf + q * nr * kc);
          for (int64_t i = g0; i < g1; ++i) {
            const int64_t row = panels.start(i);
            const int h = panels.height(i);
            float *c = p.c + row * p.ldc + col;
            const float *bias = pc == 0 && p.rowBias ? p.rowBias + row : nullptr;
            const float *pai = pa + (row - rowBase) * kc;
            const bool fused = epilogue && fusedKernels[h] && (!direct || p.b.directStride);
            if (fused && direct)
              fusedKernels[h](kc, pai, direct + p.b.offsets[pc], p.b.directStride, c, p.ldc, beta,
                              cols, bias, p.ops, p.opCount, p.epiRow0 + row, p.epiCol0 + col);
            else if (direct)
              ki.direct[h](kc, pai, direct, p.b.offsets + pc, c, p.ldc, beta, bias);
            else if (fused)
              fusedKernels[h](kc, pai, pbq, nr, c, p.ldc, beta, cols, bias, p.ops, p.opCount,
                              p.epiRow0 + row, p.epiCol0 + col);
            else
              ki.kernels[h](kc, pai, pbq, c, p.ldc, beta, cols, bias);
            if (epilogue && !fused)
              k.epilogue(p.ops, p.opCount, c, p.ldc, p.epiRow0 + row, p.epiCol0 + col, h, cols);
          }
        }
      }
    }
  }
}

// Threading: C is cut into a tm x tn grid of blocks (whole panels and whole
// NR tiles), one per thread, each computed independently (no barrier
// between packing and compute). A block row re-packs its own B columns and a
// block column its own A rows, so the grid minimizes the redundant packing
// tm*K*N + tn*M*K (ties split rows: B packs by memcpy, A by gather; +7% at
// 256^3 on 2 threads); tiny products run on one thread, where waking a
// worker costs more than it saves.
void gemmParallel(const GemmProblem &p, const GemmKernels &k, runtime::ThreadPool &pool) {
  if (p.M <= 0 || p.N <= 0) return;
  if (p.K <= 0) {
    scaleOnly(p, k);
    return;
  }
  const GemmKernelInfo &ki = k.info;
  const RowPanels panels(p.M, ki.mr);
  const int64_t tilesM = panels.count, tilesN = ceilDiv(p.N, ki.nr);
  const double flops = 2.0 * double(p.M) * double(p.N) * double(p.K);
  int64_t threads = flops < 2e5 ? 1 : std::min<int64_t>(pool.threads(), tilesM * tilesN);
  int64_t bestTm = 1, bestTn = 1;
  double bestCost = -1;
  for (int64_t tm = threads; tm >= 1; --tm) { // ties: split rows, B packs cheaper
    if (threads % tm || tm > tilesM || threads / tm > tilesN) continue;
    const int64_t tn = threads / tm;
    double cost = double(tm) * double(p.N) + double(tn) * double(p.M);
    if (bestCost < 0 || cost < bestCost) bestCost = cost, bestTm = tm, bestTn = tn;
  }
  if (bestCost < 0) bestTm = bestTn = 1; // e.g. a prime thread count on a thin C
  // Blocks are whole tiles; earlier blocks take the remainder tiles.
  auto span = [](int64_t tiles, int64_t parts, int64_t idx) {
    int64_t base = tiles / parts, extra = tiles % parts;
    int64_t first = idx * base + std::min(idx, extra);
    return std::pair<int64_t, int64_t>(first, first + base + (idx < extra ? 1 : 0));
  };
  pool.parallelFor(bestTm * bestTn, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      auto [pm0, pm1] = span(tilesM, bestTm, u / bestTn);
      auto [tn0, tn1] = span(tilesN, bestTn, u % bestTn);
      const int64_t j0 = tn0 * ki.nr, n = std::min(tn1 * ki.nr, p.N) - j0;
      if (pm1 <= pm0 || n <= 0) continue;
      float *aBuf = p.a.packed ? nullptr : tPackA.get(packBufferFloatsA(p, ki));
      float *bBuf = p.b.packed ? nullptr : tPackB.get(packBufferFloatsB(p, ki, ki.nc));
      gemmBlock(p, k, panels, pm0, pm1, j0, n, ki.nc, aBuf, bBuf);
    }
  });
}

void packAFull(const GemmKernelInfo &ki, bool trans, int64_t M, int64_t K, const float *a,
               int64_t lda, float alpha, float *dst) {
  const RowPanels panels(M, ki.mr);
  const int64_t kcMax = sliceDepth(K, ki.kc);
  for (int64_t pc = 0; pc < K; pc += kcMax) {
    const int64_t kc = std::min(kcMax, K - pc);
    for (int64_t i = 0; i < panels.count; ++i)
      packAPanel(ki, a, lda, trans, alpha, panels.start(i), panels.height(i), pc, kc,
                 dst + pc * M + panels.start(i) * kc);
  }
}

void packBFull(const GemmKernelInfo &ki, bool trans, int64_t K, int64_t N, const float *b,
               int64_t ldb, float *dst) {
  const int64_t kcMax = sliceDepth(K, ki.kc);
  const int64_t nPad = roundUp(N, ki.nr);
  const MatrixB m{b, ldb, trans};
  for (int64_t pc = 0; pc < K; pc += kcMax) {
    const int64_t kc = std::min(kcMax, K - pc);
    packMatrixB(&m, pc, kc, 0, N, ki.nr, dst + pc * nPad);
  }
}

} // namespace kiln::kernels::detail
