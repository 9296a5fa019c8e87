// MatMul lowering (lower/matmul_ops.cpp) through the artifact against the
// interpreter, on random inputs; f32 products, which the GEMM step takes,
// through that step's general variant.
#include "artifact_runner.h"
#include "ir/parser.h"
#include "lower_conv_test_util.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing::expectArtifactMatchesInterpreter;
using testing::expectGeneralVariantsMatchInterpreter;
using testing::expectRunError;
using testing::OpCheckOptions;
using testing::randomTensor;
using testing::typeText;

std::string matmulModel(const std::string &a, const std::string &b, const std::string &out) {
  return "kiln.model opsets {\"\" = 19}\ngraph @g(%a: " + a + ", %b: " + b +
         ") -> (%y) {\n  %y = MatMul(%a, %b) : " + out + "\n}";
}

void check(DType t, const Shape64 &a, const Shape64 &b, const Shape64 &out,
           const OpCheckOptions &o = {}, double lo = -2, double hi = 2) {
  SCOPED_TRACE(shapeToString(a) + " x " + shapeToString(b));
  expectArtifactMatchesInterpreter(matmulModel(typeText(t, a), typeText(t, b), typeText(t, out)),
                                   {randomTensor(t, a, 1, lo, hi), randomTensor(t, b, 2, lo, hi)},
                                   o);
}

TEST(LowerMatMulOps, BatchDimsBroadcastLikeNumpy) {
  check(DType::F64, {2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6});
  check(DType::F64, {3, 4}, {2, 2, 4, 5}, {2, 2, 3, 5});
  check(DType::F64, {2, 3, 3, 4}, {1, 3, 4, 2}, {2, 3, 3, 2});
}

TEST(LowerMatMulOps, OneDimensionalOperandsDropTheirUnitAxis) {
  check(DType::F64, {4}, {2, 4, 3}, {2, 3});
  check(DType::F64, {2, 3, 4}, {4}, {2, 3});
  check(DType::F64, {4}, {4}, {});
  check(DType::F64, {3, 5}, {5, 1}, {3, 1});
}

TEST(LowerMatMulOps, IntegersWrapAroundLikeTheInterpreter) {
  for (DType t : {DType::I32, DType::I64, DType::U32, DType::U64}) {
    SCOPED_TRACE(dtypeName(t));
    check(t, {2, 3, 5}, {5, 4}, {2, 3, 4}, {}, -100, 100);
  }
  check(DType::I32, {3, 6}, {6, 2}, {3, 2}, {}, -2e9, 2e9);
}

TEST(LowerMatMulOps, HalfFloatsAccumulateInF32) {
  OpCheckOptions o;
  o.rtol = 1e-2;
  o.atol = 1e-2;
  check(DType::F16, {3, 9}, {9, 5}, {3, 5}, o);
  check(DType::BF16, {2, 3, 9}, {9, 5}, {2, 3, 5}, o);
}

TEST(LowerMatMulOps, SymbolicDimsAndEmptyProducts) {
  const std::string model = matmulModel("f64[b,m,4]", "f64[4,n]", "f64[b,m,n]");
  for (auto [b, m, n] : {std::tuple{1, 3, 5}, {2, 1, 7}, {0, 2, 3}, {2, 0, 1}}) {
    SCOPED_TRACE(::testing::Message() << b << "x" << m << "x" << n);
    expectArtifactMatchesInterpreter(
        model, {randomTensor(DType::F64, {b, m, 4}, 3), randomTensor(DType::F64, {4, n}, 4)});
  }
  // K = 0: every element is an empty sum.
  expectArtifactMatchesInterpreter(matmulModel("f64[2,k]", "f64[k,3]", "f64[2,3]"),
                                   {Tensor(DType::F64, {2, 0}), Tensor(DType::F64, {0, 3})});
}

TEST(LowerMatMulOps, ReportsInnerDimsThatDoNotMatch) {
  expectRunError(matmulModel("f64[2,k]", "f64[3,2]", "f64[2,2]"),
                 {randomTensor(DType::F64, {2, 4}, 1), randomTensor(DType::F64, {3, 2}, 2)},
                 "inner dims do not match: A has 4 columns, B has 3 rows");
  expectRunError(matmulModel("f64[a,2,3]", "f64[b,3,2]", "f64[?,2,2]"),
                 {randomTensor(DType::F64, {2, 2, 3}, 1), randomTensor(DType::F64, {3, 3, 2}, 2)},
                 "batch dims do not broadcast: 2 vs 3");
}

