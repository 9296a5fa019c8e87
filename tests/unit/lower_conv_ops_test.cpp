// Conv, ConvTranspose and Fused conv/matmul lowerings (lower/conv_ops.cpp)
// through the artifact against the interpreter, on random inputs. Weights
// given as graph inputs keep the microkernels away, so the dispatch runs;
// the f32 microkernel steps' general variants are run directly.
#include "lower_conv_test_util.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing::dense;
using testing::expectArtifactMatchesInterpreter;
using testing::expectGeneralVariantsMatchInterpreter;
using testing::expectRunError;
using testing::OpCheckOptions;
using testing::randomTensor;
using testing::typeText;

OpCheckOptions f32Tolerance() {
  OpCheckOptions o;
  o.rtol = 1e-4;
  o.atol = 1e-4;
  return o;
}

OpCheckOptions halfTolerance() {
  OpCheckOptions o;
  o.rtol = 1e-2;
  o.atol = 1e-2;
  return o;
}

// A model of one Conv (or ConvTranspose) whose weight and bias are graph
// inputs; `out` is the declared output type.
std::string convModel(const std::string &op, DType t, const Shape64 &x, const Shape64 &w,
                      int64_t bias, const std::string &attrs, const std::string &out,
                      const std::string &xType = "") {
  std::string m =
      "kiln.model opsets {\"\" = 19}\ngraph @g(%x: " + (xType.empty() ? typeText(t, x) : xType) +
      ", %w: " + typeText(t, w);
  if (bias > 0) m += ", %b: " + typeText(t, {bias});
  m += ") -> (%y) {\n  %y = " + op + "(%x, %w" + (bias > 0 ? ", %b" : "") + ") {" + attrs +
       "} : " + out + "\n}";
  return m;
}

std::vector<Tensor> convInputs(DType t, const Shape64 &x, const Shape64 &w, int64_t bias,
                               uint64_t seed) {
  std::vector<Tensor> in = {randomTensor(t, x, seed), randomTensor(t, w, seed + 1)};
  if (bias > 0) in.push_back(randomTensor(t, {bias}, seed + 2));
  return in;
}

// ---- Conv ---------------------------------------------------------------------------

TEST(LowerConvOps, Conv2dEveryPaddingModeStrideAndDilation) {
  const Shape64 x = {2, 3, 9, 8}, w = {4, 3, 3, 2};
  struct Case {
    std::string attrs, out;
  } cases[] = {
      {"pads = [1, 0, 2, 1], strides = [2, 1], dilations = [1, 2]", "f32[2,4,5,7]"},
      {"auto_pad = \"VALID\", strides = [2, 3]", "f32[2,4,4,3]"},
      {"auto_pad = \"SAME_UPPER\", strides = [2, 3], dilations = [2, 1]", "f32[2,4,5,3]"},
      {"auto_pad = \"SAME_LOWER\", strides = [2, 3]", "f32[2,4,5,3]"},
      {"auto_pad = \"NOTSET\", pads = [3, 3, 3, 3]", "f32[2,4,13,13]"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.attrs);
    expectArtifactMatchesInterpreter(convModel("Conv", DType::F32, x, w, 4, c.attrs, c.out),
                                     convInputs(DType::F32, x, w, 4, 11), f32Tolerance());
  }
}

