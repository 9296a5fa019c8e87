// Pool lowerings (lower/pool_ops.cpp) through the artifact against the
// interpreter, on random inputs. The forms the f32 pooling microkernel
// takes reach the lowering as its general variant, run directly.
#include "lower_conv_test_util.h"

#include <gtest/gtest.h>

#include <limits>

namespace kiln {
namespace {

using testing::expectArtifactMatchesInterpreter;
using testing::expectGeneralVariantsMatchInterpreter;
using testing::expectRunError;
using testing::OpCheckOptions;
using testing::randomTensor;
using testing::typeText;

// A model of one pool over x; outputs have unknown dims (the dispatch
// sizes them on each run).
std::string poolModel(const std::string &op, const std::string &xType, const std::string &attrs,
                      DType outType, int rank, bool indices = false) {
  std::string out = std::string(dtypeName(outType)) + "[";
  for (int i = 0; i < rank; ++i) out += i ? ",?" : "?";
  out += "]";
  std::string idx = "i64" + out.substr(out.find('['));
  return "kiln.model opsets {\"\" = 19}\ngraph @g(%x: " + xType + ") -> (%y" +
         (indices ? ", %i" : "") + ") {\n  %y" + (indices ? ", %i" : "") + " = " + op + "(%x) {" +
         attrs + "} : " + out + (indices ? ", " + idx : "") + "\n}";
}

OpCheckOptions halfTolerance() {
  OpCheckOptions o;
  o.rtol = 1e-2;
  o.atol = 1e-2;
  return o;
}

TEST(LowerPoolOps, MaxPoolPadsStridesDilationsAndCeilModeInF64) {
  const std::string attrs[] = {
      "kernel_shape = [3, 2], pads = [1, 0, 2, 1], strides = [2, 1], dilations = [1, 2]",
      "kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1",
      "kernel_shape = [2, 3], strides = [3, 2], pads = [1, 1, 1, 1], ceil_mode = 1",
      "kernel_shape = [3, 2], auto_pad = \"SAME_UPPER\", strides = [2, 3]",
      "kernel_shape = [3, 2], auto_pad = \"SAME_LOWER\", strides = [2, 2], dilations = [2, 1]",
      "kernel_shape = [2, 2], auto_pad = \"VALID\", strides = [2, 2], ceil_mode = 1",
  };
  for (const std::string &a : attrs) {
    SCOPED_TRACE(a);
    expectArtifactMatchesInterpreter(poolModel("MaxPool", "f64[2,3,9,8]", a, DType::F64, 4),
                                     {randomTensor(DType::F64, {2, 3, 9, 8}, 1)});
  }
}

TEST(LowerPoolOps, MaxPoolIndicesInBothStorageOrders) {
  for (int order = 0; order <= 1; ++order) {
    SCOPED_TRACE(::testing::Message() << "storage_order " << order);
    const std::string attrs = "kernel_shape = [3, 2], pads = [1, 1, 1, 0], strides = [2, 1], "
                              "storage_order = " +
                              std::to_string(order);
    expectArtifactMatchesInterpreter(
        poolModel("MaxPool", "f32[2,3,7,6]", attrs, DType::F32, 4, true),
        {randomTensor(DType::F32, {2, 3, 7, 6}, 2)});
    expectArtifactMatchesInterpreter(
        poolModel("MaxPool", "f32[1,2,4,5,3]",
                  "kernel_shape = [2, 2, 2], storage_order = " + std::to_string(order), DType::F32,
                  5, true),
        {randomTensor(DType::F32, {1, 2, 4, 5, 3}, 3)});
  }
}

TEST(LowerPoolOps, MaxPoolPropagatesNaNAndItsIndex) {
  Tensor x = randomTensor(DType::F32, {1, 1, 4, 4}, 4);
  x.setDouble(5, std::numeric_limits<double>::quiet_NaN());
  x.setDouble(10, std::numeric_limits<double>::quiet_NaN());
  expectArtifactMatchesInterpreter(poolModel("MaxPool", "f32[1,1,4,4]",
                                             "kernel_shape = [2, 2], strides = [1, 1]", DType::F32,
                                             4, true),
                                   {x});
}

TEST(LowerPoolOps, MaxPoolWindowsEntirelyInThePaddingGiveTheLowestValue) {
  // Taps at -2 and 1, then -1 and 2: none inside the one input column.
  expectArtifactMatchesInterpreter(
      poolModel("MaxPool", "f32[1,2,1,1]",
                "kernel_shape = [1, 2], dilations = [1, 3], pads = [0, 2, 0, 2]", DType::F32, 4,
                true),
      {randomTensor(DType::F32, {1, 2, 1, 1}, 5)});
}

TEST(LowerPoolOps, MaxPoolOfIntegersAndHalfFloatsIn1dAnd3d) {
  for (DType t : {DType::I8, DType::U8, DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(t));
    expectArtifactMatchesInterpreter(poolModel("MaxPool", typeText(t, {2, 3, 11}),
                                               "kernel_shape = [3], pads = [1, 2], strides = [2]",
                                               t, 3, true),
                                     {randomTensor(t, {2, 3, 11}, 6, -100, 100)});
  }
  expectArtifactMatchesInterpreter(poolModel("MaxPool", "f16[1,2,5,4,6]",
                                             "kernel_shape = [2, 3, 2], strides = [2, 1, 2]",
                                             DType::F16, 5),
                                   {randomTensor(DType::F16, {1, 2, 5, 4, 6}, 7)});
}

TEST(LowerPoolOps, AveragePoolCountsPaddingOrNot) {
  for (int count = 0; count <= 1; ++count)
    for (const char *extra : {"", ", ceil_mode = 1", ", dilations = [2, 1]"}) {
      const std::string attrs = "kernel_shape = [3, 3], pads = [1, 2, 2, 1], strides = [2, 2], "
                                "count_include_pad = " +
                                std::to_string(count) + extra;
      SCOPED_TRACE(attrs);
      expectArtifactMatchesInterpreter(
          poolModel("AveragePool", "f64[2,2,8,9]", attrs, DType::F64, 4),
          {randomTensor(DType::F64, {2, 2, 8, 9}, 8)});
    }
}

TEST(LowerPoolOps, AveragePoolIn1dAnd3dAndHalfFloats) {
  expectArtifactMatchesInterpreter(
      poolModel("AveragePool", "f64[2,3,10]",
                "kernel_shape = [4], pads = [2, 1], strides = [3], count_include_pad = 1",
                DType::F64, 3),
      {randomTensor(DType::F64, {2, 3, 10}, 9)});
  expectArtifactMatchesInterpreter(
      poolModel("AveragePool", "bf16[1,2,4,5,6]",
                "kernel_shape = [2, 2, 3], auto_pad = \"SAME_UPPER\", strides = [1, 2, 2]",
                DType::BF16, 5),
      {randomTensor(DType::BF16, {1, 2, 4, 5, 6}, 10)}, halfTolerance());
}

TEST(LowerPoolOps, LpPoolForSeveralP) {
  for (int p : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << "p=" << p);
    expectArtifactMatchesInterpreter(
        poolModel("LpPool", "f32[2,3,7,6]",
                  "kernel_shape = [3, 2], pads = [1, 0, 1, 1], strides = [2, 2], p = " +
                      std::to_string(p),
                  DType::F32, 4),
        {randomTensor(DType::F32, {2, 3, 7, 6}, 11)});
  }
  expectArtifactMatchesInterpreter(
      poolModel("LpPool", "f16[1,2,9]", "kernel_shape = [3], strides = [2], p = 2", DType::F16, 3),
      {randomTensor(DType::F16, {1, 2, 9}, 12)}, halfTolerance());
}

TEST(LowerPoolOps, GlobalPoolsOverAnyRank) {
  for (const char *op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
    for (const Shape64 &shape : std::vector<Shape64>{{2, 3}, {2, 3, 7}, {1, 2, 3, 4, 5}}) {
      SCOPED_TRACE(::testing::Message() << op << " " << shapeToString(shape));
      expectArtifactMatchesInterpreter(
          poolModel(op, typeText(DType::F64, shape), "", DType::F64, int(shape.size())),
          {randomTensor(DType::F64, shape, 13)});
    }
  expectArtifactMatchesInterpreter(
      poolModel("GlobalLpPool", "f32[2,3,4,4]", "p = 3", DType::F32, 4),
      {randomTensor(DType::F32, {2, 3, 4, 4}, 14)});
  expectArtifactMatchesInterpreter(
      poolModel("GlobalAveragePool", "f16[2,3,5,5]", "", DType::F16, 4),
      {randomTensor(DType::F16, {2, 3, 5, 5}, 15)}, halfTolerance());
}

TEST(LowerPoolOps, GlobalMaxPoolOfAllMinusInfinity) {
  for (DType t : {DType::F32, DType::F64}) {
    Tensor x(t, {1, 2, 3});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.setDouble(i, -std::numeric_limits<double>::infinity());
    expectArtifactMatchesInterpreter(poolModel("GlobalMaxPool", typeText(t, {1, 2, 3}), "", t, 3),
                                     {x});
  }
}

TEST(LowerPoolOps, GlobalAveragePoolReportsEmptyPlanes) {
  expectRunError(poolModel("GlobalAveragePool", "f64[1,2,n]", "", DType::F64, 3),
                 {randomTensor(DType::F64, {1, 2, 0}, 1)}, "empty spatial dims");
}

TEST(LowerPoolOps, PoolsWithSymbolicDimsAndSamePadding) {
  const std::string model = poolModel(
      "MaxPool", "f32[n,2,h,w]",
      "kernel_shape = [3, 3], auto_pad = \"SAME_UPPER\", strides = [2, 2]", DType::F32, 4);
  for (auto [n, h, w] : {std::tuple{1, 5, 4}, {2, 8, 9}, {1, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << n << "x" << h << "x" << w);
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {n, 2, h, w}, 16)});
  }
}

