// The GEMM driver: ISA dispatch, packing, cache blocking and threading
// around the per-ISA microkernels (gemm_microkernel.h).
//
// C is cut into one block per thread (see run()); each block runs the BLIS
// loop nest on its own:
//   for each NC-wide column panel jc, for each KC-deep slice pc of K:
//     1. pack op(B)[pc:pc+kc, jc:jc+nc] into NR-wide micro-panels,
//     2. for each MC-tall row block ic: pack alpha * op(A)[ic:ic+mc, pc:pc+kc]
//        into MR-tall micro-panels (this block stays in L2), then run the
//        microkernel over the tiles, B micro-panel outer, A micro-panel inner.
// beta applies on the first K slice only; the epilogue on the last, so C is
// read and written once per slice and finished while its tile is in registers.
#include "kernels/gemm.h"

#include "kernels/gemm_microkernel.h"
#include "runtime/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace kiln::kernels {

using detail::GemmKernelInfo;

const char *gemmIsaName(GemmIsa isa) {
  switch (isa) {
  case GemmIsa::kAuto:
    return "auto";
  case GemmIsa::kPortable:
    return "portable";
  case GemmIsa::kAvx2:
    return "avx2";
  case GemmIsa::kAvx512:
    return "avx512";
  }
  return "?";
}

bool gemmIsaSupported(GemmIsa isa) {
  switch (isa) {
  case GemmIsa::kAuto:
  case GemmIsa::kPortable:
    return true;
#if defined(__x86_64__)
  // libgcc's checks include the OS enabling the ymm/zmm state (XGETBV).
  case GemmIsa::kAvx2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case GemmIsa::kAvx512:
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma");
#else
  default:
    return false;
#endif
  }
  return false;
}

GemmIsa bestGemmIsa() {
  static const GemmIsa best = gemmIsaSupported(GemmIsa::kAvx512) ? GemmIsa::kAvx512
                              : gemmIsaSupported(GemmIsa::kAvx2) ? GemmIsa::kAvx2
                                                                 : GemmIsa::kPortable;
  return best;
}