TEST(LowerConvOps, Conv1dAnd3dWithAndWithoutBias) {
  expectArtifactMatchesInterpreter(
      convModel("Conv", DType::F32, {2, 3, 20}, {5, 3, 4}, 5,
                "pads = [2, 1], strides = [3], dilations = [2]", "f32[2,5,6]"),
      convInputs(DType::F32, {2, 3, 20}, {5, 3, 4}, 5, 3), f32Tolerance());
  expectArtifactMatchesInterpreter(
      convModel("Conv", DType::F32, {1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, 0,
                "pads = [1, 0, 1, 0, 2, 1], strides = [1, 2, 2]", "f32[1,3,5,3,4]"),
      convInputs(DType::F32, {1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, 0, 5), f32Tolerance());
}

TEST(LowerConvOps, ConvWithALongOrSymbolicKernelWidth) {
  // Wider than the unrolled taps: a loop over the kernel's last axis.
  expectArtifactMatchesInterpreter(convModel("Conv", DType::F32, {1, 2, 40}, {3, 2, 20}, 3,
                                             "pads = [5, 7], strides = [2]", "f32[1,3,17]"),
                                   convInputs(DType::F32, {1, 2, 40}, {3, 2, 20}, 3, 23),
                                   f32Tolerance());
  const std::string model = "kiln.model opsets {\"\" = 19}\ngraph @g(%x: f32[1,2,l], "
                            "%w: f32[3,2,k]) -> (%y) {\n  %y = Conv(%x, %w) {pads = [1, 2]} : "
                            "f32[1,3,?]\n}";
  for (auto [l, k] : {std::pair{9, 3}, {6, 8}}) {
    SCOPED_TRACE(::testing::Message() << l << " and " << k);
    expectArtifactMatchesInterpreter(model, convInputs(DType::F32, {1, 2, l}, {3, 2, k}, 0, 25),
                                     f32Tolerance());
  }
}

TEST(LowerConvOps, GroupedAndDepthwiseConvolutions) {
  expectArtifactMatchesInterpreter(convModel("Conv", DType::F32, {2, 4, 7, 7}, {6, 2, 3, 3}, 6,
                                             "group = 2, pads = [1, 1, 1, 1]", "f32[2,6,7,7]"),
                                   convInputs(DType::F32, {2, 4, 7, 7}, {6, 2, 3, 3}, 6, 7),
                                   f32Tolerance());
  expectArtifactMatchesInterpreter(
      convModel("Conv", DType::F32, {1, 3, 8, 5}, {3, 1, 3, 3}, 3,
                "group = 3, strides = [2, 2], auto_pad = \"SAME_UPPER\"", "f32[1,3,4,3]"),
      convInputs(DType::F32, {1, 3, 8, 5}, {3, 1, 3, 3}, 3, 9), f32Tolerance());
}

TEST(LowerConvOps, ConvInF64F16AndBf16) {
  const Shape64 x = {1, 2, 6, 5}, w = {3, 2, 3, 2};
  expectArtifactMatchesInterpreter(
      convModel("Conv", DType::F64, x, w, 3, "pads = [1, 1, 1, 0]", "f64[1,3,6,5]"),
      convInputs(DType::F64, x, w, 3, 13));
  for (DType t : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t));
    expectArtifactMatchesInterpreter(
        convModel("Conv", t, x, w, 3, "pads = [1, 1, 1, 0]", typeText(t, {1, 3, 6, 5})),
        convInputs(t, x, w, 3, 17), halfTolerance());
  }
}

