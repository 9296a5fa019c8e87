// Normalization lowerings (lower/norm_ops.cpp) through the artifact,
// against the interpreter (op_check.h), on random inputs.
#include "op_check.h"

#include "ir/parser.h"
#include "package/package.h"
#include "runtime/api/model.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing::expectArtifactMatchesInterpreter;
using testing::OpCheckOptions;
using testing::randomTensor;

std::string dimsText(const Shape64 &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::string type(DType t, const Shape64 &s) {
  return std::string(dtypeName(t)) + dimsText(s);
}

OpCheckOptions tolerance(DType t) {
  if (t == DType::F16) return {4e-3, 4e-3};
  if (t == DType::BF16) return {2e-2, 2e-2};
  if (t == DType::F64) return {1e-10, 1e-10};
  return {1e-4, 1e-5};
}

// The error of running `model` on `inputs` through the artifact ("" when
// it runs).
std::string artifactRunError(const std::string &model, const std::vector<Tensor> &inputs) {
  auto parsed = parseModel(model, "test.kir");
  if (!parsed.ok()) return "parse: " + parsed.error().message;
  package::PackageOptions po;
  auto bytes = package::packageModel(std::move(*parsed), po);
  if (!bytes.ok()) return "compile: " + bytes.error().message;
  auto loaded = rt::LoadedModel::fromMemory(bytes->data(), bytes->size());
  if (loaded.error) return "load: " + loaded.error->message;
  rt::Session session(*loaded.value, 1);
  auto got = session.run(inputs);
  return got.ok() ? "" : got.error().message;
}

// ---- LayerNormalization --------------------------------------------------------------

// LayerNormalization of x over axes [axis, rank) with a scale (and bias)
// of shape `param`, all three outputs.
std::string layerNormModel(DType t, const Shape64 &x, int axis, const Shape64 &param, bool bias,
                           int stashType, DType stash) {
  const size_t a = size_t(axis < 0 ? axis + int(x.size()) : axis);
  Shape64 stat(x.begin(), x.begin() + long(a));
  stat.resize(x.size(), 1);
  return R"(kiln.model opsets {"" = 17}
graph @g(%x: )" +
         type(t, x) + ", %s: " + type(t, param) + (bias ? ", %b: " + type(t, param) : "") +
         R"() -> (%y, %mean, %inv) {
  %y, %mean, %inv = LayerNormalization(%x, %s)" +
         (bias ? ", %b" : "") + ") {axis = " + std::to_string(axis) +
         ", epsilon = 0.001, stash_type = " + std::to_string(stashType) + "} : " + type(t, x) +
         ", " + type(stash, stat) + ", " + type(stash, stat) + "\n}";
}

TEST(LowerNormOps, LayerNormOnEveryAxisWithAllThreeOutputs) {
  const Shape64 x = {2, 3, 4, 5};
  for (int axis : {0, 1, 2, 3, -1, -2})
    for (bool bias : {false, true}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + " bias " + std::to_string(bias));
      const size_t a = size_t(axis < 0 ? axis + 4 : axis);
      const Shape64 param(x.begin() + long(a), x.end());
      std::vector<Tensor> in = {randomTensor(DType::F32, x, 1), randomTensor(DType::F32, param, 2)};
      if (bias) in.push_back(randomTensor(DType::F32, param, 3));
      expectArtifactMatchesInterpreter(
          layerNormModel(DType::F32, x, axis, param, bias, 1, DType::F32), in,
          tolerance(DType::F32));
    }
}

TEST(LowerNormOps, LayerNormBroadcastsScaleAndBias) {
  const Shape64 x = {3, 4, 6};
  for (const Shape64 &param : {Shape64{6}, Shape64{1, 6}, Shape64{4, 1}, Shape64{1}, Shape64{1, 1}})
    for (DType t : {DType::F32, DType::F64}) {
      SCOPED_TRACE(dimsText(param) + " " + std::string(dtypeName(t)));
      expectArtifactMatchesInterpreter(
          layerNormModel(t, x, 1, param, true, 1, DType::F32),
          {randomTensor(t, x, 4), randomTensor(t, param, 5), randomTensor(t, param, 6)},
          tolerance(t));
    }
}

