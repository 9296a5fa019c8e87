// kernels::applyEpilogue against a float64 reference: every op kind alone
// and chained, odd tile sizes (masked vector tails), offsets into the full
// output (row/column data indexed by full-output coordinates), padded row
// strides, saturation of sigmoid/SiLU/tanh, on every ISA this CPU supports.
#include "kernels/epilogue.h"
#include "kernels/epilogue_impl.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

std::vector<float> randomVector(size_t n, std::mt19937 &rng, float lo = -4.0f, float hi = 4.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

double refOp(const EpilogueOp &op, double v, int64_t row, int64_t col) {
  auto hardSigmoid = [&](double x) { return std::max(0.0, std::min(1.0, op.a * x + op.b)); };
  switch (op.kind) {
  case EpilogueKind::kAddRowBias:
    return v + op.data[row];
  case EpilogueKind::kAddColBias:
    return v + op.data[col];
  case EpilogueKind::kMulRowScale:
    return v * op.data[row];
  case EpilogueKind::kMulColScale:
    return v * op.data[col];
  case EpilogueKind::kAddTensor:
    return v + op.data[row * op.ld + col];
  case EpilogueKind::kRelu:
    return std::max(v, 0.0);
  case EpilogueKind::kClip:
    return std::min(std::max(v, double(op.a)), double(op.b));
  case EpilogueKind::kLeakyRelu:
    return v < 0 ? v * op.a : v;
  case EpilogueKind::kSigmoid:
    return 1.0 / (1.0 + std::exp(-v));
  case EpilogueKind::kSilu:
    return v / (1.0 + std::exp(-v));
  case EpilogueKind::kHardSigmoid:
    return hardSigmoid(v);
  case EpilogueKind::kHardSwish:
    return v * hardSigmoid(v);
  case EpilogueKind::kTanh:
    return std::tanh(v);
  case EpilogueKind::kGelu:
    return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  case EpilogueKind::kGeluTanh:
    return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  return v;
}

std::vector<GemmIsa> supportedIsas() {
  std::vector<GemmIsa> isas;
  for (GemmIsa isa : {GemmIsa::kPortable, GemmIsa::kAvx2, GemmIsa::kAvx512})
    if (gemmIsaSupported(isa)) isas.push_back(isa);
  return isas;
}

// The full output is fullRows x fullCols; the tile starts at (row0, col0).
struct Data {
  int64_t fullRows = 40, fullCols = 110; // room for every tile at its offset
  std::vector<float> rowVec, colVec, residual;
  explicit Data(std::mt19937 &rng)
      : rowVec(randomVector(size_t(fullRows), rng)), colVec(randomVector(size_t(fullCols), rng)),
        residual(randomVector(size_t(fullRows * fullCols), rng)) {}
  EpilogueOp op(EpilogueKind kind) const {
    EpilogueOp op{kind};
    switch (kind) {
    case EpilogueKind::kAddRowBias:
    case EpilogueKind::kMulRowScale:
      op.data = rowVec.data();
      break;
    case EpilogueKind::kAddColBias:
    case EpilogueKind::kMulColScale:
      op.data = colVec.data();
      break;
    case EpilogueKind::kAddTensor:
      op.data = residual.data(), op.ld = fullCols;
      break;
    case EpilogueKind::kClip:
      op.a = -0.7f, op.b = 1.3f;
      break;
    case EpilogueKind::kLeakyRelu:
      op.a = 0.1f;
      break;
    case EpilogueKind::kHardSigmoid:
      op.a = 0.2f, op.b = 0.5f;
      break;
    case EpilogueKind::kHardSwish:
      op.a = 1.0f / 6.0f, op.b = 0.5f;
      break;
    default:
      break;
    }
    return op;
  }
};

const EpilogueKind kAllKinds[] = {
    EpilogueKind::kAddRowBias,  EpilogueKind::kAddColBias, EpilogueKind::kMulRowScale,
    EpilogueKind::kAddTensor,   EpilogueKind::kRelu,       EpilogueKind::kClip,
    EpilogueKind::kLeakyRelu,   EpilogueKind::kSigmoid,    EpilogueKind::kSilu,
    EpilogueKind::kHardSigmoid, EpilogueKind::kHardSwish,  EpilogueKind::kTanh,
    EpilogueKind::kMulColScale, EpilogueKind::kGelu,       EpilogueKind::kGeluTanh};

// Applies `ep` with `isa` to a rows x cols tile at (row0, col0), ldc = cols + 3,
// and checks every element and that the padding columns are untouched.
void check(GemmIsa isa, const Epilogue &ep, int64_t rows, int64_t cols, int64_t row0, int64_t col0,
           std::mt19937 &rng) {
  const int64_t ldc = cols + 3;
  auto c = randomVector(size_t(rows * ldc), rng);
  const auto c0 = c;
  detail::epilogueFor(isa)(ep.ops, ep.count, c.data(), ldc, row0, col0, rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double ref = c0[size_t(i * ldc + j)];
      std::string ops;
      for (int o = 0; o < ep.count; ++o) {
        ref = refOp(ep.ops[o], ref, row0 + i, col0 + j);
        ops += std::string(epilogueKindName(ep.ops[o].kind)) + " ";
      }
      const double got = c[size_t(i * ldc + j)];
      ASSERT_NEAR(got, ref, 1e-5 + 1e-4 * std::abs(ref))
          << gemmIsaName(isa) << " ops: " << ops << "tile " << rows << "x" << cols << " at (" << i
          << "," << j << ") input " << c0[size_t(i * ldc + j)];
    }
    for (int64_t j = cols; j < ldc; ++j) ASSERT_EQ(c[size_t(i * ldc + j)], c0[size_t(i * ldc + j)]);
  }
}

class EpilogueTest : public ::testing::TestWithParam<GemmIsa> {};

TEST_P(EpilogueTest, EachKindMatchesReferenceOnOddTiles) {
  std::mt19937 rng(7);
  Data data(rng);
  for (EpilogueKind kind : kAllKinds) {
    Epilogue ep;
    ep.push(data.op(kind));
    for (auto [rows, cols] :
         {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {14, 32}, {5, 33}, {2, 16}, {17, 37}, {1, 64}})
      for (auto [row0, col0] : {std::pair<int64_t, int64_t>{0, 0}, {9, 13}}) {
        check(GetParam(), ep, rows, cols, row0, col0, rng);
        if (HasFatalFailure()) return;
      }
  }
}

TEST_P(EpilogueTest, ChainsApplyInOrder) {
  std::mt19937 rng(11);
  Data data(rng);
  const std::vector<std::vector<EpilogueKind>> chains = {
      {EpilogueKind::kAddRowBias, EpilogueKind::kSilu},
      {EpilogueKind::kAddRowBias, EpilogueKind::kHardSwish, EpilogueKind::kAddTensor},
      {EpilogueKind::kMulRowScale, EpilogueKind::kAddRowBias, EpilogueKind::kRelu},
      {EpilogueKind::kAddColBias, EpilogueKind::kClip, EpilogueKind::kSigmoid, EpilogueKind::kTanh,
       EpilogueKind::kLeakyRelu, EpilogueKind::kHardSigmoid, EpilogueKind::kAddTensor,
       EpilogueKind::kSilu}};
  for (const auto &chain : chains) {
    Epilogue ep;
    for (EpilogueKind k : chain) ep.push(data.op(k));
    check(GetParam(), ep, 13, 45, 4, 20, rng);
    if (HasFatalFailure()) return;
  }
}

TEST_P(EpilogueTest, TranscendentalsSaturateWithoutNaN) {
  const float inputs[] = {-1e30f, -100.0f, -88.5f, -50.0f, -20.0f, -9.0f, -1e-3f, -1e-6f, 0.0f,
                          1e-6f,  1e-3f,   9.0f,   20.0f,  50.0f,  88.5f, 100.0f, 1e30f};
  const int n = int(std::size(inputs));
  for (EpilogueKind kind : {EpilogueKind::kSigmoid, EpilogueKind::kSilu, EpilogueKind::kTanh}) {
    std::vector<float> c(inputs, inputs + n);
    EpilogueOp op{kind};
    detail::epilogueFor(GetParam())(&op, 1, c.data(), n, 0, 0, 1, n);
    for (int i = 0; i < n; ++i) {
      const double x = inputs[i];
      const double ref = refOp(op, x, 0, 0);
      ASSERT_FALSE(std::isnan(c[size_t(i)])) << epilogueKindName(kind) << "(" << x << ")";
      // SiLU of a huge negative input is a tiny negative number: abs tolerance.
      ASSERT_NEAR(c[size_t(i)], ref, 1e-6 + 1e-5 * std::abs(ref))
          << gemmIsaName(GetParam()) << " " << epilogueKindName(kind) << "(" << x << ")";
    }
  }
}

TEST_P(EpilogueTest, SigmoidIsAccurateOverItsRange) {
  // Dense sweep: max relative error ~1e-6 is the contract.
  std::vector<float> xs;
  for (float x = -30.0f; x <= 30.0f; x += 0.01f) xs.push_back(x);
  for (EpilogueKind kind : {EpilogueKind::kSigmoid, EpilogueKind::kTanh}) {
    std::vector<float> c = xs;
    EpilogueOp op{kind};
    detail::epilogueFor(GetParam())(&op, 1, c.data(), int64_t(c.size()), 0, 0, 1,
                                    int64_t(c.size()));
    double worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double ref = refOp(op, xs[i], 0, 0);
      if (std::abs(ref) > 1e-30) worst = std::max(worst, std::abs(c[i] - ref) / std::abs(ref));
    }
    EXPECT_LT(worst, 2e-6) << gemmIsaName(GetParam()) << " " << epilogueKindName(kind);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, EpilogueTest, ::testing::ValuesIn(supportedIsas()),
                         [](const auto &info) { return std::string(gemmIsaName(info.param)); });

TEST(Epilogue, PublicEntryPointUsesTheBestIsaAndSkipsEmptyLists) {
  float c[4] = {-1, 2, -3, 4};
  applyEpilogue(Epilogue{}, c, 2, 0, 0, 2, 2);
  EXPECT_EQ(c[0], -1.0f);
  Epilogue ep;
  ep.push({EpilogueKind::kRelu});
  EXPECT_FALSE(ep.empty());
  applyEpilogue(ep, c, 2, 0, 0, 2, 2);
  EXPECT_EQ(c[0], 0.0f);
  EXPECT_EQ(c[3], 4.0f);
}

} // namespace
} // namespace kiln::kernels
