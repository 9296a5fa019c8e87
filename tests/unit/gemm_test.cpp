// kernels::sgemm against a naive float64-accumulated reference: many shapes
// (edge tiles, vectors, K slices), transposes, alpha/beta, the epilogue
// (column bias + ReLU here; every kind in epilogue_test.cpp), pre-packed A
// and B operands, on every ISA this CPU supports, with 1 and 2 threads.
#include "kernel_isas.h"
#include "kernels/gemm.h"
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

// How the operands reach the GEMM.
enum class Packing { kNone, kPackedA, kPackedB };

struct Case {
  int64_t M, N, K;
  bool transA = false, transB = false;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false, relu = false;
  bool rowBias = false;
};

std::vector<float> randomVector(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

// Runs one case with padded strides (lda > cols) so stride bugs show up.
void check(const Case &c, GemmIsa isa, runtime::ThreadPool &pool,
           Packing packing = Packing::kNone) {
  std::mt19937 rng(uint32_t(c.M * 131 + c.N * 17 + c.K));
  const int64_t aRows = c.transA ? c.K : c.M, aCols = c.transA ? c.M : c.K;
  const int64_t bRows = c.transB ? c.N : c.K, bCols = c.transB ? c.K : c.N;
  const int64_t lda = aCols + 3, ldb = bCols + 5, ldc = c.N + 2;
  auto A = randomVector(size_t(aRows * lda), rng);
  auto B = randomVector(size_t(bRows * ldb), rng);
  auto C = randomVector(size_t(c.M * ldc), rng);
  auto bias = randomVector(size_t(c.N), rng);
  auto rowBias = randomVector(size_t(c.M), rng);
  if (c.beta == 0.0f) // beta == 0 must not read C
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j)
        C[size_t(i * ldc + j)] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> C0 = C;

  GemmOptions opts;
  opts.pool = &pool;
  opts.isa = isa;
  if (c.bias) opts.epilogue.push({EpilogueKind::kAddColBias, 0, 0, bias.data()});
  if (c.rowBias) opts.epilogue.push({EpilogueKind::kAddRowBias, 0, 0, rowBias.data()});
  if (c.relu) opts.epilogue.push({EpilogueKind::kRelu});
  if (packing == Packing::kPackedA) {
    PackedA pa = PackedA::pack(c.transA, c.M, c.K, A.data(), lda, isa, c.alpha);
    sgemmPacked(pa, c.transB, c.N, B.data(), ldb, c.beta, C.data(), ldc, opts);
  } else if (packing == Packing::kPackedB) {
    PackedB pb = PackedB::pack(c.transB, c.K, c.N, B.data(), ldb, isa);
    sgemmPackedB(c.transA, c.M, c.alpha, A.data(), lda, pb, c.beta, C.data(), ldc, opts);
  } else {
    sgemm(c.transA, c.transB, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta,
          C.data(), ldc, opts);
  }

  const double tol = 1e-5 * std::sqrt(double(std::max<int64_t>(c.K, 1)));
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        double a = c.transA ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)];
        double b = c.transB ? B[size_t(j * ldb + k)] : B[size_t(k * ldb + j)];
        acc += a * b;
        mag += std::abs(a * b);
      }
      double ref = c.alpha * acc;
      double scale = std::abs(c.alpha) * mag;
      if (c.beta != 0.0f) {
        ref += double(c.beta) * C0[size_t(i * ldc + j)];
        scale += std::abs(double(c.beta) * C0[size_t(i * ldc + j)]);
      }
      if (c.bias) {
        ref += bias[size_t(j)];
        scale += std::abs(bias[size_t(j)]);
      }
      if (c.rowBias) {
        ref += rowBias[size_t(i)];
        scale += std::abs(rowBias[size_t(i)]);
      }
      if (c.relu) ref = std::max(ref, 0.0);
      double got = C[size_t(i * ldc + j)];
      ASSERT_LE(std::abs(got - ref), tol * std::max(scale, 1.0))
          << gemmIsaName(isa) << " threads=" << pool.threads() << " M=" << c.M << " N=" << c.N
          << " K=" << c.K << " tA=" << c.transA << " tB=" << c.transB << " packing=" << int(packing)
          << " at (" << i << "," << j << ") got " << got << " want " << ref;
    }
    // Padding columns of C are never written.
    for (int64_t j = c.N; j < ldc; ++j)
      ASSERT_TRUE(std::isnan(C[size_t(i * ldc + j)])
                      ? std::isnan(C0[size_t(i * ldc + j)])
                      : C[size_t(i * ldc + j)] == C0[size_t(i * ldc + j)]);
  }
}

