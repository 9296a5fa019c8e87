// Index lowerings (lower/index_ops.cpp) through the artifact, against the
// interpreter (op_check.h), on random inputs: every attribute form, several
// ranks and dtypes, symbolic dims, empty tensors, and bad indices, which
// must give a run-time error naming the node.
#include "op_check.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

namespace kiln {
namespace {

using testing::artifactRunError;
using testing::expectArtifactMatchesInterpreter;
using testing::randomTensor;

std::string str(int64_t v) {
  return std::to_string(v);
}

// A model of one node `call` with the given graph inputs and result type.
std::string oneNode(const std::string &params, const std::string &call, const std::string &type) {
  return R"(kiln.model opsets {"" = 18}
graph @g()" +
         params + R"() -> (%y) {
  %y = )" +
         call + " : " + type + R"(
})";
}

Tensor ints(DType t, const Shape64 &shape, std::vector<int64_t> values) {
  Tensor x(t, shape);
  for (size_t i = 0; i < values.size(); ++i) x.setInt(int64_t(i), values[i]);
  return x;
}

// ---- Trilu ------------------------------------------------------------------------

TEST(LowerIndexOps, TriluEveryDiagonalOffsetOnABatchOfMatrices) {
  for (int upper = 0; upper <= 1; ++upper)
    for (int64_t k : {-4, -1, 0, 2, 5}) {
      SCOPED_TRACE(::testing::Message() << "upper=" << upper << " k=" << k);
      const std::string model = R"(kiln.model opsets {"" = 17}
graph @g(%x: f32[2,3,4,5], %k: i64[]) -> (%y) {
  %y = Trilu(%x, %k) {upper = )" +
                                std::to_string(upper) + R"(} : f32[2,3,4,5]
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

// ---- Gather -------------------------------------------------------------------------

TEST(LowerIndexOps, GatherOnEveryAxisWithNegativeIndices) {
  const Shape64 data = {3, 4, 5};
  for (int axis : {0, 1, 2, -1, -3}) {
    SCOPED_TRACE(::testing::Message() << "axis=" << axis);
    const int a = axis < 0 ? axis + 3 : axis;
    Shape64 out = {3, 4, 5};
    out.erase(out.begin() + a);
    out.insert(out.begin() + a, {2, 3});
    std::string type = "f32[";
    for (size_t i = 0; i < out.size(); ++i) type += (i ? "," : "") + str(out[i]);
    const std::string model = oneNode("%x: f32[3,4,5], %i: i64[2,3]",
                                      "Gather(%x, %i) {axis = " + str(axis) + "}", type + "]");
    expectArtifactMatchesInterpreter(
        model,
        {randomTensor(DType::F32, data, 1),
         randomTensor(DType::I64, {2, 3}, 2, -double(data[size_t(a)]), double(data[size_t(a)]))});
  }
}

TEST(LowerIndexOps, GatherWithAScalarIndexDropsTheAxis) {
  const std::string model =
      oneNode("%x: i64[4,6], %i: i32[]", "Gather(%x, %i) {axis = 1}", "i64[4]");
  for (int32_t i : {0, 5, -1, -6})
    expectArtifactMatchesInterpreter(
        model, {randomTensor(DType::I64, {4, 6}, 3, -50, 50), Tensor::scalar<int32_t>(i)});
}

TEST(LowerIndexOps, GatherMovesEveryDtype) {
  for (DType t : {DType::F16, DType::BF16, DType::Bool, DType::I8, DType::U8, DType::F64}) {
    SCOPED_TRACE(dtypeName(t));
    const std::string n(dtypeName(t));
    const std::string model =
        oneNode("%x: " + n + "[5,3], %i: i64[4]", "Gather(%x, %i) {axis = 0}", n + "[4,3]");
    expectArtifactMatchesInterpreter(
        model, {randomTensor(t, {5, 3}, 4, -9, 9), randomTensor(DType::I64, {4}, 5, -5, 5)});
  }
}

TEST(LowerIndexOps, GatherWithSymbolicDimsAndEmptyIndices) {
  const std::string model =
      oneNode("%x: f32[n,4], %i: i64[m]", "Gather(%x, %i) {axis = 0}", "f32[m,4]");
  for (int64_t n : {1, 6})
    for (int64_t m : {0, 1, 9})
      expectArtifactMatchesInterpreter(model,
                                       {randomTensor(DType::F32, {n, 4}, n),
                                        randomTensor(DType::I64, {m}, m, -double(n), double(n))});
}

TEST(LowerIndexOps, GatherIndexOutOfRangeIsARunTimeError) {
  const std::string model =
      oneNode("%x: f32[3,4], %i: i64[2]", "Gather(%x, %i) {axis = 1}", "f32[3,2]");
  for (int64_t bad : {4, -5, 1000}) {
    const std::string error = artifactRunError(
        model, {randomTensor(DType::F32, {3, 4}, 1), ints(DType::I64, {2}, {0, bad})});
    EXPECT_NE(error.find("out of range"), std::string::npos) << error;
  }
}

// ---- GatherElements -------------------------------------------------------------------

TEST(LowerIndexOps, GatherElementsOnEveryAxisWithSmallerIndices) {
  for (int axis : {0, 1, 2, -1}) {
    SCOPED_TRACE(::testing::Message() << "axis=" << axis);
    const int a = axis < 0 ? axis + 3 : axis;
    const int64_t dim = std::vector<int64_t>{4, 5, 6}[size_t(a)];
    const std::string model =
        oneNode("%x: f32[4,5,6], %i: i32[3,5,2]",
                "GatherElements(%x, %i) {axis = " + str(axis) + "}", "f32[3,5,2]");
    expectArtifactMatchesInterpreter(
        model, {randomTensor(DType::F32, {4, 5, 6}, 1),
                randomTensor(DType::I32, {3, 5, 2}, 2, -double(dim), double(dim))});
  }
}

TEST(LowerIndexOps, GatherElementsOneDimensionalAndSymbolic) {
  const std::string model =
      oneNode("%x: i64[n], %i: i64[m]", "GatherElements(%x, %i) {axis = 0}", "i64[m]");
  for (int64_t n : {1, 7})
    for (int64_t m : {0, 3, 20})
      expectArtifactMatchesInterpreter(model,
                                       {randomTensor(DType::I64, {n}, n, -99, 99),
                                        randomTensor(DType::I64, {m}, m, -double(n), double(n))});
}

TEST(LowerIndexOps, GatherElementsIndexOutOfRangeIsARunTimeError) {
  const std::string model =
      oneNode("%x: f32[2,3], %i: i64[2,2]", "GatherElements(%x, %i) {axis = 1}", "f32[2,2]");
  const std::string error = artifactRunError(
      model, {randomTensor(DType::F32, {2, 3}, 1), ints(DType::I64, {2, 2}, {0, 1, 2, 3})});
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
}

// ---- GatherND -------------------------------------------------------------------------

TEST(LowerIndexOps, GatherNdTuplesOfEveryLength) {
  // data [4, 5, 3]: tuples of 1, 2 and 3 indices pick slices, rows, elements.
  const std::vector<std::string> outTypes = {"f32[2,6,5,3]", "f32[2,6,3]", "f32[2,6]"};
  for (int64_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE(::testing::Message() << "k=" << k);
    const std::string model = oneNode("%x: f32[4,5,3], %i: i64[2,6," + str(k) + "]",
                                      "GatherND(%x, %i)", outTypes[size_t(k - 1)]);
    // Indices in [-3, 3) are valid on every axis.
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {4, 5, 3}, 1),
                                             randomTensor(DType::I64, {2, 6, k}, 2, -3, 3)});
  }
}

