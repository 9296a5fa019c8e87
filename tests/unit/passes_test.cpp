// Graph pass tests: each parses tests/lit/passes/<pass>/<case>.kir, runs that
// one pass through the pipeline driver (so the verifier runs after it),
// prints the result and compares it with <case>.expected.kir. The first lines
// of each input say what the case checks. A second run of the pass on its own
// output must change nothing.
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(allPassNames(), (std::vector<std::string>{"fold-constants", "cse", "dce"}));
  for (const std::string &name : allPassNames()) EXPECT_EQ(findPass(name)->name(), name);
  EXPECT_EQ(findPass("no-such-pass"), nullptr);
}

TEST(PassPipeline, RejectsUnknownPassesListingTheAvailableOnes) {
  Model model;
  Status s = runPipeline(model, {"dce", "fold"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "unknown pass 'fold' (available: fold-constants, cse, dce)");
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

} // namespace
} // namespace kiln
