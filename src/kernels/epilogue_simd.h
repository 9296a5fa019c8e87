// The vectorized epilogue, written once over a vector type V (simd_avx512.h,
// simd_avx2.h: a struct of static intrinsics wrappers: T, kLanes, load/store
// with a lane count, set1, add, mul, min, max, fmadd, fnmadd, round, ldexp,
// rcp, div, abs, lessThan, select) and instantiated by the ISA files that
// apply epilogues. Included only by those files, so it includes nothing but
// the epilogue types (see gemm_microkernel.h).
//
// Each output vector is loaded once, run through every op in registers and
// stored once: one pass over the tile whatever the number of ops.
#pragma once

#include "kernels/epilogue.h"
#include "kernels/gemm_microkernel.h"
#include "support/erfc_poly.h"

namespace kiln::kernels::detail::simd {

// The epilogue a fused GEMM tile applies to each value before its store
// (the ISA files' tile templates; empty for the plain kernels).
struct TileOps {
  const EpilogueOp *ops;
  int count;
  int64_t row0, col0;
};

// A tile template's form argument: an EpilogueForm, or kPlain for none.
constexpr int kPlain = -1;

// exp(x), Cephes' expf: x = n*ln2 + r, |r| <= ln2/2, exp(r) by a degree-6
// polynomial, times 2^n. x is clamped to [-87.34, 88]: 2^n stays a normal
// float and 1 + exp(x) stays finite, which sigmoid relies on.
template <class V> inline typename V::T exp(typename V::T x) {
  x = V::min(V::max(x, V::set1(-87.336544f)), V::set1(88.0f));
  auto n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  auto r = V::fnmadd(n, V::set1(0.693359375f), x);
  r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
  auto p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  p = V::fmadd(p, V::mul(r, r), r);
  return V::ldexp(V::add(p, V::set1(1.0f)), n);
}

// 1 / (1 + exp(-x)) with a refined reciprocal estimate (rel. error ~1e-7).
// For x <= -88 the denominator is ~1.7e38, still finite, so the result is
// ~0, never NaN.
template <class V> inline typename V::T sigmoid(typename V::T x) {
  auto d = V::add(V::set1(1.0f), exp<V>(V::sub(V::set1(0.0f), x)));
  auto r = V::rcp(d);
  // One Newton step: r * (2 - d * r).
  return V::mul(r, V::fnmadd(d, r, V::set1(2.0f)));
}

// Eigen's rational tanh (13/6 minimax on [-7.9988, 7.9988], where tanh
// rounds to +-1 in float); tanh(x) = x below 4e-4, where it is exact.
template <class V> inline typename V::T tanh(typename V::T x) {
  auto tiny = V::lessThan(V::abs(x), V::set1(0.0004f));
  auto c = V::min(V::max(x, V::set1(-7.99881172180175781f)), V::set1(7.99881172180175781f));
  auto x2 = V::mul(c, c);
  auto p = V::fmadd(x2, V::set1(-2.76076847742355e-16f), V::set1(2.00018790482477e-13f));
  p = V::fmadd(x2, p, V::set1(-8.60467152213735e-11f));
  p = V::fmadd(x2, p, V::set1(5.12229709037114e-08f));
  p = V::fmadd(x2, p, V::set1(1.48572235717979e-05f));
  p = V::fmadd(x2, p, V::set1(6.37261928875436e-04f));
  p = V::fmadd(x2, p, V::set1(4.89352455891786e-03f));
  p = V::mul(c, p);
  auto q = V::fmadd(x2, V::set1(1.19825839466702e-06f), V::set1(1.18534705686654e-04f));
  q = V::fmadd(x2, q, V::set1(2.26843463243900e-03f));
  q = V::fmadd(x2, q, V::set1(4.89352518554385e-03f));
  return V::select(tiny, x, V::div(p, q));
}

// 0.5 * erfc(z) for z >= 0 (support/erfc_poly.h), the upper tail of the
// standard normal at z * sqrt(2). NaN stays NaN (t is NaN).
template <class V> inline typename V::T halfErfc(typename V::T z) {
  const auto t = V::div(V::set1(1.0f), V::fmadd(z, V::set1(0.5f), V::set1(1.0f)));
  auto p = V::set1(float(kErfcPoly[kErfcPolyTerms - 1]));
  for (int i = kErfcPolyTerms - 2; i >= 0; --i) p = V::fmadd(p, t, V::set1(float(kErfcPoly[i])));
  return V::mul(V::mul(t, V::set1(0.5f)), exp<V>(V::fnmadd(z, z, p)));
}

// GELU's two forms, out of line: applyOps is inlined at every store site
// of every kernel, and an inlined erf there added 110 KB to the runtime
// library; a call per vector is small next to the erf itself.
// x * Phi(x), Phi the standard normal CDF from its tail q = Phi(-|x|):
// q below 0, 1 - q above. One erfc evaluation (no series branch, as erf
// would need for relative accuracy near 0, which x * Phi(x) does not): 35%
// fewer operations than 0.5 x (1 + erf(x / sqrt 2)), and as accurate (Phi's
// error is q's, < 1.2e-7 relative). As lower/elementwise_math.cpp's Gelu.
template <class V> __attribute__((noinline)) typename V::T gelu(typename V::T v) {
  const auto q = halfErfc<V>(V::mul(V::abs(v), V::set1(0.70710678118654752f)));
  return V::mul(v, V::select(V::lessThan(v, V::set1(0.0f)), q, V::sub(V::set1(1.0f), q)));
}

template <class V> __attribute__((noinline)) typename V::T geluTanh(typename V::T v) {
  const auto half = V::mul(v, V::set1(0.5f));
  const auto cube = V::mul(V::mul(v, v), V::mul(v, V::set1(0.044715f)));
  return V::fmadd(half, tanh<V>(V::mul(V::add(v, cube), V::set1(0.79788456080286536f))), half);
}

template <class V> inline typename V::T hardSigmoid(typename V::T x, float a, float b) {
  auto t = V::fmadd(V::set1(a), x, V::set1(b));
  return V::max(V::min(t, V::set1(1.0f)), V::set1(0.0f));
}

// The ops of epilogue form F (gemm_microkernel.h; not kGeneral) on an R x C
// block of vectors held in registers, compiled in; coordinates as
// applyOpsBlock's.
template <class V, EpilogueForm F, int R, int C>
__attribute__((always_inline)) inline void
applyFormBlock(typename V::T (&v)[R][C], const EpilogueOp *ops, int64_t row0, int64_t col0,
               const int (&lanes)[C]) {
  const EpilogueOp op = ops[0];
  const float a = op.a, b = op.b;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      if constexpr (F == EpilogueForm::kAddRelu) {
        const float *residual = op.data + (row0 + r) * op.ld + col0 + c * V::kLanes;
        v[r][c] = V::max(V::add(v[r][c], V::load(residual, lanes[c])), V::set1(0.0f));
      }
      if constexpr (F == EpilogueForm::kRelu) v[r][c] = V::max(v[r][c], V::set1(0.0f));
      if constexpr (F == EpilogueForm::kClip)
        v[r][c] = V::min(V::max(v[r][c], V::set1(a)), V::set1(b));
      if constexpr (F == EpilogueForm::kHardSwish)
        v[r][c] = V::mul(v[r][c], hardSigmoid<V>(v[r][c], a, b));
      if constexpr (F == EpilogueForm::kSilu) v[r][c] = V::mul(v[r][c], sigmoid<V>(v[r][c]));
    }
}