TEST(LowerConvOps, ConvWithSymbolicBatchAndSpatialDimsAndSamePadding) {
  const std::string model =
      convModel("Conv", DType::F32, {}, {4, 3, 3, 3}, 4,
                "auto_pad = \"SAME_LOWER\", strides = [2, 1]", "f32[n,4,?,?]", "f32[n,3,h,w]");
  for (auto [n, h, w] : {std::tuple{1, 5, 4}, {3, 8, 9}, {2, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << n << "x" << h << "x" << w);
    expectArtifactMatchesInterpreter(
        model, convInputs(DType::F32, {n, 3, h, w}, {4, 3, 3, 3}, 4, 21), f32Tolerance());
  }
}

TEST(LowerConvOps, ConvOfAnEmptyBatchIsEmpty) {
  const std::string model = convModel("Conv", DType::F32, {}, {2, 3, 3, 3}, 0,
                                      "pads = [1, 1, 1, 1]", "f32[n,2,4,4]", "f32[n,3,4,4]");
  expectArtifactMatchesInterpreter(model, convInputs(DType::F32, {0, 3, 4, 4}, {2, 3, 3, 3}, 0, 1));
}

TEST(LowerConvOps, ConvReportsMismatchedChannelsAtRunTime) {
  const std::string model =
      convModel("Conv", DType::F32, {}, {2, 3, 3, 3}, 0, "", "f32[1,2,?,?]", "f32[1,c,5,5]");
  expectRunError(model, convInputs(DType::F32, {1, 4, 5, 5}, {2, 3, 3, 3}, 0, 1),
                 "weight has 3 input channels per group, expected 4");
}

TEST(LowerConvOps, ConvReportsAnInputSmallerThanTheKernel) {
  const std::string model =
      convModel("Conv", DType::F32, {}, {2, 3, 3, 3}, 0, "", "f32[1,2,?,?]", "f32[1,3,h,5]");
  expectRunError(model, convInputs(DType::F32, {1, 3, 2, 5}, {2, 3, 3, 3}, 0, 1),
                 "is smaller than the dilated kernel");
}

// ---- the microkernel steps' general variants ---------------------------------------

// A constant-weight f32 conv, so the conv microkernel takes it. A channel
// count the types leave open (`c`) gives it a general variant; with a fixed
// one the types prove that the packed kernel fits every run
// (backend/cpu/compiler.cpp, convStepAlwaysFits) and no variant is built.
std::string constantConvModel(const std::string &epilogue, const std::string &attrs,
                              const std::string &out, const std::string &channels = "c") {
  const Tensor w = randomTensor(DType::F32, {4, 3, 3, 3}, 31);
  const Tensor b = randomTensor(DType::F32, {4}, 32);
  const Tensor scale = randomTensor(DType::F32, {4, 1, 1}, 33);
  return "kiln.model opsets {\"\" = 19}\ngraph @g(%x: f32[n," + channels + ",8,8], %r: " + out +
         ") -> (%y) {\n  %w = Constant() {value = " + dense(w) + "} : f32[4,3,3,3]\n" +
         "  %b = Constant() {value = " + dense(b) + "} : f32[4]\n" +
         "  %s = Constant() {value = " + dense(scale) + "} : f32[4,1,1]\n" +
         "  %c = Conv(%x, %w, %b) {" + attrs + "} : " + out + "\n" + epilogue + "\n}";
}

TEST(LowerConvOps, ConvMicrokernelGeneralVariantWithFusedEpilogue) {
  const std::string epilogue = "  %m = Mul(%c, %s) : f32[n,4,8,8]\n"
                               "  %a = Add(%m, %r) : f32[n,4,8,8]\n"
                               "  %y = Relu(%a) : f32[n,4,8,8]";
  const std::string model = constantConvModel(epilogue, "pads = [1, 1, 1, 1]", "f32[n,4,8,8]");
  for (int64_t n : {1, 3}) {
    std::vector<Tensor> in = {randomTensor(DType::F32, {n, 3, 8, 8}, 40 + n),
                              randomTensor(DType::F32, {n, 4, 8, 8}, 50 + n)};
    EXPECT_GT(expectGeneralVariantsMatchInterpreter(model, in, f32Tolerance()), 0);
    expectArtifactMatchesInterpreter(model, in, f32Tolerance());
  }
}

TEST(LowerConvOps, ConvWhoseTypesProveTheMicrokernelFitsGetsNoGeneralVariant) {
  const std::string epilogue = "  %a = Add(%c, %r) : f32[n,4,8,8]\n"
                               "  %y = Relu(%a) : f32[n,4,8,8]";
  const std::string model =
      constantConvModel(epilogue, "pads = [1, 1, 1, 1]", "f32[n,4,8,8]", /*channels=*/"3");
  for (int64_t n : {2, 0}) { // an empty batch too: the step handles it without a variant
    std::vector<Tensor> in = {randomTensor(DType::F32, {n, 3, 8, 8}, 70),
                              randomTensor(DType::F32, {n, 4, 8, 8}, 71)};
    EXPECT_EQ(expectGeneralVariantsMatchInterpreter(model, in, f32Tolerance()), 0);
    expectArtifactMatchesInterpreter(model, in, f32Tolerance());
  }
}

TEST(LowerConvOps, ConvMicrokernelGeneralVariantWithoutEpilogue) {
  const std::string model =
      constantConvModel("  %y = Identity(%c) : f32[n,4,4,4]",
                        "strides = [2, 2], pads = [1, 0, 0, 1]", "f32[n,4,4,4]");
  std::vector<Tensor> in = {randomTensor(DType::F32, {2, 3, 8, 8}, 60),
                            randomTensor(DType::F32, {2, 4, 4, 4}, 61)};
  EXPECT_GT(expectGeneralVariantsMatchInterpreter(model, in, f32Tolerance()), 0);
}

TEST(LowerConvOps, FusedConvTheMicrokernelRefusesRunsAsADispatch) {
  // SAME padding over symbolic spatial dims: the packed conv cannot take
  // it, so the whole Fused region (conv, bias, activation) is lowered.
  const Tensor w = randomTensor(DType::F32, {4, 3, 3, 3}, 34);
  const Tensor bias = randomTensor(DType::F32, {1, 4, 1, 1}, 35);
  const std::string model = "kiln.model opsets {\"\" = 19}\ngraph @g(%x: f32[1,3,h,w]) -> (%y) {\n"
                            "  %w = Constant() {value = " +
                            dense(w) + "} : f32[4,3,3,3]\n" +
                            "  %b = Constant() {value = " + dense(bias) + "} : f32[1,4,1,1]\n" +
                            "  %c = Conv(%x, %w) {auto_pad = \"SAME_UPPER\", strides = [2, 2]} : "
                            "f32[1,4,?,?]\n"
                            "  %a = Add(%c, %b) : f32[1,4,?,?]\n"
                            "  %y = LeakyRelu(%a) {alpha = 0.2} : f32[1,4,?,?]\n}";
  for (auto [h, wd] : {std::pair{5, 6}, {9, 4}}) {
    SCOPED_TRACE(::testing::Message() << h << "x" << wd);
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {1, 3, h, wd}, 36)},
                                     f32Tolerance());
  }
}

