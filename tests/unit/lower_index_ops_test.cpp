// Index and data-movement lowerings (lower/index_ops.cpp) through the
// artifact, against the interpreter (op_check.h), on random inputs.
#include "op_check.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing::expectArtifactMatchesInterpreter;
using testing::randomTensor;

TEST(LowerIndexOps, TriluEveryDiagonalOffsetOnABatchOfMatrices) {
  for (int upper = 0; upper <= 1; ++upper)
    for (int64_t k : {-4, -1, 0, 2, 5}) {
      SCOPED_TRACE(::testing::Message() << "upper=" << upper << " k=" << k);
      const std::string model = R"(kiln.model opsets {"" = 17}
graph @g(%x: f32[2,3,4,5], %k: i64[]) -> (%y) {
  %y = Trilu(%x, %k) {upper = )" + std::to_string(upper) + R"(} : f32[2,3,4,5]
})";
      expectArtifactMatchesInterpreter(
          model, {randomTensor(DType::F32, {2, 3, 4, 5}, 7), Tensor::scalar<int64_t>(k)});
    }
}

TEST(LowerIndexOps, TriluWithSymbolicDimsAndIntegers) {
  const std::string model = R"(kiln.model opsets {"" = 17}
graph @g(%x: i32[n,m]) -> (%y) {
  %y = Trilu(%x) {upper = 0} : i32[n,m]
})";
  for (int64_t n : {1, 3, 7})
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::I32, {n, 5}, n, -100, 100)});
}

} // namespace
} // namespace kiln