TEST(LowerNormOps, LayerNormInHalfFloatsWithEveryStashType) {
  const Shape64 x = {4, 33};
  for (DType t : {DType::F16, DType::BF16, DType::F64})
    for (auto [code, stash] : {std::pair{1, DType::F32}, std::pair{10, DType::F16},
                               std::pair{11, DType::F64}, std::pair{16, DType::BF16}}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " stash " + std::to_string(code));
      expectArtifactMatchesInterpreter(
          layerNormModel(t, x, -1, {33}, true, code, stash),
          {randomTensor(t, x, 7), randomTensor(t, {33}, 8), randomTensor(t, {33}, 9)},
          tolerance(stash == DType::BF16 || t == DType::BF16 ? DType::BF16 : DType::F16));
    }
}

TEST(LowerNormOps, LayerNormWithSymbolicRowsAndABadScaleShape) {
  const std::string model = R"(kiln.model opsets {"" = 17}
graph @g(%x: f64[n,m], %s: f64[k]) -> (%y) {
  %y = LayerNormalization(%x, %s) {axis = 1} : f64[n,m]
})";
  for (int64_t n : {1, 5, 0})
    for (int64_t m : {1, 17}) {
      expectArtifactMatchesInterpreter(
          model, {randomTensor(DType::F64, {n, m}, n + m), randomTensor(DType::F64, {m}, m)},
          tolerance(DType::F64));
      expectArtifactMatchesInterpreter(
          model, {randomTensor(DType::F64, {n, m}, n + m), randomTensor(DType::F64, {1}, m)},
          tolerance(DType::F64));
    }
  EXPECT_NE(artifactRunError(
                model, {randomTensor(DType::F64, {2, 4}, 1), randomTensor(DType::F64, {3}, 1)})
                .find("normalized shape"),
            std::string::npos);
}

// ---- GroupNormalization, InstanceNormalization -----------------------------------------------

std::string groupNormModel(DType t, const Shape64 &x, int64_t groups, int64_t params, int opset) {
  return R"(kiln.model opsets {"" = )" + std::to_string(opset) + R"(}
graph @g(%x: )" +
         type(t, x) + ", %s: " + type(t, {params}) + ", %b: " + type(t, {params}) +
         R"() -> (%y) {
  %y = GroupNormalization(%x, %s, %b) {epsilon = 0.0001, num_groups = )" +
         std::to_string(groups) + "} : " + type(t, x) + "\n}";
}

TEST(LowerNormOps, GroupNormWithScalePerGroupOrPerChannel) {
  const Shape64 x = {2, 6, 3, 4};
  for (DType t : {DType::F32, DType::F64, DType::F16})
    for (int64_t groups : {1, 2, 3, 6})
      for (bool perChannel : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " groups " + std::to_string(groups) +
                     " per channel " + std::to_string(perChannel));
        const int64_t params = perChannel ? 6 : groups;
        expectArtifactMatchesInterpreter(
            groupNormModel(t, x, groups, params, perChannel ? 21 : 18),
            {randomTensor(t, x, 1), randomTensor(t, {params}, 2), randomTensor(t, {params}, 3)},
            tolerance(t));
      }
}

TEST(LowerNormOps, GroupNormGroupsMustDivideTheChannels) {
  const std::string model = groupNormModel(DType::F32, {1, 6, 2}, 4, 6, 21);
  EXPECT_NE(
      artifactRunError(model, {randomTensor(DType::F32, {1, 6, 2}, 1),
                               randomTensor(DType::F32, {6}, 1), randomTensor(DType::F32, {6}, 1)}),
      "");
}

