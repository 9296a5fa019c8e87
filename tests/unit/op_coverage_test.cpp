// Every op of the table compiles for the CPU (`kiln ops`), and only ops that
// are inherently dynamic, tiny or non-numeric run as host ops alone.
#include "backend/cpu/coverage.h"
#include "ir/op.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace kiln::cpu {
namespace {

bool has(const std::vector<Way> &ways, Way w) {
  return std::find(ways.begin(), ways.end(), w) != ways.end();
}

TEST(OpCoverage, EveryOpOfTheTableCompilesForTheCpu) {
  std::vector<std::string> missing;
  for (const OpSchema &schema : allOpSchemas())
    if (!isCompilerOp(schema.kind) && cpuWaysOf(schema.kind).empty())
      missing.emplace_back(schema.name);
  EXPECT_TRUE(missing.empty()) << "ops with no CPU lowering: " << ::testing::PrintToString(missing);
}

// The ops that may run only as host ops. Anything else found host-only is a
// numeric op that slipped past the Kernel IR lowerings (issue: host ops only
// for what is inherently dynamic or tiny).
const std::set<std::string> &hostOnlyAllowed() {
  static const std::set<std::string> ops = {
      // output shapes that depend on the data
      "NonZero", "Unique", "Compress", "NonMaxSuppression", "TopK",
      // shape arithmetic (a few int64s)
      "Shape", "Size",
      // tiny: a determinant per small matrix, done in f64 by LU
      "Det",
      // random draws follow the interpreter's generator bit for bit
      "RandomUniformLike", "RandomNormalLike", "Bernoulli",
      // strings, sequences and optionals
      "StringNormalizer", "TfIdfVectorizer", "SequenceConstruct", "SequenceEmpty", "SequenceAt",
      "SequenceInsert", "SequenceErase", "SequenceLength", "SplitToSequence",
      "ConcatFromSequence", "Optional", "OptionalHasElement", "OptionalGetElement"};
  return ops;
}

TEST(OpCoverage, HostOnlyOpsAreTheDynamicTinyOrNonNumericOnes) {
  for (const OpSchema &schema : allOpSchemas()) {
    const std::vector<Way> ways = cpuWaysOf(schema.kind);
    const bool hostOnly = ways.size() == 1 && ways[0] == Way::HostOp;
    EXPECT_EQ(hostOnly, hostOnlyAllowed().count(std::string(schema.name)) != 0)
        << schema.name << (hostOnly ? " runs only as a host op" : " is listed as host-only but is not");
  }
}

TEST(OpCoverage, ViewOpsAreZeroCopy) {
  for (const char *name : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
    EXPECT_TRUE(has(cpuWaysOf(*opFromName(name)), Way::View)) << name;
}

TEST(OpCoverage, ComputeOpsHaveMicrokernels) {
  for (const char *name : {"MatMul", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LSTM"})
    EXPECT_TRUE(has(cpuWaysOf(*opFromName(name)), Way::Microkernel)) << name;
  // Gemm and Einsum become MatMul (with transposes and an epilogue) first.
  for (const char *name : {"Gemm", "Einsum"})
    EXPECT_TRUE(has(cpuWaysOf(*opFromName(name)), Way::Decomposed)) << name;
}

} // namespace
} // namespace kiln::cpu