TEST(LowerIndexOps, GatherNdWithBatchDims) {
  const std::string model = oneNode("%x: i32[2,3,4,5], %i: i64[2,3,7,1]",
                                    "GatherND(%x, %i) {batch_dims = 2}", "i32[2,3,7,5]");
  expectArtifactMatchesInterpreter(model, {randomTensor(DType::I32, {2, 3, 4, 5}, 1, -50, 50),
                                           randomTensor(DType::I64, {2, 3, 7, 1}, 2, -4, 4)});
  const std::string one =
      oneNode("%x: f32[b,4,2], %i: i32[b,2]", "GatherND(%x, %i) {batch_dims = 1}", "f32[b]");
  for (int64_t b : {1, 3})
    expectArtifactMatchesInterpreter(
        one, {randomTensor(DType::F32, {b, 4, 2}, b), randomTensor(DType::I32, {b, 2}, b, -2, 2)});
}

TEST(LowerIndexOps, GatherNdIndexOutOfRangeIsARunTimeError) {
  const std::string model = oneNode("%x: f32[4,5], %i: i64[1,2]", "GatherND(%x, %i)", "f32[1]");
  const std::string error = artifactRunError(
      model, {randomTensor(DType::F32, {4, 5}, 1), ints(DType::I64, {1, 2}, {3, 5})});
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
}

// ---- ScatterElements --------------------------------------------------------------------