TEST(LowerNormOps, InstanceNormOfEveryRankAndFloatType) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (const Shape64 &x : {Shape64{2, 3}, Shape64{2, 3, 7}, Shape64{1, 4, 3, 5}}) {
      SCOPED_TRACE(type(t, x));
      const std::string model = R"(kiln.model opsets {"" = 6}
graph @g(%x: )" + type(t, x) +
                                ", %s: " + type(t, {x[1]}) + ", %b: " + type(t, {x[1]}) +
                                R"() -> (%y) {
  %y = InstanceNormalization(%x, %s, %b) {epsilon = 0.01} : )" +
                                type(t, x) + "\n}";
      expectArtifactMatchesInterpreter(
          model, {randomTensor(t, x, 1), randomTensor(t, {x[1]}, 2), randomTensor(t, {x[1]}, 3)},
          tolerance(t));
    }
}

TEST(LowerNormOps, InstanceNormWithSymbolicBatchAndSpatialDims) {
  const std::string model = R"(kiln.model opsets {"" = 6}
graph @g(%x: f32[n,3,h], %s: f32[3], %b: f32[3]) -> (%y) {
  %y = InstanceNormalization(%x, %s, %b) : f32[n,3,h]
})";
  for (int64_t n : {1, 4, 0})
    for (int64_t h : {1, 40})
      expectArtifactMatchesInterpreter(model,
                                       {randomTensor(DType::F32, {n, 3, h}, n + h),
                                        randomTensor(DType::F32, {3}, 2),
                                        randomTensor(DType::F32, {3}, 3)},
                                       tolerance(DType::F32));
}

// ---- BatchNormalization ----------------------------------------------------------------------

TEST(LowerNormOps, BatchNormInferenceWithParamsGivenAtRunTime) {
  for (DType t : {DType::F32, DType::F64, DType::F16})
    for (const Shape64 &x : {Shape64{3, 4}, Shape64{2, 4, 5}, Shape64{2, 4, 3, 3}}) {
      SCOPED_TRACE(type(t, x));
      const std::string p = type(t, {4});
      const std::string model = R"(kiln.model opsets {"" = 15}
graph @g(%x: )" + type(t, x) +
                                ", %s: " + p + ", %b: " + p + ", %m: " + p + ", %v: " + p +
                                R"() -> (%y) {
  %y = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0.01} : )" +
                                type(t, x) + "\n}";
      expectArtifactMatchesInterpreter(model,
                                       {randomTensor(t, x, 1), randomTensor(t, {4}, 2),
                                        randomTensor(t, {4}, 3), randomTensor(t, {4}, 4),
                                        randomTensor(t, {4}, 5, 0.1, 2)},
                                       tolerance(t));
    }
}

TEST(LowerNormOps, BatchNormTrainingModeUpdatesTheRunningStatistics) {
  for (DType t : {DType::F32, DType::F64})
    for (const Shape64 &x : {Shape64{3, 4}, Shape64{2, 4, 3, 5}, Shape64{0, 4, 2}}) {
      SCOPED_TRACE(type(t, x));
      const std::string p = type(t, {4});
      const std::string model = R"(kiln.model opsets {"" = 15}
graph @g(%x: )" + type(t, x) +
                                ", %s: " + p + ", %b: " + p + ", %m: " + p + ", %v: " + p +
                                R"() -> (%y, %rm, %rv) {
  %y, %rm, %rv = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0.01, momentum = 0.8, training_mode = 1} : )" +
                                type(t, x) + ", " + p + ", " + p + "\n}";
      expectArtifactMatchesInterpreter(model,
                                       {randomTensor(t, x, 1), randomTensor(t, {4}, 2),
                                        randomTensor(t, {4}, 3), randomTensor(t, {4}, 4),
                                        randomTensor(t, {4}, 5, 0.1, 2)},
                                       tolerance(t));
    }
}