TEST(LowerMatMulOps, GemmStepGeneralVariant) {
  OpCheckOptions o;
  o.rtol = 1e-4;
  o.atol = 1e-4;
  const std::string model = matmulModel("f32[b,3,4]", "f32[?,4,5]", "f32[?,3,5]");
  for (auto [b, bb] : {std::pair{2, 1}, {3, 3}, {1, 2}}) {
    SCOPED_TRACE(::testing::Message() << b << " and " << bb);
    EXPECT_GT(expectGeneralVariantsMatchInterpreter(
                  model,
                  {randomTensor(DType::F32, {b, 3, 4}, 5), randomTensor(DType::F32, {bb, 4, 5}, 6)},
                  o),
              0);
  }
}

// torch's attention slices its packed in_proj weight and transposes each
// slice before its MatMul; fold-constants keeps the slices (folding one
// alone would duplicate the weight), and the matmul step evaluates each
// chain at compile time and packs the result like any constant weight.
TEST(LowerMatMulOps, WeightsSlicedAndTransposedFromAConstantArePrepacked) {
  const Tensor w = randomTensor(DType::F32, {12, 5}, 81);
  const std::string model =
      "kiln.model opsets {\"\" = 19}\ngraph @g(%x: f32[n,5]) -> (%y) {\n"
      "  %w = Constant() {value = " + testing::dense(w) + "} : f32[12,5]\n"
      "  %b0 = Constant() {value = dense<i64[1]> [0]} : i64[1]\n"
      "  %b1 = Constant() {value = dense<i64[1]> [4]} : i64[1]\n"
      "  %b2 = Constant() {value = dense<i64[1]> [8]} : i64[1]\n"
      "  %s1 = Slice(%w, %b0, %b1) : f32[4,5]\n"
      "  %s2 = Slice(%w, %b1, %b2) : f32[4,5]\n"
      "  %t1 = Transpose(%s1) {perm = [1, 0]} : f32[5,4]\n"
      "  %t2 = Transpose(%s2) {perm = [1, 0]} : f32[5,4]\n"
      "  %m1 = MatMul(%x, %t1) : f32[n,4]\n"
      "  %m2 = MatMul(%x, %t2) : f32[n,4]\n"
      "  %y = Sub(%m1, %m2) : f32[n,4]\n}";
  for (int64_t n : {1, 6})
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {n, 5}, 82 + n)});
}

// fuse-epilogues puts a bias, a per-column or scalar scale and GELU (erf and
// tanh forms) after a MatMul into the GEMM's epilogue (kMulColScale, kGelu,
// kGeluTanh); the fused step must match the unfused ops of the interpreter,
// across GELU's small-|x| series, its erfc branch and its saturation.
TEST(LowerMatMulOps, BiasScaleAndGeluFuseIntoTheGemmEpilogue) {
  const Tensor w = randomTensor(DType::F32, {24, 40}, 91);
  const Tensor bias = randomTensor(DType::F32, {40}, 92);
  const Tensor scale = randomTensor(DType::F32, {40}, 93);
  for (const char *approximate : {"none", "tanh"})
    for (const char *scaleType : {"f32[40]", "f32[]"}) {
      const Tensor sc =
          std::string(scaleType) == "f32[]" ? randomTensor(DType::F32, {}, 94) : scale;
      const std::string model =
          std::string("kiln.model opsets {\"\" = 20}\ngraph @g(%x: f32[n,24]) -> (%y) {\n") +
          "  %w = Constant() {value = " + testing::dense(w) + "} : f32[24,40]\n" +
          "  %b = Constant() {value = " + testing::dense(bias) + "} : f32[40]\n" +
          "  %s = Constant() {value = " + testing::dense(sc) + "} : " + scaleType + "\n" +
          "  %m = MatMul(%x, %w) : f32[n,40]\n" + "  %a = Add(%m, %b) : f32[n,40]\n" +
          "  %c = Mul(%a, %s) : f32[n,40]\n" + "  %y = Gelu(%c) {approximate = \"" + approximate +
          "\"} : f32[n,40]\n}";
      SCOPED_TRACE(std::string(approximate) + " scale " + scaleType);
      // One step, the GEMM, with the whole chain in its epilogue (its general
      // variant for other shapes is the one generated kernel).
      auto parsed = parseModel(model, "gelu.kir");
      ASSERT_TRUE(parsed.ok()) << parsed.error().message;
      auto compiled = testing::ArtifactRunner::compile(std::move(*parsed), {}, 1);
      ASSERT_TRUE(compiled.ok()) << compiled.error().message;
      EXPECT_EQ((*compiled)->stats().microkernelSteps, 1);
      EXPECT_EQ((*compiled)->stats().steps, 1);
      EXPECT_TRUE((*compiled)->stats().microkernelMisses.empty());
      // The GEMM sums in another order than the interpreter: its f32 rounding
      // (~K eps |x||w|) survives the bias add's cancellation, hence atol.
      OpCheckOptions o;
      o.atol = 5e-5;
      for (int64_t n : {1, 7, 30})
        expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {n, 24}, 95 + n, -3, 3)},
                                         o);
    }
}

} // namespace
} // namespace kiln