TEST(LowerConvOps, ConvMicrokernelTakesSamePaddingOverStaticDims) {
  // The step factory works the padding out at compile time.
  const Tensor w = randomTensor(DType::F32, {4, 3, 3, 3}, 37);
  for (const char *mode : {"SAME_UPPER", "SAME_LOWER"}) {
    SCOPED_TRACE(mode);
    const std::string model =
        "kiln.model opsets {\"\" = 19}\ngraph @g(%x: f32[2,3,8,7]) -> (%y) {\n"
        "  %w = Constant() {value = " +
        dense(w) + "} : f32[4,3,3,3]\n" + "  %y = Conv(%x, %w) {auto_pad = \"" + mode +
        "\", strides = [2, 3]} : f32[2,4,4,3]\n}";
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {2, 3, 8, 7}, 38)},
                                     f32Tolerance());
  }
}

TEST(LowerConvOps, ConvMicrokernelWithFewOutputPixelsRunsTransposed) {
  // <= 8 output pixels take Y^T = im2col(X)^T * W^T (conv_step.h): a
  // squeeze-excitation 1x1 conv on a 1x1 map (X^T read in place) with a
  // fused residual and activation, a padded 3x3 on a 2x2 map (im2col), in
  // batches of 1 and 3; the same model on a larger map takes the packed
  // conv.
  const Tensor w1 = randomTensor(DType::F32, {24, 40, 1, 1}, 81);
  const Tensor b1 = randomTensor(DType::F32, {24}, 82);
  const std::string se = "kiln.model opsets {\"\" = 19}\ngraph @g(%x: f32[n,40,h,w], %r: "
                         "f32[n,24,h,w]) -> (%y) {\n  %w = Constant() {value = " +
                         dense(w1) + "} : f32[24,40,1,1]\n  %b = Constant() {value = " + dense(b1) +
                         "} : f32[24]\n" +
                         "  %c = Conv(%x, %w, %b) : f32[n,24,h,w]\n"
                         "  %a = Add(%c, %r) : f32[n,24,h,w]\n"
                         "  %y = HardSigmoid(%a) : f32[n,24,h,w]\n}";
  for (auto [n, hw] : {std::pair<int64_t, int64_t>{1, 1}, {3, 1}, {2, 2}, {1, 5}}) {
    SCOPED_TRACE(::testing::Message() << "n" << n << " " << hw << "x" << hw);
    expectArtifactMatchesInterpreter(se,
                                     {randomTensor(DType::F32, {n, 40, hw, hw}, 83 + n),
                                      randomTensor(DType::F32, {n, 24, hw, hw}, 84 + n)},
                                     f32Tolerance());
  }
  const std::string model = constantConvModel("  %y = Relu(%c) : f32[n,4,h,w]",
                                              "pads = [1, 1, 1, 1]", "f32[n,4,h,w]", "3");
  const std::string small =
      std::string(model).replace(model.find("f32[n,3,8,8]"), 12, "f32[n,3,h,w]");
  for (auto [n, hw] : {std::pair<int64_t, int64_t>{1, 2}, {3, 2}, {2, 1}, {1, 6}}) {
    SCOPED_TRACE(::testing::Message() << "3x3 n" << n << " " << hw << "x" << hw);
    expectArtifactMatchesInterpreter(small,
                                     {randomTensor(DType::F32, {n, 3, hw, hw}, 90 + n),
                                      randomTensor(DType::F32, {n, 4, hw, hw}, 91 + n)},
                                     f32Tolerance());
  }
}

