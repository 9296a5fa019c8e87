// Loop, Scan and SequenceMap (runtime/cpu/loop_steps.h) through the
// artifact against the reference interpreter: every M / cond form, carried
// tensors, sequences and optionals, scan outputs (zero iterations too),
// Scan's axes and directions, captured outer values, nested bodies.
#include "value_check.h"

#include "op_check.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing::expectArtifactMatchesInterpreterValues;
using testing::randomTensor;

RtValue i64(int64_t v) { return RtValue(Tensor::scalar<int64_t>(v)); }
RtValue boolean(bool v) { return RtValue(Tensor::scalar<bool>(v)); }

// y accumulates x[iter] (a captured outer value) and the running sums are
// stacked; the body also counts down and stops when told to.
const char *kAccumulateLoop = R"(kiln.model opsets {"" = 16}
graph @g(%m: i64[], %c: bool[], %y0: f32[2], %x: f32[6,2], %stop: i64[]) -> (%y, %n, %sums, %iters) {
  %zero = Constant() {value = dense<i64[]> [0]} : i64[]
  %y, %n, %sums, %iters = Loop(%m, %c, %y0, %zero) {body = graph @body(%i: i64[], %cin: bool[], %yin: f32[2], %nin: i64[]) -> (%cout, %yout, %nout, %yout, %i) {
    %one = Constant() {value = dense<i64[]> [1]} : i64[]
    %row = Gather(%x, %i) {axis = 0} : f32[2]
    %yout = Add(%yin, %row) : f32[2]
    %nout = Add(%nin, %one) : i64[]
    %cout = Less(%nout, %stop) : bool[]
  }} : f32[2], i64[], f32[?,2], i64[?]
})";

TEST(LoopSteps, LoopStopsAtTheTripCountOrTheBodysCondition) {
  const Tensor x = randomTensor(DType::F32, {6, 2}, 1);
  const Tensor y0 = randomTensor(DType::F32, {2}, 2);
  for (int64_t m : {0, 1, 4, 6})
    for (bool c : {false, true})
      for (int64_t stop : {2, 100}) {
        SCOPED_TRACE(::testing::Message() << "M=" << m << " cond=" << c << " stop=" << stop);
        expectArtifactMatchesInterpreterValues(
            kAccumulateLoop, {i64(m), boolean(c), RtValue(y0), RtValue(x), i64(stop)});
      }
}

TEST(LoopSteps, LoopPastTheEndOfTheDataFailsLikeTheInterpreter) {
  expectArtifactMatchesInterpreterValues(
      kAccumulateLoop, {i64(7), boolean(true), RtValue(randomTensor(DType::F32, {2}, 2)),
                        RtValue(randomTensor(DType::F32, {6, 2}, 1)), i64(100)});
}

// ONNX's loop13 form: a sequence carried through the loop, grown by one
// slice per iteration; and loop16's: an optional sequence, empty at first.
TEST(LoopSteps, LoopCarriesSequencesAndOptionals) {
  const char *model = R"(kiln.model opsets {"" = 16}
graph @g(%m: i64[], %seq0: seq<f32[*]>, %opt0: opt<seq<f32[*]>>) -> (%seq, %opt) {
  %t = Constant() {value = dense<bool[]> [true]} : bool[]
  %seq, %opt = Loop(%m, %t, %seq0, %opt0) {body = graph @body(%i: i64[], %cin: bool[], %s: seq<f32[*]>, %o: opt<seq<f32[*]>>) -> (%cin, %s2, %o2) {
    %x = Constant() {value = dense<f32[5]> [1.0, 2.0, 3.0, 4.0, 5.0]} : f32[5]
    %one = Constant() {value = dense<i64[1]> [1]} : i64[1]
    %start = Constant() {value = dense<i64[1]> [0]} : i64[1]
    %ax = Constant() {value = dense<i64[1]> [0]} : i64[1]
    %e = Add(%i, %one) : i64[1]
    %slice = Slice(%x, %start, %e) : f32[?]
    %s2 = SequenceInsert(%s, %slice) : seq<f32[*]>
    %has = OptionalHasElement(%o) : bool[]
    %none = Not(%has) : bool[]
    %inner = If(%none) {else_branch = graph @e() -> (%got) {
      %got = OptionalGetElement(%o) : seq<f32[*]>
    }, then_branch = graph @t() -> (%fresh) {
      %c = Constant() {value = dense<f32[]> [0.0]} : f32[]
      %fresh = SequenceConstruct(%c) : seq<f32[*]>
    }} : seq<f32[*]>
    %grown = SequenceInsert(%inner, %slice) : seq<f32[*]>
    %o2 = Optional(%grown) : opt<seq<f32[*]>>
  }} : seq<f32[*]>, opt<seq<f32[*]>>
})";
  for (int64_t m : {0, 1, 3})
    expectArtifactMatchesInterpreterValues(
        model, {i64(m), RtValue::ofSequence({}), RtValue::ofOptional(nullptr)});
}