TEST(LowerNormOps, BatchNormWithSymbolicBatchAndAWrongParamCount) {
  const std::string model = R"(kiln.model opsets {"" = 15}
graph @g(%x: f32[n,c], %s: f32[k], %b: f32[k], %m: f32[k], %v: f32[k]) -> (%y) {
  %y = BatchNormalization(%x, %s, %b, %m, %v) : f32[n,c]
})";
  for (int64_t n : {1, 7}) {
    expectArtifactMatchesInterpreter(
        model,
        {randomTensor(DType::F32, {n, 3}, 1), randomTensor(DType::F32, {3}, 2),
         randomTensor(DType::F32, {3}, 3), randomTensor(DType::F32, {3}, 4),
         randomTensor(DType::F32, {3}, 5, 0.1, 2)},
        tolerance(DType::F32));
  }
  const Tensor two = randomTensor(DType::F32, {2}, 2);
  EXPECT_NE(artifactRunError(model, {randomTensor(DType::F32, {2, 3}, 1), two, two, two, two})
                .find("expected 3"),
            std::string::npos);
}

// ---- LRN, MeanVarianceNormalization ----------------------------------------------------------

TEST(LowerNormOps, LrnWithEveryWindowSize) {
  for (DType t : {DType::F32, DType::F64, DType::F16})
    for (int64_t size : {1, 2, 3, 5, 8})
      for (const Shape64 &x : {Shape64{2, 5, 3, 4}, Shape64{1, 6, 7}}) {
        SCOPED_TRACE(type(t, x) + " size " + std::to_string(size));
        const std::string model = R"(kiln.model opsets {"" = 13}
graph @g(%x: )" + type(t, x) + R"() -> (%y) {
  %y = LRN(%x) {alpha = 0.002, beta = 0.5, bias = 2.0, size = )" +
                                  std::to_string(size) + "} : " + type(t, x) + "\n}";
        expectArtifactMatchesInterpreter(model, {randomTensor(t, x, size)}, tolerance(t));
      }
}

TEST(LowerNormOps, MeanVarianceNormalizationOverAnySetOfAxes) {
  const Shape64 x = {2, 3, 4, 5};
  for (const std::string axes :
       {"", "axes = [2, 3]", "axes = [0]", "axes = [1]", "axes = [0, 1, 2, 3]", "axes = [-1, 1]"})
    for (DType t : {DType::F32, DType::F64, DType::F16}) {
      SCOPED_TRACE(axes + " " + std::string(dtypeName(t)));
      const std::string model = R"(kiln.model opsets {"" = 13}
graph @g(%x: )" + type(t, x) + R"() -> (%y) {
  %y = MeanVarianceNormalization(%x))" +
                                (axes.empty() ? "" : " {" + axes + "}") + " : " + type(t, x) +
                                "\n}";
      expectArtifactMatchesInterpreter(model, {randomTensor(t, x, 3)}, tolerance(t));
    }
}

TEST(LowerNormOps, ManyThreadsGiveTheSameResult) {
  OpCheckOptions o = tolerance(DType::F64);
  o.threads = 4;
  const Shape64 x = {16, 8, 9, 10};
  const std::string mvn = R"(kiln.model opsets {"" = 13}
graph @g(%x: f64[16,8,9,10]) -> (%y) {
  %y = MeanVarianceNormalization(%x) {axes = [0, 2]} : f64[16,8,9,10]
})";
  expectArtifactMatchesInterpreter(mvn, {randomTensor(DType::F64, x, 1)}, o);
  const std::string lrn = R"(kiln.model opsets {"" = 13}
graph @g(%x: f64[16,8,9,10]) -> (%y) {
  %y = LRN(%x) {size = 3} : f64[16,8,9,10]
})";
  expectArtifactMatchesInterpreter(lrn, {randomTensor(DType::F64, x, 2)}, o);
  expectArtifactMatchesInterpreter(groupNormModel(DType::F64, x, 4, 8, 21),
                                   {randomTensor(DType::F64, x, 3),
                                    randomTensor(DType::F64, {8}, 4),
                                    randomTensor(DType::F64, {8}, 5)},
                                   o);
}

} // namespace
} // namespace kiln