namespace {

GemmKernelInfo kernelFor(GemmIsa isa) {
  if (isa == GemmIsa::kAuto || !gemmIsaSupported(isa)) isa = bestGemmIsa();
  switch (isa) {
#if defined(__x86_64__)
  case GemmIsa::kAvx512:
    return detail::gemmKernelAvx512();
  case GemmIsa::kAvx2:
    return detail::gemmKernelAvx2();
#endif
  default:
    return detail::gemmKernelPortable();
  }
}

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t roundUp(int64_t a, int64_t b) {
  return ceilDiv(a, b) * b;
}

// A grow-only, 64-byte aligned buffer, one per thread and role, so packing
// allocates nothing in steady state.
class Scratch {
public:
  ~Scratch() { std::free(data_); }
  float *get(int64_t floats) {
    if (floats > cap_) {
      std::free(data_);
      size_t bytes = size_t(roundUp(floats * int64_t(sizeof(float)), 64));
      data_ = static_cast<float *>(std::aligned_alloc(64, bytes));
      cap_ = data_ ? floats : 0;
    }
    return data_;
  }

private:
  float *data_ = nullptr;
  int64_t cap_ = 0;
};
thread_local Scratch tPackA;
thread_local Scratch tPackB;

struct Problem {
  bool transA, transB;
  int64_t M, N, K;
  float alpha;
  const float *A;
  int64_t lda;
  const float *B;
  int64_t ldb;
  float beta;
  float *C;
  int64_t ldc;
  GemmEpilogue epilogue;
};

// alpha * op(A)[i0:i0+m, p0:p0+kc] -> MR-tall micro-panels, k-major inside.
void packA(const Problem &p, const GemmKernelInfo &ki, int64_t i0, int64_t m, int64_t p0,
           int64_t kc, float *dst) {
  const int mr = ki.mr;
  // The ISA's packer takes full panels with 32-bit row offsets.
  const bool fast = ki.packA && !p.transA && p.lda * mr < (int64_t(1) << 31);
  for (int64_t ib = 0; ib < m; ib += mr, dst += mr * kc) {
    int64_t rows = std::min<int64_t>(mr, m - ib);
    if (fast && rows == mr) {
      ki.packA(p.A + (i0 + ib) * p.lda + p0, p.lda, kc, p.alpha, dst);
      continue;
    }
    if (rows < mr) std::memset(dst, 0, sizeof(float) * mr * kc);
    if (!p.transA) {
      for (int64_t i = 0; i < rows; ++i) {
        const float *src = p.A + (i0 + ib + i) * p.lda + p0;
        for (int64_t k = 0; k < kc; ++k) dst[k * mr + i] = p.alpha * src[k];
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const float *src = p.A + (p0 + k) * p.lda + i0 + ib;
        for (int64_t i = 0; i < rows; ++i) dst[k * mr + i] = p.alpha * src[i];
      }
    }
  }
}

// op(B)[p0:p0+kc, j0:j0+cols] -> one NR-wide micro-panel, zero-padded.
void packBPanel(const Problem &p, int nr, int64_t p0, int64_t kc, int64_t j0, int64_t cols,
                float *dst) {
  if (cols < nr) std::memset(dst, 0, sizeof(float) * nr * kc);
  if (!p.transB) {
    for (int64_t k = 0; k < kc; ++k)
      std::memcpy(dst + k * nr, p.B + (p0 + k) * p.ldb + j0, sizeof(float) * cols);
  } else {
    for (int64_t j = 0; j < cols; ++j) {
      const float *src = p.B + (j0 + j) * p.ldb + p0;
      for (int64_t k = 0; k < kc; ++k) dst[k * nr + j] = src[k];
    }
  }
}

// An edge tile: the microkernel writes a full tile to `tmp`, then the valid
// part is merged into C with beta and the epilogue.
void edgeTile(const GemmKernelInfo &ki, int64_t kc, const float *pa, const float *pb, float *c,
              int64_t ldc, int64_t m, int64_t n, float beta, const float *bias, bool relu) {
  alignas(64) float tmp[16 * 64];
  ki.kernel(kc, pa, pb, tmp, ki.nr, 0.0f, nullptr, false);
  for (int64_t i = 0; i < m; ++i) {
    float *ci = c + i * ldc;
    const float *ti = tmp + i * ki.nr;
    for (int64_t j = 0; j < n; ++j) {
      float v = ti[j];
      if (beta != 0.0f) v += beta * ci[j];
      if (bias) v += bias[j];
      if (relu && v < 0.0f) v = 0.0f;
      ci[j] = v;
    }
  }
}

// C = beta * C, then the epilogue: the whole product when K == 0 or alpha == 0.
void scaleOnly(const Problem &p) {
  bool relu = p.epilogue.activation == Activation::kRelu;
  for (int64_t i = 0; i < p.M; ++i) {
    float *ci = p.C + i * p.ldc;
    for (int64_t j = 0; j < p.N; ++j) {
      float v = p.beta == 0.0f ? 0.0f : p.beta * ci[j];
      if (p.epilogue.bias) v += p.epilogue.bias[j];
      if (relu && v < 0.0f) v = 0.0f;
      ci[j] = v;
    }
  }
}

// One block of C, rows [i0, i0+m) x columns [j0, j0+n), computed serially
// by the calling thread with its own packing buffers.
void runBlock(const Problem &p, const GemmKernelInfo &ki, int64_t i0, int64_t m, int64_t j0,
              int64_t n) {
  const int mr = ki.mr, nr = ki.nr;
  const bool relu = p.epilogue.activation == Activation::kRelu;
  for (int64_t jc = j0; jc < j0 + n; jc += ki.nc) {
    const int64_t nc = std::min<int64_t>(ki.nc, j0 + n - jc);
    const int64_t nPanels = ceilDiv(nc, nr);
    for (int64_t pc = 0; pc < p.K; pc += ki.kc) {
      const int64_t kc = std::min<int64_t>(ki.kc, p.K - pc);
      const float beta = pc == 0 ? p.beta : 1.0f;
      const bool last = pc + kc == p.K;
      const float *bias = last && p.epilogue.bias ? p.epilogue.bias + jc : nullptr;
      const bool doRelu = last && relu;

      float *packedB = tPackB.get(nPanels * nr * kc);
      for (int64_t q = 0; q < nPanels; ++q)
        packBPanel(p, nr, pc, kc, jc + q * nr, std::min<int64_t>(nr, nc - q * nr),
                   packedB + q * nr * kc);

      for (int64_t ic = i0; ic < i0 + m; ic += ki.mc) {
        const int64_t mc = std::min<int64_t>(ki.mc, i0 + m - ic);
        float *packedA = tPackA.get(roundUp(mc, mr) * kc);
        packA(p, ki, ic, mc, pc, kc, packedA);
        for (int64_t q = 0; q < nPanels; ++q) {
          const int64_t j = q * nr, cols = std::min<int64_t>(nr, nc - j);
          const float *pb = packedB + q * nr * kc;
          const float *tileBias = bias ? bias + j : nullptr;
          for (int64_t ib = 0; ib < mc; ib += mr) {
            const int64_t rows = std::min<int64_t>(mr, mc - ib);
            float *c = p.C + (ic + ib) * p.ldc + jc + j;
            const float *pa = packedA + ib * kc;
            if (rows == mr && cols == nr)
              ki.kernel(kc, pa, pb, c, p.ldc, beta, tileBias, doRelu);
            else
              edgeTile(ki, kc, pa, pb, c, p.ldc, rows, cols, beta, tileBias, doRelu);
          }
        }
      }
    }
  }
}

// Threading: C is cut into a tm x tn grid of blocks, one per thread, each
// computed independently (no barrier between packing and compute). A block
// row re-packs its own B columns and a block column its own A rows, so the
// grid minimizes the redundant packing tm*K*N + tn*M*K (ties split rows: B
// packs by memcpy, A by gather; +7% at 256^3 on 2 threads); tiny products run on
// one thread, where waking a worker costs more than it saves.
void run(const Problem &p, const GemmKernelInfo &ki, runtime::ThreadPool &pool) {
  const int64_t tilesM = ceilDiv(p.M, ki.mr), tilesN = ceilDiv(p.N, ki.nr);
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
  auto span = [](int64_t tiles, int64_t parts, int64_t idx, int64_t tile, int64_t limit) {
    int64_t base = tiles / parts, extra = tiles % parts;
    int64_t first = idx * base + std::min(idx, extra);
    int64_t count = base + (idx < extra ? 1 : 0);
    int64_t begin = std::min(first * tile, limit);
    return std::pair<int64_t, int64_t>(begin, std::min(count * tile, limit - begin));
  };
  pool.parallelFor(bestTm * bestTn, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      auto [i0, m] = span(tilesM, bestTm, u / bestTn, ki.mr, p.M);
      auto [j0, n] = span(tilesN, bestTn, u % bestTn, ki.nr, p.N);
      if (m > 0 && n > 0) runBlock(p, ki, i0, m, j0, n);
    }
  });
}

} // namespace

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
           int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
           const GemmOptions &options) {
  if (M <= 0 || N <= 0) return;
  Problem p{transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, options.epilogue};
  if (K <= 0 || alpha == 0.0f) {
    scaleOnly(p);
    return;
  }
  runtime::ThreadPool &pool = options.pool ? *options.pool : runtime::ThreadPool::global();
  run(p, kernelFor(options.isa), pool);
}

} // namespace kiln::kernels