std::vector<Case> shapes() {
  std::vector<Case> cases;
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1},
                                                            {7, 13, 5},
                                                            {1, 300, 70},
                                                            {300, 1, 70},
                                                            {14, 32, 16},
                                                            {15, 33, 17},
                                                            {6, 16, 1},
                                                            {29, 65, 300},
                                                            {64, 64, 513},
                                                            {257, 511, 129},
                                                            {100, 4100, 3},
                                                            {16, 70, 33},
                                                            {32, 97, 1100},
                                                            {45, 64, 576}})
    cases.push_back({m, n, k});
  for (bool ta : {false, true})
    for (bool tb : {false, true}) cases.push_back({37, 45, 61, ta, tb, 1.0f, 0.0f});
  cases.push_back({33, 47, 29, false, false, -0.5f, 1.0f});
  cases.push_back({33, 47, 29, true, false, 2.0f, 0.75f});
  cases.push_back({33, 47, 300, false, true, 1.0f, -1.0f, true, true});
  cases.push_back({20, 40, 0, false, false, 1.0f, 0.5f, true, false}); // K == 0: beta*C + bias
  cases.push_back({20, 40, 10, false, false, 0.0f, 2.0f});             // alpha == 0
  cases.push_back({257, 70, 513, false, false, 1.0f, 0.0f, true, true});
  cases.push_back({30, 50, 700, false, false, 1.0f, 0.0f, false, true, true});
  // One row over >= 4 full panels (row1x4): K slices, beta, column and row
  // bias, ReLU; then transposed A with a row bias.
  cases.push_back({1, 150, 600, false, true, 1.0f, 0.5f, true, true, true});
  cases.push_back({1, 64, 40, true, false, 1.0f, 0.0f, false, false, true});
  return cases;
}

class GemmTest : public ::testing::TestWithParam<IsaAndThreads> {};

TEST_P(GemmTest, MatchesFloat64Reference) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  for (const Case &c : shapes()) {
    check(c, isa, pool);
    if (HasFatalFailure()) return;
  }
}

TEST_P(GemmTest, PrePackedOperandsMatchFloat64Reference) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  for (Packing packing : {Packing::kPackedA, Packing::kPackedB})
    for (const Case &c : shapes()) {
      check(c, isa, pool, packing);
      if (HasFatalFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(IsasAndThreads, GemmTest, isasAndThreads(), isaAndThreadsName);

TEST(Gemm, AutoPicksASupportedIsaAndUsesTheGlobalPool) {
  EXPECT_TRUE(gemmIsaSupported(bestGemmIsa()));
  std::vector<float> A{1, 2, 3, 4}, B{5, 6, 7, 8}, C(4);
  sgemm(false, false, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{19, 22, 43, 50}));
}

TEST(Gemm, EmptyShapesTouchNothing) {
  float c = 42.0f;
  sgemm(false, false, 0, 1, 1, 1.0f, nullptr, 1, nullptr, 1, 0.0f, &c, 1);
  sgemm(false, false, 1, 0, 1, 1.0f, nullptr, 1, nullptr, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, 42.0f);
}

} // namespace
} // namespace kiln::kernels