TEST(LowerIndexOps, ScatterElementsEveryReductionWithDuplicateIndices) {
  for (const char *red : {"none", "add", "mul", "max", "min"})
    for (DType t : {DType::F32, DType::I32, DType::F16}) {
      SCOPED_TRACE(::testing::Message() << red << " " << dtypeName(t));
      const std::string n(dtypeName(t));
      for (int axis : {0, 1, -1}) {
        const std::string model = oneNode("%x: " + n + "[4,5], %i: i64[3,5], %u: " + n + "[3,5]",
                                          "ScatterElements(%x, %i, %u) {axis = " + str(axis) +
                                              ", reduction = \"" + red + "\"}",
                                          n + "[4,5]");
        // Indices in [-2, 2) repeat often, so duplicates combine in order.
        expectArtifactMatchesInterpreter(model,
                                         {randomTensor(t, {4, 5}, 1, -3, 3),
                                          randomTensor(DType::I64, {3, 5}, 2, -2, 2),
                                          randomTensor(t, {3, 5}, 3, -3, 3)},
                                         {1e-3, 1e-3});
      }
    }
}

TEST(LowerIndexOps, ScatterElementsOnBoolsAndRankThree) {
  for (const char *red : {"none", "add", "mul", "max", "min"}) {
    const std::string model =
        oneNode("%x: bool[3,4,2], %i: i32[2,4,1], %u: bool[2,4,1]",
                std::string("ScatterElements(%x, %i, %u) {axis = 0, reduction = \"") + red + "\"}",
                "bool[3,4,2]");
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::Bool, {3, 4, 2}, 1),
                                             randomTensor(DType::I32, {2, 4, 1}, 2, -3, 3),
                                             randomTensor(DType::Bool, {2, 4, 1}, 3)});
  }
}

TEST(LowerIndexOps, ScatterElementsSymbolicAndEmpty) {
  const std::string model = oneNode("%x: f32[n], %i: i64[m], %u: f32[m]",
                                    "ScatterElements(%x, %i, %u) {reduction = \"add\"}", "f32[n]");
  for (int64_t n : {1, 8})
    for (int64_t m : {0, 5})
      expectArtifactMatchesInterpreter(model,
                                       {randomTensor(DType::F32, {n}, 1),
                                        randomTensor(DType::I64, {m}, 2, -double(n), double(n)),
                                        randomTensor(DType::F32, {m}, 3)});
}

TEST(LowerIndexOps, ScatterElementsIndexOutOfRangeIsARunTimeError) {
  const std::string model = oneNode("%x: f32[2,3], %i: i64[1,2], %u: f32[1,2]",
                                    "ScatterElements(%x, %i, %u) {axis = 0}", "f32[2,3]");
  const std::string error = artifactRunError(model, {randomTensor(DType::F32, {2, 3}, 1),
                                                     ints(DType::I64, {1, 2}, {0, -3}),
                                                     randomTensor(DType::F32, {1, 2}, 2)});
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
}

// ---- ScatterND ----------------------------------------------------------------------------

TEST(LowerIndexOps, ScatterNdEveryReductionOnElementsAndSlices) {
  for (const char *red : {"none", "add", "mul", "max", "min"}) {
    SCOPED_TRACE(red);
    // Whole elements (k = rank): a serial pass.
    const std::string elems =
        oneNode("%x: f32[4,3], %i: i64[6,2], %u: f32[6]",
                std::string("ScatterND(%x, %i, %u) {reduction = \"") + red + "\"}", "f32[4,3]");
    expectArtifactMatchesInterpreter(elems, {randomTensor(DType::F32, {4, 3}, 1),
                                             randomTensor(DType::I64, {6, 2}, 2, -3, 3),
                                             randomTensor(DType::F32, {6}, 3)});
    // Slices of 150 elements: parallel blocks of 64 and a serial tail.
    const std::string rows =
        oneNode("%x: i32[3,150], %i: i64[5,1], %u: i32[5,150]",
                std::string("ScatterND(%x, %i, %u) {reduction = \"") + red + "\"}", "i32[3,150]");
    expectArtifactMatchesInterpreter(rows, {randomTensor(DType::I32, {3, 150}, 1, -9, 9),
                                            randomTensor(DType::I64, {5, 1}, 2, -3, 3),
                                            randomTensor(DType::I32, {5, 150}, 3, -9, 9)});
  }
}

