// Values whose rank the graph does not know: an If whose branches give
// different ranks (TorchScript's "squeeze when the batch is 1" exports, as
// in silero VAD). Elementwise ops over them compile to kernels padded to a
// fixed rank that take the output's rank from the run; copy steps work on
// run-time shapes. Both branches run from one artifact, against the
// interpreter.
#include "op_check.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing::expectArtifactMatchesInterpreter;
using testing::randomTensor;

const char *kModel = R"(kiln.model opsets {"" = 17}
graph @g(%c: bool[], %x: f32[2,3,4], %y: f32[4]) -> (%z, %w) {
  %r = If(%c) {else_branch = graph @e() -> (%x) {
  }, then_branch = graph @t() -> (%s) {
    %shape = Constant() {value = dense<i64[2]> [6, 4]} : i64[2]
    %s = Reshape(%x, %shape) : f32[6,4]
  }} : f32[*]
  %z = Add(%r, %y) : f32[*]
  %start = Constant() {value = dense<i64[1]> [-1]} : i64[1]
  %end = Constant() {value = dense<i64[1]> [-9223372036854775807]} : i64[1]
  %axis = Constant() {value = dense<i64[1]> [-1]} : i64[1]
  %w = Slice(%z, %start, %end, %axis, %start) : f32[*]
})";

TEST(UnknownRank, ElementwiseAndSliceFollowTheRankOfEachRun) {
  for (bool c : {true, false}) {
    SCOPED_TRACE(c ? "then: rank 2" : "else: rank 3");
    expectArtifactMatchesInterpreter(kModel, {Tensor::scalar<bool>(c),
                                              randomTensor(DType::F32, {2, 3, 4}, 1),
                                              randomTensor(DType::F32, {4}, 2)});
  }
}

} // namespace
} // namespace kiln
