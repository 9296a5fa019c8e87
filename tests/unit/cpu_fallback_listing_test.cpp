// The compiler lists every node it leaves to the interpreter (transitional,
// until every op compiles): one line per fallback in CompileStats::interpNodes
// naming the node, its op, its input types and why no compiled step took it.
// `kiln inspect --target cpu` prints them and scripts/corpus_report.py
// collects them per model. Which ops still fall back changes as lowerings
// land, so the test checks the listing's contract on whatever falls back.
#include "backend/cpu/compiler.h"
#include "ir/parser.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(CpuFallbackListing, EveryInterpreterFallbackIsListedWithItsNodeAndInputTypes) {
  auto model = parseModel(R"(graph @g(%a: f32[n,3], %w: f32[4,3], %b: f32[4]) -> (%y) {
  %g = Gemm(%a, %w, %b) {transB = 1} name "fc" : f32[n,4]
  %s = Size(%g) name "size" : i64[]
  %f = Cast(%s) {to = 1} name "cast" : f32[]
  %y = Mul(%g, %f) name "scale" : f32[n,4]
})",
                          "fallbacks.kir");
  ASSERT_TRUE(model.ok()) << model.error().message;
  ASSERT_TRUE(verifyModel(*model).ok());
  auto compiled = cpu::CompiledModel::compile(std::move(*model), cpu::CompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const cpu::CompileStats &stats = (*compiled)->stats();
  ASSERT_EQ(stats.interpNodes.size(), static_cast<size_t>(stats.interpSteps));
  for (const std::string &line : stats.interpNodes) {
    EXPECT_EQ(line.rfind("node '", 0), 0u) << line;
    EXPECT_NE(line.find("): "), std::string::npos) << line << ": no reason given";
    if (line.find("'fc' (Gemm)") != std::string::npos)
      EXPECT_NE(line.find("(f32[n,3], f32[4,3], f32[4])"), std::string::npos) << line;
  }
}

} // namespace
} // namespace kiln