TEST(LowerIndexOps, ScatterNdWithSymbolicDimsAndAnEmptyTuple) {
  const std::string model = oneNode("%x: f16[n,2,64], %i: i32[m,1], %u: f16[m,2,64]",
                                    "ScatterND(%x, %i, %u) {reduction = \"add\"}", "f16[n,2,64]");
  for (int64_t n : {1, 4})
    for (int64_t m : {0, 3})
      expectArtifactMatchesInterpreter(model,
                                       {randomTensor(DType::F16, {n, 2, 64}, 1),
                                        randomTensor(DType::I32, {m, 1}, 2, -double(n), double(n)),
                                        randomTensor(DType::F16, {m, 2, 64}, 3)},
                                       {1e-2, 1e-2});
  // k = 0: every update replaces the whole data.
  const std::string whole =
      oneNode("%x: f32[2,3], %i: i64[2,0], %u: f32[2,2,3]", "ScatterND(%x, %i, %u)", "f32[2,3]");
  expectArtifactMatchesInterpreter(whole,
                                   {randomTensor(DType::F32, {2, 3}, 1), Tensor(DType::I64, {2, 0}),
                                    randomTensor(DType::F32, {2, 2, 3}, 3)});
}

TEST(LowerIndexOps, ScatterNdIndexOutOfRangeIsARunTimeError) {
  const std::string model = oneNode("%x: f32[4,100], %i: i64[2,1], %u: f32[2,100]",
                                    "ScatterND(%x, %i, %u)", "f32[4,100]");
  const std::string error = artifactRunError(model, {randomTensor(DType::F32, {4, 100}, 1),
                                                     ints(DType::I64, {2, 1}, {1, 4}),
                                                     randomTensor(DType::F32, {2, 100}, 2)});
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
}

// ---- OneHot -------------------------------------------------------------------------------

TEST(LowerIndexOps, OneHotOnEveryAxisWithNegativeIndices) {
  for (int axis : {-1, 0, 1, 2, -3}) {
    SCOPED_TRACE(::testing::Message() << "axis=" << axis);
    const std::string model =
        oneNode("%i: i64[3,4], %d: i64[], %v: f32[2]",
                "OneHot(%i, %d, %v) {axis = " + str(axis) + "}", "f32[?,?,?]");
    // Indices in [-7, 7) with depth 5: some negative, some outside (all off).
    expectArtifactMatchesInterpreter(
        model, {randomTensor(DType::I64, {3, 4}, 1, -7, 7), Tensor::scalar<int64_t>(5),
                Tensor::fromVector(std::vector<float>{-1.5f, 2.5f}, {2})});
  }
}

TEST(LowerIndexOps, OneHotWithFloatIndicesAndDepthAndIntegerValues) {
  const std::string model =
      oneNode("%i: f32[n], %d: f32[1], %v: i32[2]", "OneHot(%i, %d, %v)", "i32[n,?]");
  for (int64_t n : {0, 1, 6})
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {n}, 1, -4, 4),
                                             Tensor::fromVector(std::vector<float>{3.7f}, {1}),
                                             Tensor::fromVector(std::vector<int32_t>{0, 7}, {2})});
}

// ---- Range --------------------------------------------------------------------------------

TEST(LowerIndexOps, RangeOfIntegersCountsLikeTheInterpreter) {
  const std::vector<std::array<int64_t, 3>> cases = {
      {0, 10, 3}, {10, 6, -3}, {1, 2, 1}, {1, 4, 2}, {-5, -1, 1}, {5, 1, 1}, {0, 0, 4}, {-7, 8, 5}};
  for (DType t : {DType::I32, DType::I64, DType::I16}) {
    const std::string n(dtypeName(t));
    const std::string model = oneNode("%s: " + n + "[], %l: " + n + "[], %d: " + n + "[]",
                                      "Range(%s, %l, %d)", n + "[?]");
    for (auto [s, l, dl] : cases) {
      SCOPED_TRACE(::testing::Message() << n << " " << s << " " << l << " " << dl);
      expectArtifactMatchesInterpreter(model,
                                       {ints(t, {}, {s}), ints(t, {}, {l}), ints(t, {}, {dl})});
    }
  }
}

TEST(LowerIndexOps, RangeOfHugeInt64sNeverOverflows) {
  const std::string model =
      oneNode("%s: i64[], %l: i64[], %d: i64[]", "Range(%s, %l, %d)", "i64[?]");
  const int64_t mx = INT64_MAX, mn = INT64_MIN;
  for (auto [s, l, dl] : std::vector<std::array<int64_t, 3>>{{mn, mx, mx},
                                                             {mx, mn, mn},
                                                             {mx, mn, -mx},
                                                             {mn + 1, mx, mx / 2},
                                                             {mx - 2, mx, 1},
                                                             {0, mx, mn}}) {
    SCOPED_TRACE(::testing::Message() << s << " " << l << " " << dl);
    expectArtifactMatchesInterpreter(
        model, {ints(DType::I64, {}, {s}), ints(DType::I64, {}, {l}), ints(DType::I64, {}, {dl})});
  }
  const std::string error = artifactRunError(
      model, {ints(DType::I64, {}, {mn}), ints(DType::I64, {}, {mx}), ints(DType::I64, {}, {1})});
  EXPECT_NE(error.find("too many elements"), std::string::npos) << error;
}