TEST(LowerPoolOps, PoolReportsAnInputSmallerThanTheWindow) {
  expectRunError(poolModel("AveragePool", "f64[1,1,h,4]", "kernel_shape = [3, 3]", DType::F64, 4),
                 {randomTensor(DType::F64, {1, 1, 2, 4}, 1)}, "is smaller than the dilated kernel");
}

TEST(LowerPoolOps, PoolMicrokernelTakesSamePaddingAndIgnoresCeilModeUnderValid) {
  const std::string attrs[] = {
      "kernel_shape = [3, 2], auto_pad = \"SAME_UPPER\", strides = [2, 3]",
      "kernel_shape = [3, 3], auto_pad = \"SAME_LOWER\", strides = [2, 2], ceil_mode = 1",
      "kernel_shape = [2, 2], auto_pad = \"VALID\", strides = [2, 2], ceil_mode = 1",
  };
  for (const char *op : {"MaxPool", "AveragePool"})
    for (const std::string &a : attrs) {
      SCOPED_TRACE(std::string(op) + " " + a);
      expectArtifactMatchesInterpreter(poolModel(op, "f32[2,3,9,8]", a, DType::F32, 4),
                                       {randomTensor(DType::F32, {2, 3, 9, 8}, 18)});
    }
}

// With a fixed channel count the types prove that the pool step fits every
// run: no variant, and an empty batch is the step's own job.
TEST(LowerPoolOps, PoolStepsWithAFixedChannelCountTakeEmptyBatches) {
  for (const char *op : {"GlobalAveragePool", "GlobalMaxPool", "MaxPool"}) {
    const std::string attrs = std::string(op) == "MaxPool" ? "kernel_shape = [2, 2]" : "";
    const std::string m = poolModel(op, "f32[n,2,h,w]", attrs, DType::F32, 4);
    SCOPED_TRACE(m);
    for (int64_t n : {0, 2}) {
      std::vector<Tensor> in = {randomTensor(DType::F32, {n, 2, 5, 4}, 18)};
      EXPECT_EQ(expectGeneralVariantsMatchInterpreter(m, in), 0);
      expectArtifactMatchesInterpreter(m, in);
    }
  }
}

// The channel count is symbolic: with a fixed one the types prove that the
// pool step fits every run, and it gets no variant.
TEST(LowerPoolOps, PoolMicrokernelGeneralVariants) {
  const std::string models[] = {
      poolModel("MaxPool", "f32[n,c,h,w]",
                "kernel_shape = [3, 2], pads = [1, 0, 1, 1], strides = [2, 1], ceil_mode = 1",
                DType::F32, 4),
      poolModel("AveragePool", "f32[n,c,h,w]",
                "kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 1", DType::F32, 4),
      poolModel("GlobalAveragePool", "f32[n,c,h,w]", "", DType::F32, 4),
      poolModel("GlobalMaxPool", "f32[n,c,h,w]", "", DType::F32, 4),
  };
  for (const std::string &m : models) {
    SCOPED_TRACE(m);
    EXPECT_GT(
        expectGeneralVariantsMatchInterpreter(m, {randomTensor(DType::F32, {2, 2, 7, 6}, 17)}), 0);
  }
}

} // namespace
} // namespace kiln