TEST(LowerConvOps, MatMulMicrokernelGeneralVariantWithFusedEpilogue) {
  const Tensor w = randomTensor(DType::F32, {5, 7}, 70), b = randomTensor(DType::F32, {7}, 71);
  const std::string model = "kiln.model opsets {\"\" = 19}\ngraph @g(%x: f32[n,2,5]) -> (%y) {\n"
                            "  %w = Constant() {value = " +
                            dense(w) + "} : f32[5,7]\n" + "  %b = Constant() {value = " + dense(b) +
                            "} : f32[7]\n" +
                            "  %m = MatMul(%x, %w) : f32[n,2,7]\n"
                            "  %a = Add(%m, %b) : f32[n,2,7]\n"
                            "  %s = Sigmoid(%a) : f32[n,2,7]\n"
                            "  %y = Mul(%a, %s) : f32[n,2,7]\n}";
  for (int64_t n : {1, 4}) {
    std::vector<Tensor> in = {randomTensor(DType::F32, {n, 2, 5}, 72 + n)};
    EXPECT_GT(expectGeneralVariantsMatchInterpreter(model, in, f32Tolerance()), 0);
    expectArtifactMatchesInterpreter(model, in, f32Tolerance());
  }
}

// ---- ConvTranspose --------------------------------------------------------------------