TEST(LowerIndexOps, RangeOfFloats) {
  for (DType t : {DType::F32, DType::F64, DType::F16}) {
    const std::string n(dtypeName(t));
    const std::string model = oneNode("%s: " + n + "[], %l: " + n + "[], %d: " + n + "[]",
                                      "Range(%s, %l, %d)", n + "[?]");
    for (auto [s, l, dl] : std::vector<std::array<double, 3>>{
             {1, 5, 0.5}, {3, -2, -0.75}, {0.25, 0.25, 1}, {10, 0, 1}, {-1, 100, 3.25}}) {
      SCOPED_TRACE(::testing::Message() << n << " " << s << " " << l << " " << dl);
      Tensor ts(t, {}), tl(t, {}), td(t, {});
      ts.setDouble(0, s);
      tl.setDouble(0, l);
      td.setDouble(0, dl);
      expectArtifactMatchesInterpreter(model, {ts, tl, td});
    }
  }
}

TEST(LowerIndexOps, RangeWithZeroDeltaIsARunTimeError) {
  const std::string model =
      oneNode("%s: f32[], %l: f32[], %d: f32[]", "Range(%s, %l, %d)", "f32[?]");
  const std::string error = artifactRunError(
      model, {Tensor::scalar<float>(0), Tensor::scalar<float>(3), Tensor::scalar<float>(0)});
  EXPECT_NE(error.find("delta is 0"), std::string::npos) << error;
}

// ---- EyeLike and ReverseSequence --------------------------------------------------------------

TEST(LowerIndexOps, EyeLikeEveryOffsetAndDtype) {
  for (int64_t k : {-5, -1, 0, 2, 7}) {
    const std::string same =
        oneNode("%x: i32[n,m]", "EyeLike(%x) {k = " + str(k) + "}", "i32[n,m]");
    expectArtifactMatchesInterpreter(same, {randomTensor(DType::I32, {4, 6}, 1)});
    expectArtifactMatchesInterpreter(same, {randomTensor(DType::I32, {6, 3}, 1)});
    // dtype 10 is f16, 9 bool, 11 f64.
    for (int code : {1, 9, 10, 11}) {
      const DType t = *dtypeFromOnnx(code);
      const std::string cast =
          oneNode("%x: f32[3,5]", "EyeLike(%x) {k = " + str(k) + ", dtype = " + str(code) + "}",
                  std::string(dtypeName(t)) + "[3,5]");
      expectArtifactMatchesInterpreter(cast, {randomTensor(DType::F32, {3, 5}, 1)});
    }
  }
}

TEST(LowerIndexOps, ReverseSequenceOnBothAxisOrders) {
  const std::string timeMajor =
      oneNode("%x: f32[5,3,2], %l: i64[3]",
              "ReverseSequence(%x, %l) {batch_axis = 1, time_axis = 0}", "f32[5,3,2]");
  expectArtifactMatchesInterpreter(
      timeMajor, {randomTensor(DType::F32, {5, 3, 2}, 1), ints(DType::I64, {3}, {5, 0, 3})});
  const std::string batchMajor =
      oneNode("%x: i8[b,t], %l: i32[b]", "ReverseSequence(%x, %l) {batch_axis = 0, time_axis = 1}",
              "i8[b,t]");
  expectArtifactMatchesInterpreter(
      batchMajor, {randomTensor(DType::I8, {4, 6}, 1, -9, 9), ints(DType::I32, {4}, {1, 6, 2, 4})});
}

TEST(LowerIndexOps, ReverseSequenceLengthOutOfRangeIsARunTimeError) {
  const std::string model =
      oneNode("%x: f32[4,2], %l: i64[2]", "ReverseSequence(%x, %l) {batch_axis = 1, time_axis = 0}",
              "f32[4,2]");
  const std::string error =
      artifactRunError(model, {randomTensor(DType::F32, {4, 2}, 1), ints(DType::I64, {2}, {5, 1})});
  EXPECT_NE(error.find("sequence length"), std::string::npos) << error;
}

} // namespace
} // namespace kiln