// Runs ops[0..count) on an R x C block of vectors held in registers: v[r][c]
// holds lanes[c] columns starting at column col0 + c * kLanes of output row
// row0 + r (row/column data indexed with those full-output coordinates).
// Op by op over the whole block: one dispatch per op for R*C vectors, not
// per vector, and R*C independent chains the core overlaps. Applied per
// vector, a sigmoid's ~80-cycle dependency chain ran nearly serially and
// even a HardSwish paid a dispatch per 8 outputs: fused activations cut
// small-K convs to 50-60% of their bias-only speed (bench/conv, kiln+act).
// The op is copied first, so stores through the kernel's output pointer do
// not force its fields to be reloaded.
template <class V, int R, int C>
__attribute__((always_inline)) inline void
applyOpsBlock(typename V::T (&v)[R][C], const EpilogueOp *ops, int count, int64_t row0,
              int64_t col0, const int (&lanes)[C]) {
  using T = typename V::T;
  for (int o = 0; o < count; ++o) {
    const EpilogueOp op = ops[o];
    // f(vector, r, c) over the block, fully unrolled.
    auto each = [&](auto f) __attribute__((always_inline)) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) v[r][c] = f(v[r][c], r, c);
    };
    auto colData = [&](int c) __attribute__((always_inline)) {
      return V::load(op.data + col0 + c * V::kLanes, lanes[c]);
    };
    switch (op.kind) {
    case EpilogueKind::kAddRowBias:
      each([&](T x, int r, int) { return V::add(x, V::set1(op.data[row0 + r])); });
      break;
    case EpilogueKind::kAddColBias:
      each([&](T x, int, int c) { return V::add(x, colData(c)); });
      break;
    case EpilogueKind::kMulRowScale:
      each([&](T x, int r, int) { return V::mul(x, V::set1(op.data[row0 + r])); });
      break;
    case EpilogueKind::kMulColScale:
      each([&](T x, int, int c) { return V::mul(x, colData(c)); });
      break;
    case EpilogueKind::kAddTensor:
      each([&](T x, int r, int c) {
        return V::add(x, V::load(op.data + (row0 + r) * op.ld + col0 + c * V::kLanes, lanes[c]));
      });
      break;
    case EpilogueKind::kRelu:
      each([&](T x, int, int) { return V::max(x, V::set1(0.0f)); });
      break;
    case EpilogueKind::kClip:
      each([&](T x, int, int) { return V::min(V::max(x, V::set1(op.a)), V::set1(op.b)); });
      break;
    case EpilogueKind::kLeakyRelu:
      each([&](T x, int, int) {
        return V::select(V::lessThan(x, V::set1(0.0f)), V::mul(x, V::set1(op.a)), x);
      });
      break;
    case EpilogueKind::kSigmoid:
      each([&](T x, int, int) { return sigmoid<V>(x); });
      break;
    case EpilogueKind::kSilu:
      each([&](T x, int, int) { return V::mul(x, sigmoid<V>(x)); });
      break;
    case EpilogueKind::kHardSigmoid:
      each([&](T x, int, int) { return hardSigmoid<V>(x, op.a, op.b); });
      break;
    case EpilogueKind::kHardSwish:
      each([&](T x, int, int) { return V::mul(x, hardSigmoid<V>(x, op.a, op.b)); });
      break;
    case EpilogueKind::kTanh:
      each([&](T x, int, int) { return tanh<V>(x); });
      break;
    case EpilogueKind::kGelu:
      each([&](T x, int, int) { return gelu<V>(x); });
      break;
    case EpilogueKind::kGeluTanh:
      each([&](T x, int, int) { return geluTanh<V>(x); });
      break;
    }
  }
}

