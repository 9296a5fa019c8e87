// Data-movement lowerings (lower/movement_ops.cpp) through the artifact,
// against the interpreter (op_check.h), on random inputs. Slice, Concat,
// Split and Transpose also have memcpy copy steps; their tests run with
// copy steps off too, so the lowering (the copy steps' general variant)
// is checked on every form, not only on those the copy steps refuse.
#include "op_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kiln {
namespace {

using testing::artifactRunError;
using testing::expectArtifactMatchesInterpreter;
using testing::OpCheckOptions;
using testing::randomTensor;

std::string str(int64_t v) {
  return std::to_string(v);
}

std::string model(const std::string &params, const std::string &outputs, const std::string &body) {
  return R"(kiln.model opsets {"" = 18}
graph @g()" +
         params + ") -> (" + outputs + ") {\n" + body + "\n}";
}

Tensor i64s(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return Tensor::fromVector(v, {n});
}

// Runs the check with copy steps on and off.
void expectBothWays(const std::string &m, const std::vector<Tensor> &inputs) {
  expectArtifactMatchesInterpreter(m, inputs);
  OpCheckOptions o;
  o.specializedSteps = false;
  expectArtifactMatchesInterpreter(m, inputs, o);
}

// ---- Slice ------------------------------------------------------------------------

TEST(LowerMovementOps, SliceEveryFormWithRunTimeLists) {
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const int64_t big = INT64_MAX, small = INT64_MIN;
  const std::vector<Case> cases = {
      {{0, 1}, {3, 5}, {0, 1}, {1, 1}},
      {{5, -1}, {0, -8}, {0, 1}, {-1, -2}},        // negative steps
      {{-1}, {small}, {2}, {-1}},                  // to before the first element
      {{2}, {big}, {-2}, {3}},                     // INT64_MAX end, negative axis
      {{-100, 100}, {100, -100}, {1, 2}, {1, -1}}, // clamping
      {{1}, {big}, {0}, {big}},                    // a huge step takes one element
      {{4}, {0}, {0}, {small}},                    // so does INT64_MIN
      {{3, 2}, {1, 2}, {2, 0}, {1, 1}},            // empty results
      {{0, 0, 0}, {6, 7, 5}, {0, 1, 2}, {2, 3, 4}},
  };
  for (const Case &c : cases) {
    const int64_t k = int64_t(c.starts.size());
    const std::string list = "i64[" + str(k) + "]";
    const std::string m =
        model("%x: f32[6,7,5], %s: " + list + ", %e: " + list + ", %a: " + list + ", %t: " + list,
              "%y", "  %y = Slice(%x, %s, %e, %a, %t) : f32[?,?,?]");
    expectBothWays(m, {randomTensor(DType::F32, {6, 7, 5}, 1), i64s(c.starts), i64s(c.ends),
                       i64s(c.axes), i64s(c.steps)});
  }
}

TEST(LowerMovementOps, SliceWithConstantListsSymbolicDimsAndDefaultAxes) {
  const std::string m = model("%x: i32[n,8]", "%y",
                              R"(  %s = Constant() {value = dense<i64[2]>[1, -2]} : i64[2]
  %e = Constant() {value = dense<i64[2]>[9223372036854775807, 0]} : i64[2]
  %t = Constant() {value = dense<i64[2]>[2, -3]} : i64[2]
  %y = Slice(%x, %s, %e, _, %t) : i32[?,?])");
  for (int64_t n : {0, 1, 5, 9}) expectBothWays(m, {randomTensor(DType::I32, {n, 8}, n, -50, 50)});
}

TEST(LowerMovementOps, SliceWithAZeroStepIsARunTimeError) {
  const std::string m = model("%x: f32[4], %s: i64[1], %e: i64[1], %a: i64[1], %t: i64[1]", "%y",
                              "  %y = Slice(%x, %s, %e, %a, %t) : f32[?]");
  const std::string error = artifactRunError(
      m, {randomTensor(DType::F32, {4}, 1), i64s({0}), i64s({4}), i64s({0}), i64s({0})});
  EXPECT_NE(error.find("is 0"), std::string::npos) << error;
}

// ---- Concat and Split -------------------------------------------------------------------

TEST(LowerMovementOps, ConcatOnEveryAxisOfThreeInputs) {
  for (int axis : {0, 1, 2, -1, -3}) {
    SCOPED_TRACE(::testing::Message() << "axis=" << axis);
    const int a = axis < 0 ? axis + 3 : axis;
    Shape64 s0 = {2, 3, 4}, s1 = s0, s2 = s0;
    s1[size_t(a)] = 1;
    s2[size_t(a)] = 0;
    auto type = [](const Shape64 &s) {
      return "f16[" + str(s[0]) + "," + str(s[1]) + "," + str(s[2]) + "]";
    };
    Shape64 out = s0;
    out[size_t(a)] += 1;
    const std::string m =
        model("%a: " + type(s0) + ", %b: " + type(s1) + ", %c: " + type(s2), "%y",
              "  %y = Concat(%a, %b, %c, %a) {axis = " + str(axis) + "} : f16[?,?,?]");
    expectBothWays(m, {randomTensor(DType::F16, s0, 1), randomTensor(DType::F16, s1, 2),
                       randomTensor(DType::F16, s2, 3)});
  }
}

TEST(LowerMovementOps, ConcatSkipsAOneDimensionalEmptyPlaceholder) {
  const std::string m = model("%a: i64[2,3], %e: i64[0], %b: i64[n,3]", "%y",
                              "  %y = Concat(%a, %e, %b) {axis = 0} : i64[?,3]");
  for (int64_t n : {0, 4})
    expectBothWays(m, {randomTensor(DType::I64, {2, 3}, 1, -9, 9), Tensor(DType::I64, {0}),
                       randomTensor(DType::I64, {n, 3}, 2, -9, 9)});
}

TEST(LowerMovementOps, SplitBySizesInput) {
  const std::string m =
      model("%x: f32[3,7], %s: i64[3]", "%a, %b, %c",
            "  %a, %b, %c = Split(%x, %s) {axis = 1} : f32[3,?], f32[3,?], f32[3,?]");
  for (auto sizes : std::vector<std::vector<int64_t>>{{2, 4, 1}, {0, 7, 0}, {3, 0, 4}})
    expectBothWays(m, {randomTensor(DType::F32, {3, 7}, 1), i64s(sizes)});
}

TEST(LowerMovementOps, SplitEvenlyWithAnUnevenLastChunk) {
  for (int64_t n : {7, 9, 2}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const std::string byCount = model("%x: bool[" + str(n) + ",2]", "%a, %b, %c",
                                      "  %a, %b, %c = Split(%x) {num_outputs = 3} : bool[?,2], "
                                      "bool[?,2], bool[?,2]");
    expectBothWays(byCount, {randomTensor(DType::Bool, {n, 2}, n)});
  }
  // Without num_outputs: one chunk per output, on a symbolic axis.
  const std::string byOutputs =
      model("%x: u8[2,m]", "%a, %b", "  %a, %b = Split(%x) {axis = -1} : u8[2,?], u8[2,?]");
  for (int64_t m : {0, 4, 5})
    expectBothWays(byOutputs, {randomTensor(DType::U8, {2, m}, m, 0, 200)});
}

TEST(LowerMovementOps, SplitSizesThatDoNotSumToTheDimAreARunTimeError) {
  const std::string m =
      model("%x: f32[5], %s: i64[2]", "%a, %b", "  %a, %b = Split(%x, %s) : f32[?], f32[?]");
  const std::string error = artifactRunError(m, {randomTensor(DType::F32, {5}, 1), i64s({2, 2})});
  EXPECT_NE(error.find("sums to"), std::string::npos) << error;
}

// Swin's patch merging (x[:, 0::2, 1::2, :]: strided rows of contiguous
// runs) and a strided last dim, on shapes the copy step's runs and odometer
// cross several times.
TEST(LowerMovementOps, SliceStridedRowsOfContiguousRuns) {
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const std::vector<Case> cases = {
      {{0, 1}, {9, 11}, {1, 2}, {2, 2}},              // whole channel runs
      {{1, 0, 3}, {9, 11, 17}, {1, 2, 3}, {2, 3, 1}}, // partial last-dim runs
      {{8, 2}, {0, 19}, {1, 3}, {-3, 5}},             // negative step, strided last dim
      {{1}, {3}, {0}, {1}},                           // contiguous box, whole rest
  };
  for (const Case &c : cases) {
    const int64_t k = int64_t(c.starts.size());
    const std::string list = "i64[" + str(k) + "]";
    const std::string m = model("%x: f32[3,9,11,20], %s: " + list + ", %e: " + list +
                                    ", %a: " + list + ", %t: " + list,
                                "%y", "  %y = Slice(%x, %s, %e, %a, %t) : f32[?,?,?,?]");
    expectBothWays(m, {randomTensor(DType::F32, {3, 9, 11, 20}, 3), i64s(c.starts), i64s(c.ends),
                       i64s(c.axes), i64s(c.steps)});
  }
}

// ---- Transpose, DepthToSpace, SpaceToDepth ------------------------------------------------

TEST(LowerMovementOps, TransposeEveryPermutationOfRankThree) {
  const std::vector<std::vector<int>> perms = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                               {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (const auto &p : perms) {
    const std::string perm = "[" + str(p[0]) + ", " + str(p[1]) + ", " + str(p[2]) + "]";
    const std::string m =
        model("%x: f32[2,3,4]", "%y", "  %y = Transpose(%x) {perm = " + perm + "} : f32[?,?,?]");
    expectBothWays(m, {randomTensor(DType::F32, {2, 3, 4}, 1)});
  }
}

TEST(LowerMovementOps, TransposeDefaultPermutationSymbolicDimsAndDtypes) {
  for (DType t : {DType::F16, DType::I8, DType::Bool, DType::F64}) {
    const std::string n(dtypeName(t));
    const std::string m =
        model("%x: " + n + "[a,3,b,2,5]", "%y", "  %y = Transpose(%x) : " + n + "[5,2,b,3,a]");
    for (int64_t a : {1, 3}) expectBothWays(m, {randomTensor(t, {a, 3, 4, 2, 5}, a, -9, 9)});
  }
  const std::string merged =
      model("%x: f32[4,5,6,7]", "%y", "  %y = Transpose(%x) {perm = [2, 3, 0, 1]} : f32[6,7,4,5]");
  expectBothWays(merged, {randomTensor(DType::F32, {4, 5, 6, 7}, 2)});
}

// Every permutation of rank 4 on dims that are not multiples of the copy
// step's 16 x 16 tiles (and span several), in f32 and f16.
TEST(LowerMovementOps, TransposeEveryPermutationOfRankFourInTiles) {
  std::vector<int> p = {0, 1, 2, 3};
  do {
    const std::string perm =
        "[" + str(p[0]) + ", " + str(p[1]) + ", " + str(p[2]) + ", " + str(p[3]) + "]";
    for (DType t : {DType::F32, DType::F16}) {
      const std::string n(dtypeName(t));
      const std::string m =
          model("%x: " + n + "[2,37,5,19]", "%y",
                "  %y = Transpose(%x) {perm = " + perm + "} : " + n + "[?,?,?,?]");
      expectBothWays(m, {randomTensor(t, {2, 37, 5, 19}, 4)});
    }
  } while (std::next_permutation(p.begin(), p.end()));
}

TEST(LowerMovementOps, DepthToSpaceBothModesAndSpaceToDepth) {
  for (const char *mode : {"DCR", "CRD"}) {
    const std::string m = model("%x: f32[n,8,3,2]", "%y",
                                std::string("  %y = DepthToSpace(%x) {blocksize = 2, mode = \"") +
                                    mode + "\"} : f32[n,2,6,4]");
    for (int64_t n : {1, 2})
      expectArtifactMatchesInterpreter(m, {randomTensor(DType::F32, {n, 8, 3, 2}, n)});
  }
  const std::string s2d =
      model("%x: i16[2,3,6,9]", "%y", "  %y = SpaceToDepth(%x) {blocksize = 3} : i16[2,27,2,3]");
  expectArtifactMatchesInterpreter(s2d, {randomTensor(DType::I16, {2, 3, 6, 9}, 1, -99, 99)});
}

// ---- Expand and Tile ----------------------------------------------------------------------

TEST(LowerMovementOps, ExpandWithARunTimeShapeBroadcastsBothWays) {
  const std::string m =
      model("%x: f32[3,1,4], %s: i64[4]", "%y", "  %y = Expand(%x, %s) : f32[?,?,?,?]");
  for (auto shape :
       std::vector<std::vector<int64_t>>{{2, 3, 5, 4}, {1, 1, 1, 1}, {2, 1, 6, 1}, {1, 3, 0, 4}})
    expectArtifactMatchesInterpreter(m, {randomTensor(DType::F32, {3, 1, 4}, 1), i64s(shape)});
  // A shorter shape keeps the input's rank.
  const std::string shorter =
      model("%x: bf16[2,1,3], %s: i64[1]", "%y", "  %y = Expand(%x, %s) : bf16[2,1,3]");
  expectArtifactMatchesInterpreter(shorter, {randomTensor(DType::BF16, {2, 1, 3}, 1), i64s({1})});
  const std::string error =
      artifactRunError(m, {randomTensor(DType::F32, {3, 1, 4}, 1), i64s({1, 2, 1, 4})});
  EXPECT_NE(error.find("cannot broadcast"), std::string::npos) << error;
}

TEST(LowerMovementOps, TileWithARunTimeRepeatsInput) {
  const std::string m = model("%x: i32[n,3], %r: i64[2]", "%y", "  %y = Tile(%x, %r) : i32[?,?]");
  for (int64_t n : {1, 2})
    for (auto r : std::vector<std::vector<int64_t>>{{1, 1}, {2, 3}, {0, 2}, {3, 1}})
      expectArtifactMatchesInterpreter(m, {randomTensor(DType::I32, {n, 3}, n, -9, 9), i64s(r)});
}

// ---- Pad ---------------------------------------------------------------------------------

TEST(LowerMovementOps, PadEveryModeWithCroppingPads) {
  const std::vector<std::vector<int64_t>> padLists = {
      {1, 2, 0, 3, 0, 1}, {0, 0, 0, 0, 0, 0}, {-1, 2, 3, 1, -2, 0}, {2, 0, -3, 0, 4, -1}};
  for (const char *mode : {"constant", "reflect", "edge", "wrap"})
    for (const auto &pads : padLists) {
      SCOPED_TRACE(::testing::Message()
                   << mode << " " << pads[0] << "," << pads[1] << "," << pads[2] << "," << pads[3]
                   << "," << pads[4] << "," << pads[5]);
      const std::string m =
          model("%x: f32[4,3,5], %p: i64[6]", "%y",
                std::string("  %y = Pad(%x, %p) {mode = \"") + mode + "\"} : f32[?,?,?]");
      expectArtifactMatchesInterpreter(m, {randomTensor(DType::F32, {4, 3, 5}, 1), i64s(pads)});
    }
}

TEST(LowerMovementOps, PadReflectAndWrapFarBeyondTheEdges) {
  for (const char *mode : {"reflect", "wrap", "edge"}) {
    const std::string m =
        model("%x: i64[n], %p: i64[2]", "%y",
              std::string("  %y = Pad(%x, %p) {mode = \"") + mode + "\"} : i64[?]");
    for (int64_t n : {1, 2, 3})
      expectArtifactMatchesInterpreter(m,
                                       {randomTensor(DType::I64, {n}, n, -99, 99), i64s({7, 11})});
  }
}

TEST(LowerMovementOps, PadConstantValueAndAxesInputs) {
  const std::string m = model("%x: f16[3,4,2], %p: i64[4], %v: f16[], %a: i64[2]", "%y",
                              "  %y = Pad(%x, %p, %v, %a) : f16[?,?,?]");
  Tensor v(DType::F16, {});
  v.setDouble(0, 2.5);
  for (auto axes : std::vector<std::vector<int64_t>>{{0, 2}, {-1, 1}, {1, 1}})
    expectArtifactMatchesInterpreter(
        m, {randomTensor(DType::F16, {3, 4, 2}, 1), i64s({1, -1, 2, 3}), v, i64s(axes)});
  // An empty constant_value pads with 0.
  const std::string empty =
      model("%x: i32[2,2], %p: i64[4], %v: i32[e]", "%y", "  %y = Pad(%x, %p, %v) : i32[?,?]");
  for (int64_t e : {0, 1})
    expectArtifactMatchesInterpreter(empty, {randomTensor(DType::I32, {2, 2}, 1, -9, 9),
                                             i64s({1, 0, 0, 2}),
                                             Tensor::fromVector(std::vector<int32_t>{7}, {e})});
}

TEST(LowerMovementOps, PadCroppingTooMuchIsARunTimeError) {
  const std::string m = model("%x: f32[3], %p: i64[2]", "%y", "  %y = Pad(%x, %p) : f32[?]");
  const std::string error = artifactRunError(m, {randomTensor(DType::F32, {3}, 1), i64s({-2, -2})});
  EXPECT_NE(error.find("crop more"), std::string::npos) << error;
}

// ---- ConstantOfShape ----------------------------------------------------------------------

TEST(LowerMovementOps, ConstantOfShapeEveryValueDtypeAndEmptyShapes) {
  const std::vector<std::string> values = {
      "", "{value = dense<i32[1]>[-7]}", "{value = dense<f16[1]>[1.5]}",
      "{value = dense<bool[1]>[true]}", "{value = dense<i64[1]>[9000000000]}"};
  const std::vector<std::string> types = {"f32", "i32", "f16", "bool", "i64"};
  for (size_t k = 0; k < values.size(); ++k) {
    const std::string m =
        model("%s: i64[3]", "%y",
              "  %y = ConstantOfShape(%s) " + values[k] + " : " + types[k] + "[?,?,?]");
    for (auto shape : std::vector<std::vector<int64_t>>{{2, 3, 4}, {1, 0, 5}, {1, 1, 1}})
      expectArtifactMatchesInterpreter(m, {i64s(shape)});
  }
}

} // namespace
} // namespace kiln
