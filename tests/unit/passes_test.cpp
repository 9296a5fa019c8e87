// Graph pass tests: each parses tests/lit/passes/<pass>/<case>.kir, runs that
// one pass through the pipeline driver (so the verifier runs after it),
// prints the result and compares it with <case>.expected.kir. The first lines
// of each input say what the case checks. A second run of the pass on its own
// output must change nothing.
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "passes/pipeline.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln {
namespace {

std::string readFile(const std::string &path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The text after the leading comment lines (the printer writes none).
std::string withoutLeadingComments(const std::string &text) {
  std::string rest = text;
  while (rest.rfind("//", 0) == 0) rest = rest.substr(rest.find('\n') + 1);
  return rest;
}

void expectPassOutput(const std::string &pass, const std::string &testCase) {
  const std::string base =
      std::string(KILN_SOURCE_DIR) + "/tests/lit/passes/" + pass + "/" + testCase;
  const std::string input = readFile(base + ".kir");
  ASSERT_FALSE(input.empty()) << "missing " << base << ".kir";
  auto model = parseModel(input, base + ".kir");
  ASSERT_TRUE(model.ok()) << model.error().message;
  ASSERT_TRUE(verifyModel(*model).ok());

  Status s = runPipeline(*model, {pass});
  ASSERT_TRUE(s.ok()) << s.error().message;
  const std::string got = printModel(*model);
  EXPECT_EQ(got, withoutLeadingComments(readFile(base + ".expected.kir")))
      << "in " << base << ".expected.kir";

  auto again = findPass(pass)->run(*model);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(*again) << pass << " is not idempotent on " << testCase;
  EXPECT_EQ(printModel(*model), got);
}

TEST(PassRegistry, ListsEveryPassByItsName) {
  EXPECT_EQ(allPassNames(), (std::vector<std::string>{
                                "decompose", "canonicalize", "fold-constants", "cse", "dce",
                                "fuse-batchnorm", "recognize-layernorm", "recognize-gelu",
                                "recognize-hardswish", "recognize-softmax", "recognize-attention",
                                "fuse-epilogues", "fuse-elementwise", "legalize-precision"}));
  for (const std::string &name : allPassNames()) EXPECT_EQ(findPass(name)->name(), name);
  EXPECT_EQ(findPass("no-such-pass"), nullptr);
}

TEST(PassPipeline, RejectsUnknownPassesListingTheAvailableOnes) {
  Model model;
  Status s = runPipeline(model, {"dce", "fold"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message.rfind("unknown pass 'fold' (available: decompose, canonicalize, "
                                    "fold-constants, cse, dce, ",
                                    0),
            0u)
      << s.error().message;
}

TEST(PassPipeline, PrintsAfterTheNamedPasses) {
  auto model = parseModel("graph @main(%x: f32[2]) -> (%x) {\n  %a = Relu(%x) : f32[2]\n}\n", "t");
  ASSERT_TRUE(model.ok());
  std::ostringstream out;
  PipelineOptions options;
  options.printAfter = {"dce"};
  options.out = &out;
  ASSERT_TRUE(runPipeline(*model, {"cse", "dce"}, options).ok());
  EXPECT_EQ(out.str(),
            "// ----- after dce -----\nkiln.model\ngraph @main(%x: f32[2]) -> (%x) {\n}\n");
}

TEST(PassPipeline, LevelsGrowFromTheLegalizingPassesAndNameRegisteredPasses) {
  EXPECT_EQ(pipelineForLevel(0), (std::vector<std::string>{"decompose", "legalize-precision"}));
  EXPECT_EQ(pipelineForLevel(1),
            (std::vector<std::string>{"decompose", "legalize-precision", "canonicalize",
                                      "fold-constants", "dce"}));
  for (int level = 1; level <= 3; ++level) {
    std::vector<std::string> lower = pipelineForLevel(level - 1), passes = pipelineForLevel(level);
    ASSERT_GE(passes.size(), lower.size());
    EXPECT_TRUE(std::equal(lower.begin(), lower.end(), passes.begin())) << "-O" << level;
    for (const std::string &name : passes) EXPECT_NE(findPass(name), nullptr) << name;
  }
}

TEST(Decompose, RewritesGemmIntoMatMulAndBiasAdd) {
  expectPassOutput("decompose", "rewrites_gemm_into_matmul_and_bias_add");
}
TEST(Decompose, ScalesAndTransposesGemmOperands) {
  expectPassOutput("decompose", "scales_and_transposes_gemm_operands");
}
TEST(Decompose, ComputesHalfGemmInF32) {
  expectPassOutput("decompose", "computes_half_gemm_in_f32");
}
TEST(Decompose, RewritesEinsumContractionsIntoMatMul) {
  expectPassOutput("decompose", "rewrites_einsum_contractions_into_matmul");
}
TEST(Decompose, RewritesEinsumDiagonalsSumsAndTransposes) {
  expectPassOutput("decompose", "rewrites_einsum_diagonals_sums_and_transposes");
}
TEST(Decompose, RewritesEinsumWithSymbolicDims) {
  expectPassOutput("decompose", "rewrites_einsum_with_symbolic_dims");
}
TEST(Decompose, RewritesEinsumWithEllipsisAndThreeOperands) {
  expectPassOutput("decompose", "rewrites_einsum_with_ellipsis_and_three_operands");
}
TEST(Decompose, RewritesLossesIntoGathersAndReductions) {
  expectPassOutput("decompose", "rewrites_losses_into_gathers_and_reductions");
}
TEST(Decompose, RewritesCopyingDropout) {
  expectPassOutput("decompose", "rewrites_copying_dropout");
}

TEST(Dce, RemovesUnusedChains) {
  expectPassOutput("dce", "removes_unused_chains");
}
TEST(Dce, KeepsNodesWhoseOutputsARegionReads) {
  expectPassOutput("dce", "keeps_nodes_whose_outputs_a_region_reads");
}
TEST(Dce, RemovesUnusedNodesWithRegions) {
  expectPassOutput("dce", "removes_unused_nodes_with_regions");
}
TEST(Dce, KeepsNodesWithOneUsedOutput) {
  expectPassOutput("dce", "keeps_nodes_with_one_used_output");
}

TEST(Cse, MergesIdenticalNodes) {
  expectPassOutput("cse", "merges_identical_nodes");
}
TEST(Cse, MergesIdenticalConstants) {
  expectPassOutput("cse", "merges_identical_constants");
}
TEST(Cse, DoesNotMergeDifferentAttributes) {
  expectPassOutput("cse", "does_not_merge_different_attributes");
}
TEST(Cse, DoesNotMergeRandomOps) {
  expectPassOutput("cse", "does_not_merge_random_ops");
}
TEST(Cse, DoesNotMergeNodesWithRegions) {
  expectPassOutput("cse", "does_not_merge_nodes_with_regions");
}
TEST(Cse, DoesNotMergeTwoModelOutputs) {
  expectPassOutput("cse", "does_not_merge_two_model_outputs");
}

TEST(FoldConstants, FoldsStaticShapeChains) {
  expectPassOutput("fold-constants", "folds_static_shape_chains");
}
TEST(FoldConstants, FoldsShapeAndSizeOfStaticTypes) {
  expectPassOutput("fold-constants", "folds_shape_and_size_of_static_types");
}
TEST(FoldConstants, FoldsArithmeticOnConstants) {
  expectPassOutput("fold-constants", "folds_arithmetic_on_constants");
}
TEST(FoldConstants, FoldsInsideRegions) {
  expectPassOutput("fold-constants", "folds_inside_regions");
}
TEST(FoldConstants, DoesNotFoldLargeOutputs) {
  expectPassOutput("fold-constants", "does_not_fold_large_outputs");
}
TEST(FoldConstants, DoesNotFoldRandomOps) {
  expectPassOutput("fold-constants", "does_not_fold_random_ops");
}
TEST(FoldConstants, DoesNotFoldNodesWithNonConstantInputs) {
  expectPassOutput("fold-constants", "does_not_fold_nodes_with_non_constant_inputs");
}
TEST(FoldConstants, FoldsStaticPartsOfSymbolicShapes) {
  expectPassOutput("fold-constants", "folds_static_parts_of_symbolic_shapes");
}
TEST(FoldConstants, FoldsSmallSlicesOfSharedConstants) {
  expectPassOutput("fold-constants", "folds_small_slices_of_shared_constants");
}

// The size rule needs constants over 16 KiB, too big to write as lit files:
// these build the text with a generated hex blob and compare the result
// printed with weights elided.
std::string weightText(const std::string &name, int64_t rows, int64_t cols) {
  static const char *digits = "0123456789abcdef";
  std::string hex;
  for (int64_t i = 0; i < rows * cols; ++i) {
    float v = static_cast<float>(i % 7) - 3.0f; // not a splat
    unsigned char bytes[4];
    std::memcpy(bytes, &v, 4);
    for (unsigned char b : bytes) {
      hex += digits[b >> 4];
      hex += digits[b & 15];
    }
  }
  std::string type = "f32[" + std::to_string(rows) + "," + std::to_string(cols) + "]";
  return "  %" + name + " = Constant() {value = dense<" + type + "> hex\"" + hex + "\"} : " + type +
         "\n";
}

std::string foldedWithWeightsElided(const std::string &text) {
  auto model = parseModel(text, "size-rule");
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return "";
  Status s = runPipeline(*model, {"fold-constants"});
  EXPECT_TRUE(s.ok()) << s.error().message;
  PrintOptions options;
  options.elideLargeConstants = true;
  return printModel(*model, options);
}

// Silero's case: an LSTM weight [512,128] that the LSTM keeps reading is
// sliced per gate into [128,128] (64 KiB): folding would copy it.
TEST(FoldConstants, DoesNotDuplicateLargeSharedWeights) {
  std::string text = "graph @main(%x: f32[512,128]) -> (%y, %z) {\n" + weightText("w", 512, 128) +
                     "  %y = Add(%x, %w) : f32[512,128]\n"
                     "  %start = Constant() {value = dense<i64[1]> [128]} : i64[1]\n"
                     "  %end = Constant() {value = dense<i64[1]> [256]} : i64[1]\n"
                     "  %axes = Constant() {value = dense<i64[1]> [0]} : i64[1]\n"
                     "  %z = Slice(%w, %start, %end, %axes) : f32[128,128]\n"
                     "}\n";
  EXPECT_EQ(foldedWithWeightsElided(text),
            "kiln.model\n"
            "graph @main(%x: f32[512,128]) -> (%y, %z) {\n"
            "  %w = Constant() {value = dense<f32[512,128]> elided} : f32[512,128]\n"
            "  %y = Add(%x, %w) : f32[512,128]\n"
            "  %start = Constant() {value = dense<i64[1]> [128]} : i64[1]\n"
            "  %end = Constant() {value = dense<i64[1]> [256]} : i64[1]\n"
            "  %axes = Constant() {value = dense<i64[1]> [0]} : i64[1]\n"
            "  %z = Slice(%w, %start, %end, %axes) : f32[128,128]\n"
            "}\n");
}

// Only the Transpose reads %w: the folded [160,128] takes the place of the
// [128,160] it frees, so the model does not grow and the Transpose folds.
TEST(FoldConstants, FoldsLargeResultsThatFreeTheirInputs) {
  std::string text = "graph @main(%x: f32[2,160]) -> (%y) {\n" + weightText("w", 128, 160) +
                     "  %t = Transpose(%w) : f32[160,128]\n"
                     "  %y = MatMul(%x, %t) : f32[2,128]\n"
                     "}\n";
  EXPECT_EQ(foldedWithWeightsElided(text),
            "kiln.model\n"
            "graph @main(%x: f32[2,160]) -> (%y) {\n"
            "  %t = Constant() {value = dense<f32[160,128]> elided} : f32[160,128]\n"
            "  %y = MatMul(%x, %t) : f32[2,128]\n"
            "}\n");
}

TEST(Canonicalize, CancelsSqueezeUnsqueezePairs) {
  expectPassOutput("canonicalize", "cancels_squeeze_unsqueeze_pairs");
}
TEST(Canonicalize, KeepsModelOutputNames) {
  expectPassOutput("canonicalize", "keeps_model_output_names");
}
TEST(Canonicalize, MergesReshapes) {
  expectPassOutput("canonicalize", "merges_reshapes");
}
TEST(Canonicalize, MergesTransposes) {
  expectPassOutput("canonicalize", "merges_transposes");
}
TEST(Canonicalize, RemovesIdentityAndInferenceDropout) {
  expectPassOutput("canonicalize", "removes_identity_and_inference_dropout");
}
TEST(Canonicalize, RemovesNeutralArithmetic) {
  expectPassOutput("canonicalize", "removes_neutral_arithmetic");
}
TEST(Canonicalize, SquaresAsMul) {
  expectPassOutput("canonicalize", "squares_as_mul");
}
TEST(Canonicalize, RemovesNoopCasts) {
  expectPassOutput("canonicalize", "removes_noop_casts");
}
TEST(Canonicalize, RemovesNoopExpandAndSingleConcat) {
  expectPassOutput("canonicalize", "removes_noop_expand_and_single_concat");
}
TEST(Canonicalize, TurnsStaticViewsIntoReshape) {
  expectPassOutput("canonicalize", "turns_static_views_into_reshape");
}
TEST(Canonicalize, DoesNotCancelSqueezeUnsqueezeOnOtherAxes) {
  expectPassOutput("canonicalize", "does_not_cancel_squeeze_unsqueeze_on_other_axes");
}
TEST(Canonicalize, DoesNotMergeReshapesThatCopyDims) {
  expectPassOutput("canonicalize", "does_not_merge_reshapes_that_copy_dims");
}
TEST(Canonicalize, DoesNotRemoveBroadcastingExpand) {
  expectPassOutput("canonicalize", "does_not_remove_broadcasting_expand");
}
TEST(Canonicalize, DoesNotRemoveBroadcastingNeutralOperands) {
  expectPassOutput("canonicalize", "does_not_remove_broadcasting_neutral_operands");
}
TEST(Canonicalize, DoesNotRemoveTrainingDropout) {
  expectPassOutput("canonicalize", "does_not_remove_training_dropout");
}
TEST(Canonicalize, DoesNotRenameModelOutputs) {
  expectPassOutput("canonicalize", "does_not_rename_model_outputs");
}
TEST(Canonicalize, DoesNotReshapeViewsWithTwoSymbolicDims) {
  expectPassOutput("canonicalize", "does_not_reshape_views_with_two_symbolic_dims");
}

TEST(FuseElementwise, ConstantNodesJoinTheChain) {
  expectPassOutput("fuse-elementwise", "constant_nodes_join_the_chain");
}

TEST(FuseBatchnorm, DecomposesUnfoldableIntoMulAdd) {
  expectPassOutput("fuse-batchnorm", "decomposes_unfoldable_into_mul_add");
}
TEST(FuseBatchnorm, FoldsIntoConv) {
  expectPassOutput("fuse-batchnorm", "folds_into_conv");
}
TEST(FuseBatchnorm, FoldsIntoConvWithoutBias) {
  expectPassOutput("fuse-batchnorm", "folds_into_conv_without_bias");
}
TEST(FuseBatchnorm, FoldsThroughABiasAdd) {
  expectPassOutput("fuse-batchnorm", "folds_through_a_bias_add");
}
TEST(FuseBatchnorm, FoldsThroughAMatMulBiasAdd) {
  expectPassOutput("fuse-batchnorm", "folds_through_a_matmul_bias_add");
}
TEST(FuseBatchnorm, FoldsIntoGemm) {
  expectPassOutput("fuse-batchnorm", "folds_into_gemm");
}
TEST(FuseBatchnorm, FoldsIntoGroupedConvTranspose) {
  expectPassOutput("fuse-batchnorm", "folds_into_grouped_conv_transpose");
}
TEST(FuseBatchnorm, FoldsIntoMatmul) {
  expectPassOutput("fuse-batchnorm", "folds_into_matmul");
}
TEST(FuseBatchnorm, DoesNotFoldIntoSharedProducers) {
  expectPassOutput("fuse-batchnorm", "does_not_fold_into_shared_producers");
}
TEST(FuseBatchnorm, DoesNotFoldTrainingOrNonConstantBatchnorm) {
  expectPassOutput("fuse-batchnorm", "does_not_fold_training_or_non_constant_batchnorm");
}

TEST(RecognizeLayerNorm, RecognizesLayernormOverTrailingAxes) {
  expectPassOutput("recognize-layernorm", "recognizes_layernorm_over_trailing_axes");
}
TEST(RecognizeLayerNorm, RecognizesPaddleLayernorm) {
  expectPassOutput("recognize-layernorm", "recognizes_paddle_layernorm");
}
TEST(RecognizeLayerNorm, DoesNotRecognizeNonTrailingOrSharedChains) {
  expectPassOutput("recognize-layernorm", "does_not_recognize_non_trailing_or_shared_chains");
}

TEST(RecognizeGelu, RecognizesErfGelu) {
  expectPassOutput("recognize-gelu", "recognizes_erf_gelu");
}
TEST(RecognizeGelu, RecognizesTanhGelu) {
  expectPassOutput("recognize-gelu", "recognizes_tanh_gelu");
}
TEST(RecognizeGelu, DoesNotRecognizeNearMisses) {
  expectPassOutput("recognize-gelu", "does_not_recognize_near_misses");
}
TEST(RecognizeGelu, RecognizesF16GeluWithRoundedConstants) {
  expectPassOutput("recognize-gelu", "recognizes_f16_gelu_with_rounded_constants");
}

TEST(RecognizeHardSwish, RecognizesHardswish) {
  expectPassOutput("recognize-hardswish", "recognizes_hardswish");
}
TEST(RecognizeHardSwish, DoesNotRecognizeHardsigmoidGates) {
  expectPassOutput("recognize-hardswish", "does_not_recognize_hardsigmoid_gates");
}

TEST(RecognizeSoftmax, RecognizesSoftmax) {
  expectPassOutput("recognize-softmax", "recognizes_softmax");
}
TEST(RecognizeSoftmax, DoesNotRecognizeOtherReductions) {
  expectPassOutput("recognize-softmax", "does_not_recognize_other_reductions");
}

TEST(RecognizeAttention, RecognizesMultiHeadAttentionWithPaddingMask) {
  expectPassOutput("recognize-attention", "recognizes_multi_head_attention_with_padding_mask");
}
TEST(RecognizeAttention, Recognizes3dAttentionWithScaledQuery) {
  expectPassOutput("recognize-attention", "recognizes_3d_attention_with_scaled_query");
}
TEST(RecognizeAttention, RecognizesAttentionOfUnknownShapesWithRowMaxShift) {
  expectPassOutput("recognize-attention",
                   "recognizes_attention_of_unknown_shapes_with_row_max_shift");
}
TEST(RecognizeAttention, DoesNotRecognizeOtherSoftmaxChains) {
  expectPassOutput("recognize-attention", "does_not_recognize_other_softmax_chains");
}

TEST(LegalizePrecision, WidensConvAndFoldsF16Weights) {
  expectPassOutput("legalize-precision", "widens_conv_and_folds_f16_weights");
}
TEST(LegalizePrecision, WidensASharedInputOnce) {
  expectPassOutput("legalize-precision", "widens_a_shared_input_once");
}
TEST(LegalizePrecision, KeepsNonFloatOperandsAndOutputs) {
  expectPassOutput("legalize-precision", "keeps_non_float_operands_and_outputs");
}
TEST(LegalizePrecision, LeavesElementwiseMovementAndF32OpsAlone) {
  expectPassOutput("legalize-precision", "leaves_elementwise_movement_and_f32_ops_alone");
}
TEST(LegalizePrecision, WidensOpsInsideRegions) {
  expectPassOutput("legalize-precision", "widens_ops_inside_regions");
}

} // namespace
} // namespace kiln