// Scan over both axes and both directions, with a state and two scan
// outputs stacked along different axes.
TEST(LoopSteps, ScanWithEveryAxisAndDirection) {
  const Tensor x = randomTensor(DType::F32, {3, 4}, 3);
  const Tensor s0 = randomTensor(DType::F32, {4}, 4);
  for (int inAxis : {0, 1})
    for (int inDir : {0, 1})
      for (int outAxis : {0, 1, -1})
        for (int outDir : {0, 1}) {
          SCOPED_TRACE(::testing::Message() << "in axis " << inAxis << " dir " << inDir
                                            << ", out axis " << outAxis << " dir " << outDir);
          const std::string slice = inAxis == 0 ? "f32[4]" : "f32[3]";
          const std::string state = inAxis == 0 ? "f32[4]" : "f32[3]";
          const std::string model =
              R"(kiln.model opsets {"" = 16}
graph @g(%s0: )" + state + R"(, %x: f32[3,4]) -> (%s, %ys, %twice) {
  %s, %ys, %twice = Scan(%s0, %x) {body = graph @body(%sin: )" + state + R"(, %xi: )" + slice +
              R"() -> (%sout, %sout, %dbl) {
    %sout = Add(%sin, %xi) : )" + state + R"(
    %dbl = Add(%xi, %xi) : )" + slice + R"(
  }, num_scan_inputs = 1, scan_input_axes = [)" + std::to_string(inAxis) +
              "], scan_input_directions = [" + std::to_string(inDir) +
              "], scan_output_axes = [0, " + std::to_string(outAxis) +
              "], scan_output_directions = [0, " + std::to_string(outDir) + R"(]} : )" + state +
              R"(, f32[*], f32[*]
})";
          const Tensor init = inAxis == 0 ? s0 : randomTensor(DType::F32, {3}, 5);
          expectArtifactMatchesInterpreterValues(model, {RtValue(init), RtValue(x)});
        }
}

TEST(LoopSteps, ScanOfZeroStepsGivesEmptyOutputsOfTheDeclaredShape) {
  const char *model = R"(kiln.model opsets {"" = 16}
graph @g(%s0: f32[2], %x: f32[n,2]) -> (%s, %ys) {
  %s, %ys = Scan(%s0, %x) {body = graph @body(%sin: f32[2], %xi: f32[2]) -> (%sout, %sout) {
    %sout = Add(%sin, %xi) : f32[2]
  }, num_scan_inputs = 1, scan_output_axes = [1]} : f32[2], f32[2,n]
})";
  for (int64_t n : {0, 3})
    expectArtifactMatchesInterpreterValues(
        model, {RtValue(randomTensor(DType::F32, {2}, 6)), RtValue(randomTensor(DType::F32, {n, 2}, 7))});
}

// SequenceMap with a sequence and a tensor input (the tensor goes to every
// iteration) and elements of different lengths.
TEST(LoopSteps, SequenceMapRunsTheBodyPerElement) {
  const char *model = R"(kiln.model opsets {"" = 17}
graph @g(%xs: seq<f32[N]>, %b: f32[1]) -> (%ys, %shapes) {
  %ys, %shapes = SequenceMap(%xs, %b) {body = graph @body(%x: f32[N], %bb: f32[1]) -> (%y, %shape) {
    %y = Add(%x, %bb) : f32[N]
    %shape = Shape(%x) : i64[1]
  }} : seq<f32[N]>, seq<i64[1]>
})";
  std::vector<Tensor> xs = {randomTensor(DType::F32, {3}, 8), randomTensor(DType::F32, {5}, 9),
                            randomTensor(DType::F32, {0}, 10)};
  expectArtifactMatchesInterpreterValues(
      model, {RtValue::ofSequence(xs), RtValue(randomTensor(DType::F32, {1}, 11))});
  expectArtifactMatchesInterpreterValues(
      model, {RtValue::ofSequence({}), RtValue(randomTensor(DType::F32, {1}, 11))});
}

// A loop inside a loop: the inner body reads the outer body's value and the
// main graph's.
TEST(LoopSteps, NestedLoopsCaptureValuesOfEveryEnclosingGraph) {
  const char *model = R"(kiln.model opsets {"" = 16}
graph @g(%m: i64[], %k: f32[]) -> (%total) {
  %t = Constant() {value = dense<bool[]> [true]} : bool[]
  %z = Constant() {value = dense<f32[]> [0.0]} : f32[]
  %total = Loop(%m, %t, %z) {body = graph @outer(%i: i64[], %c: bool[], %acc: f32[]) -> (%c, %acc2) {
    %fi = Cast(%i) {to = 1} : f32[]
    %inner = Loop(%i, %t, %acc) {body = graph @inner(%j: i64[], %c2: bool[], %a: f32[]) -> (%c2, %a2) {
      %p = Mul(%fi, %k) : f32[]
      %a2 = Add(%a, %p) : f32[]
    }} : f32[]
    %acc2 = Add(%inner, %k) : f32[]
  }} : f32[]
})";
  for (int64_t m : {0, 1, 4})
    expectArtifactMatchesInterpreterValues(model, {i64(m), RtValue(Tensor::scalar<float>(1.5f))});
}


// The carried value is a view (Reshape) of the buffer the body's arena
// gives Transpose's output: the next iteration's Transpose reads it and
// must not be handed the same buffer to write.
TEST(LoopSteps, ACarriedViewOfTheBodysArenaIsNotOverwritten) {
  const char *model = R"(kiln.model opsets {"" = 16}
graph @g(%m: i64[], %y0: f32[3,2]) -> (%y) {
  %t = Constant() {value = dense<bool[]> [true]} : bool[]
  %y = Loop(%m, %t, %y0) {body = graph @body(%i: i64[], %c: bool[], %yin: f32[3,2]) -> (%c, %yout) {
    %shape = Constant() {value = dense<i64[2]> [3, 2]} : i64[2]
    %tr = Transpose(%yin) {perm = [1, 0]} : f32[2,3]
    %yout = Reshape(%tr, %shape) : f32[3,2]
  }} : f32[3,2]
})";
  for (int64_t m : {1, 2, 5})
    expectArtifactMatchesInterpreterValues(model,
                                           {i64(m), RtValue(randomTensor(DType::F32, {3, 2}, 12))});
}

} // namespace
} // namespace kiln