TEST(LowerConvOps, ConvTranspose2dStridesPadsOutputPaddingDilationsAndGroups) {
  struct Case {
    Shape64 x, w;
    std::string attrs, out;
  } cases[] = {
      {{2, 3, 4, 5},
       {3, 2, 3, 3},
       "strides = [2, 3], pads = [1, 0, 2, 1], output_padding = [1, 2]",
       "f32[2,2,7,16]"},
      {{1, 4, 3, 3},
       {4, 3, 2, 3},
       "group = 2, dilations = [2, 1], strides = [1, 2]",
       "f32[1,6,5,7]"},
      {{1, 2, 3, 4}, {2, 2, 3, 3}, "strides = [3, 2], pads = [2, 2, 2, 2]", "f32[1,2,5,5]"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.attrs);
    const int64_t bias = c.w[1] * (c.attrs.find("group = 2") != std::string::npos ? 2 : 1);
    expectArtifactMatchesInterpreter(
        convModel("ConvTranspose", DType::F32, c.x, c.w, bias, c.attrs, c.out),
        convInputs(DType::F32, c.x, c.w, bias, 81), f32Tolerance());
  }
}

TEST(LowerConvOps, ConvTransposeOutputShapeAndAutoPad) {
  const Shape64 x = {1, 2, 3, 4}, w = {2, 3, 3, 3};
  struct Case {
    std::string attrs, out;
  } cases[] = {
      {"strides = [2, 2], output_shape = [8, 10]", "f32[1,3,8,10]"},
      {"strides = [2, 2], output_shape = [1, 3, 5, 9]", "f32[1,3,5,9]"},
      {"strides = [2, 3], auto_pad = \"SAME_UPPER\"", "f32[1,3,6,12]"},
      {"strides = [2, 3], auto_pad = \"SAME_LOWER\"", "f32[1,3,6,12]"},
      {"strides = [2, 1], auto_pad = \"VALID\", pads = [1, 1, 1, 1]", "f32[1,3,7,6]"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.attrs);
    expectArtifactMatchesInterpreter(
        convModel("ConvTranspose", DType::F32, x, w, 0, c.attrs, c.out),
        convInputs(DType::F32, x, w, 0, 91), f32Tolerance());
  }
}

TEST(LowerConvOps, ConvTranspose1dAnd3dInF64AndF16) {
  expectArtifactMatchesInterpreter(convModel("ConvTranspose", DType::F64, {2, 3, 6}, {3, 2, 4}, 2,
                                             "strides = [3], pads = [1, 2], dilations = [2]",
                                             "f64[2,2,19]"),
                                   convInputs(DType::F64, {2, 3, 6}, {3, 2, 4}, 2, 101));
  expectArtifactMatchesInterpreter(
      convModel("ConvTranspose", DType::F16, {1, 2, 3, 2, 4}, {2, 2, 2, 3, 2}, 2,
                "strides = [2, 1, 2]", typeText(DType::F16, {1, 2, 6, 4, 8})),
      convInputs(DType::F16, {1, 2, 3, 2, 4}, {2, 2, 2, 3, 2}, 2, 103), halfTolerance());
}

TEST(LowerConvOps, ConvTransposeWithSymbolicDims) {
  const std::string model =
      convModel("ConvTranspose", DType::F32, {}, {3, 2, 3, 3}, 2,
                "strides = [2, 2], pads = [1, 1, 0, 0]", "f32[n,2,?,?]", "f32[n,3,h,w]");
  for (auto [n, h, w] : {std::tuple{1, 2, 3}, {2, 5, 1}}) {
    SCOPED_TRACE(::testing::Message() << n << "x" << h << "x" << w);
    expectArtifactMatchesInterpreter(
        model, convInputs(DType::F32, {n, 3, h, w}, {3, 2, 3, 3}, 2, 111), f32Tolerance());
  }
}

TEST(LowerConvOps, ConvTransposeReportsAWeightOfOtherChannels) {
  const std::string model = convModel("ConvTranspose", DType::F32, {}, {3, 2, 3, 3}, 0, "",
                                      "f32[1,2,?,?]", "f32[1,c,4,4]");
  expectRunError(model, convInputs(DType::F32, {1, 2, 4, 4}, {3, 2, 3, 3}, 0, 1),
                 "weight has 3 input channels, input X has 2");
}

} // namespace
} // namespace kiln