// Runs ops[0..count) on one vector holding `lanes` columns starting at
// (row, col) of the full output.
template <class V>
__attribute__((always_inline)) inline typename V::T
applyOps(typename V::T v, const EpilogueOp *ops, int count, int64_t row, int64_t col, int lanes) {
  typename V::T block[1][1] = {{v}};
  const int blockLanes[1] = {lanes};
  applyOpsBlock<V, 1, 1>(block, ops, count, row, col, blockLanes);
  return block[0][0];
}

// The tile pass (after a kernel stored its tile) in blocks of 4 vectors
// through applyOpsBlock: a narrow tile (a GEMM microkernel's, at most 2
// vectors wide) 2 rows x 2 vectors at a time, a wide one 4 vectors of a row
// at a time, then a vector at a time for the rest.
template <class V>
void applyEpilogueTile(const EpilogueOp *ops, int count, float *c, int64_t ldc, int64_t row0,
                       int64_t col0, int64_t rows, int64_t cols) {
  using T = typename V::T;
  constexpr int L = V::kLanes;
  int64_t i = 0;
  if (cols <= 2 * L) {
    const int lanes[2] = {cols < L ? int(cols) : L, cols > L ? int(cols - L) : 0};
    for (; i + 2 <= rows; i += 2) {
      float *ci = c + i * ldc;
      T block[2][2] = {{V::load(ci, lanes[0]), V::load(ci + L, lanes[1])},
                       {V::load(ci + ldc, lanes[0]), V::load(ci + ldc + L, lanes[1])}};
      applyOpsBlock<V, 2, 2>(block, ops, count, row0 + i, col0, lanes);
      V::store(ci, block[0][0], lanes[0]);
      V::store(ci + L, block[0][1], lanes[1]);
      V::store(ci + ldc, block[1][0], lanes[0]);
      V::store(ci + ldc + L, block[1][1], lanes[1]);
    }
  }
  constexpr int kBlock = 4;
  constexpr int kFull[kBlock] = {L, L, L, L};
  for (; i < rows; ++i) {
    float *ci = c + i * ldc;
    int64_t j = 0;
    for (; j + kBlock * L <= cols; j += kBlock * L) {
      T block[1][kBlock];
#pragma GCC unroll 4
      for (int b = 0; b < kBlock; ++b) block[0][b] = V::load(ci + j + b * L, L);
      applyOpsBlock<V, 1, kBlock>(block, ops, count, row0 + i, col0 + j, kFull);
#pragma GCC unroll 4
      for (int b = 0; b < kBlock; ++b) V::store(ci + j + b * L, block[0][b], L);
    }
    for (; j < cols; j += L) {
      const int lanes = cols - j < L ? int(cols - j) : L;
      V::store(ci + j, applyOps<V>(V::load(ci + j, lanes), ops, count, row0 + i, col0 + j, lanes),
               lanes);
    }
  }
}

} // namespace kiln::kernels::detail::simd
