// Resampling lowerings (lower/sampling_ops.cpp, lower/resize_lowering.cpp)
// through the artifact, against the interpreter (op_check.h), on random
// inputs: every Resize mode, coordinate transformation, rounding and
// policy, GridSample, RoiAlign and MaxUnpool in their forms, symbolic dims,
// and the run-time errors of bad inputs.
#include "artifact_run_error.h"
#include "op_check.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing::artifactRunError;
using testing::expectArtifactMatchesInterpreter;
using testing::randomTensor;

Tensor f32s(std::vector<float> v) {
  return Tensor::fromVector(v, {int64_t(v.size())});
}
Tensor i64s(std::vector<int64_t> v) {
  return Tensor::fromVector(v, {int64_t(v.size())});
}

// A Resize of x (of `dims`) by run-time scales.
std::string resizeByScales(const std::string &attrs, const std::string &type = "f32",
                           const std::string &dims = "[1,2,5,6]") {
  return R"(kiln.model opsets {"" = 19}
graph @g(%x: )" +
         type + dims + R"(, %scales: f32[4]) -> (%y) {
  %y = Resize(%x, _, %scales) {)" +
         attrs + R"(} : )" + type + R"([?,?,?,?]
})";
}

const char *const kCoords[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                               "align_corners", "asymmetric",           "tf_half_pixel_for_nn"};

TEST(LowerSamplingOps, ResizeNearestEveryRoundingAndCoordinateMode) {
  const Tensor x = randomTensor(DType::F32, {1, 2, 5, 6}, 1);
  for (const char *rounding : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
    for (const char *coord : kCoords)
      for (const auto &scales : {std::vector<float>{1, 1, 1.7f, 0.6f}, {1, 1, 3, 2}}) {
        SCOPED_TRACE(::testing::Message() << rounding << " " << coord << " " << scales[2]);
        expectArtifactMatchesInterpreter(
            resizeByScales(std::string("mode = \"nearest\", nearest_mode = \"") + rounding +
                           "\", coordinate_transformation_mode = \"" + coord + "\""),
            {x, f32s(scales)});
      }
}

TEST(LowerSamplingOps, ResizeLinearAndCubicEveryCoordinateMode) {
  const Tensor x = randomTensor(DType::F32, {1, 2, 5, 6}, 2);
  for (const char *mode : {"linear", "cubic"})
    for (const char *coord : kCoords)
      for (const auto &scales :
           {std::vector<float>{1, 1, 1.7f, 0.6f}, {1, 1, 2, 3}, {1, 1, 0.5f, 0.4f}}) {
        SCOPED_TRACE(::testing::Message() << mode << " " << coord << " " << scales[2]);
        expectArtifactMatchesInterpreter(resizeByScales(std::string("mode = \"") + mode +
                                                        "\", coordinate_transformation_mode = \"" +
                                                        coord + "\""),
                                         {x, f32s(scales)});
      }
}

TEST(LowerSamplingOps, ResizeCubicCoefficientAndExcludeOutside) {
  const Tensor x = randomTensor(DType::F32, {1, 2, 5, 6}, 3);
  for (int exclude = 0; exclude <= 1; ++exclude)
    for (const char *a : {"-0.5", "-0.75"})
      expectArtifactMatchesInterpreter(
          resizeByScales(std::string("mode = \"cubic\", cubic_coeff_a = ") + a +
                         ", exclude_outside = " + std::to_string(exclude)),
          {x, f32s({1, 1, 1.3f, 0.7f})});
}

TEST(LowerSamplingOps, ResizeAntialiasStretchesTheFilterWhenDownsampling) {
  const Tensor x = randomTensor(DType::F32, {1, 2, 9, 11}, 4);
  const std::string model = R"(kiln.model opsets {"" = 19}
graph @g(%x: f32[1,2,9,11], %scales: f32[4]) -> (%y) {
  %y = Resize(%x, _, %scales) {mode = "MODE", antialias = 1, exclude_outside = EX} : f32[?,?,?,?]
})";
  for (const char *mode : {"linear", "cubic"})
    for (const char *ex : {"0", "1"})
      for (const auto &scales : {std::vector<float>{1, 1, 0.45f, 0.3f}, {1, 1, 1.5f, 0.8f}}) {
        std::string m = model;
        m.replace(m.find("MODE"), 4, mode);
        m.replace(m.find("EX"), 2, ex);
        SCOPED_TRACE(::testing::Message() << mode << " exclude " << ex << " " << scales[3]);
        expectArtifactMatchesInterpreter(m, {x, f32s(scales)});
      }
}

TEST(LowerSamplingOps, ResizeSizesWithEveryKeepAspectRatioPolicy) {
  const Tensor x = randomTensor(DType::F32, {1, 3, 4, 7}, 5);
  for (const char *policy : {"stretch", "not_larger", "not_smaller"})
    for (const char *mode : {"nearest", "linear"}) {
      SCOPED_TRACE(::testing::Message() << policy << " " << mode);
      const std::string model = std::string(R"(kiln.model opsets {"" = 19}
graph @g(%x: f32[1,3,4,7], %sizes: i64[2]) -> (%y) {
  %y = Resize(%x, _, _, %sizes) {mode = ")") +
                                mode + R"(", axes = [2, 3], keep_aspect_ratio_policy = ")" +
                                policy +
                                R"("} : f32[?,?,?,?]
})";
      expectArtifactMatchesInterpreter(model, {x, i64s({6, 5})});
      expectArtifactMatchesInterpreter(model, {x, i64s({3, 11})});
    }
}

TEST(LowerSamplingOps, ResizeAxesAttributeResizesOnlyThoseAxes) {
  const std::string model = R"(kiln.model opsets {"" = 19}
graph @g(%x: f32[2,3,4,5], %scales: f32[2]) -> (%y) {
  %y = Resize(%x, _, %scales) {mode = "linear", axes = [-1, 1]} : f32[?,?,?,?]
})";
  expectArtifactMatchesInterpreter(model,
                                   {randomTensor(DType::F32, {2, 3, 4, 5}, 6), f32s({1.6f, 0.7f})});
}

TEST(LowerSamplingOps, ResizeTfCropAndResizeExtrapolatesOutsideTheRoi) {
  const Tensor x = randomTensor(DType::F32, {1, 1, 6, 7}, 7);
  for (const char *mode : {"nearest", "linear", "cubic"}) {
    SCOPED_TRACE(mode);
    const std::string model =
        std::string(R"(kiln.model opsets {"" = 13}
graph @g(%x: f32[1,1,6,7], %roi: f32[8], %scales: f32[4]) -> (%y) {
  %y = Resize(%x, %roi, %scales) {mode = ")") +
        mode +
        R"(", coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = 10.0} : f32[?,?,?,?]
})";
    expectArtifactMatchesInterpreter(
        model, {x, f32s({0, 0, -0.2f, 0.3f, 1, 1, 0.8f, 1.4f}), f32s({1, 1, 1.5f, 0.8f})});
    expectArtifactMatchesInterpreter(
        model, {x, f32s({0, 0, 0.1f, 0.2f, 1, 1, 0.9f, 0.7f}), f32s({1, 1, 1, 1})});
  }
}

TEST(LowerSamplingOps, ResizeIntegerAndHalfTypes) {
  for (const char *mode : {"nearest", "linear", "cubic"}) {
    SCOPED_TRACE(mode);
    expectArtifactMatchesInterpreter(
        resizeByScales(std::string("mode = \"") + mode + "\"", "u8"),
        {randomTensor(DType::U8, {1, 2, 5, 6}, 8, 0, 256), f32s({1, 1, 1.7f, 0.6f})});
    expectArtifactMatchesInterpreter(
        resizeByScales(std::string("mode = \"") + mode + "\"", "i32"),
        {randomTensor(DType::I32, {1, 2, 5, 6}, 9, -1000, 1000), f32s({1, 1, 2.5f, 1.5f})});
    expectArtifactMatchesInterpreter(
        resizeByScales(std::string("mode = \"") + mode + "\"", "f16"),
        {randomTensor(DType::F16, {1, 2, 5, 6}, 10), f32s({1, 1, 1.7f, 0.6f})}, {1e-3, 1e-3});
    expectArtifactMatchesInterpreter(
        resizeByScales(std::string("mode = \"") + mode + "\"", "f64"),
        {randomTensor(DType::F64, {1, 2, 5, 6}, 11), f32s({1, 1, 1.7f, 0.6f})});
  }
}

TEST(LowerSamplingOps, ResizeOfBooleans) {
  for (const char *mode : {"nearest", "linear"})
    expectArtifactMatchesInterpreter(
        resizeByScales(std::string("mode = \"") + mode + "\"", "bool"),
        {randomTensor(DType::Bool, {1, 2, 5, 6}, 17), f32s({1, 1, 1.7f, 0.6f})});
}

TEST(LowerSamplingOps, ResizeWithSymbolicDimsAndConstantScales) {
  const std::string model = R"(kiln.model opsets {"" = 19}
graph @g(%x: f32[n,c,h,w]) -> (%y) {
  %scales = Constant() {value = dense<f32[4]> [1.0, 1.0, 2.0, 1.5]} : f32[4]
  %y = Resize(%x, _, %scales) {mode = "linear"} : f32[n,c,?,?]
})";
  for (int64_t h : {1, 3, 8})
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {2, 3, h, h + 2}, h)});
}

TEST(LowerSamplingOps, ResizeByConstantScalesOfOneCopiesAndSkipsThoseAxes) {
  for (const char *type : {"f32", "u8"})
    for (const char *scales : {"[1.0, 1.0, 1.0, 1.0]", "[1.0, 1.0, 1.0, 2.5]"}) {
      SCOPED_TRACE(::testing::Message() << type << " " << scales);
      const std::string model = std::string(R"(kiln.model opsets {"" = 19}
graph @g(%x: )") + type + R"([2,3,4,5]) -> (%y) {
  %scales = Constant() {value = dense<f32[4]> )" +
                                scales + R"(} : f32[4]
  %y = Resize(%x, _, %scales) {mode = "cubic"} : )" +
                                type + R"([?,?,?,?]
})";
      expectArtifactMatchesInterpreter(
          model, {randomTensor(std::string(type) == "u8" ? DType::U8 : DType::F32, {2, 3, 4, 5}, 15,
                               0, 200)});
    }
  // tf_half_pixel_for_nn shifts even an axis of scale 1, so it is kept.
  expectArtifactMatchesInterpreter(R"(kiln.model opsets {"" = 11}
graph @g(%x: f32[1,2,4,5]) -> (%y) {
  %scales = Constant() {value = dense<f32[4]> [1.0, 1.0, 1.0, 2.0]} : f32[4]
  %y = Resize(%x, _, %scales) {mode = "linear", coordinate_transformation_mode = "tf_half_pixel_for_nn"} : f32[1,2,4,10]
})",
                                   {randomTensor(DType::F32, {1, 2, 4, 5}, 16)});
  EXPECT_NE(testing::artifactCompileError(R"(kiln.model opsets {"" = 19}
graph @g(%x: f32[1,2,4,5], %scales: f32[1]) -> (%y) {
  %y = Resize(%x, _, %scales) {axes = [3], coordinate_transformation_mode = "tf_half_pixel_for_nn"} : f32[?,?,?,?]
})")
                .find("Resize"),
            std::string::npos);
}

TEST(LowerSamplingOps, ResizeOfRankOneAndThree) {
  expectArtifactMatchesInterpreter(R"(kiln.model opsets {"" = 19}
graph @g(%x: f32[7], %scales: f32[1]) -> (%y) {
  %y = Resize(%x, _, %scales) {mode = "cubic"} : f32[?]
})",
                                   {randomTensor(DType::F32, {7}, 12), f32s({1.8f})});
  expectArtifactMatchesInterpreter(R"(kiln.model opsets {"" = 19}
graph @g(%x: f32[2,4,5], %sizes: i64[3]) -> (%y) {
  %y = Resize(%x, _, _, %sizes) {mode = "nearest"} : f32[?,?,?]
})",
                                   {randomTensor(DType::F32, {2, 4, 5}, 13), i64s({3, 2, 9})});
}

TEST(LowerSamplingOps, ResizeEmptyOutputAndBadScales) {
  const std::string model = resizeByScales("mode = \"linear\"");
  const Tensor x = randomTensor(DType::F32, {1, 2, 5, 6}, 14);
  expectArtifactMatchesInterpreter(model, {x, f32s({1, 1, 0.1f, 1})});
  EXPECT_NE(artifactRunError(model, {x, f32s({1, 1, -2, 1})}).find("scales must be finite"),
            std::string::npos);
  const std::string sizes = R"(kiln.model opsets {"" = 19}
graph @g(%x: f32[1,2,5,6], %sizes: i64[4]) -> (%y) {
  %y = Resize(%x, _, _, %sizes) {mode = "nearest"} : f32[?,?,?,?]
})";
  EXPECT_NE(artifactRunError(sizes, {x, i64s({1, 2, -1, 3})}).find("must not be negative"),
            std::string::npos);
}

// ---- GridSample ----------------------------------------------------------------------

TEST(LowerSamplingOps, GridSampleEveryModePaddingAndAlignment4D) {
  const Tensor x = randomTensor(DType::F32, {2, 3, 5, 6}, 20);
  const Tensor grid = randomTensor(DType::F32, {2, 4, 7, 2}, 21, -1.3, 1.3);
  for (const char *mode : {"linear", "nearest", "cubic"})
    for (const char *padding : {"zeros", "border", "reflection"})
      for (int align = 0; align <= 1; ++align) {
        SCOPED_TRACE(::testing::Message() << mode << " " << padding << " " << align);
        const std::string model = std::string(R"(kiln.model opsets {"" = 20}
graph @g(%x: f32[2,3,5,6], %grid: f32[2,4,7,2]) -> (%y) {
  %y = GridSample(%x, %grid) {mode = ")") +
                                  mode + R"(", padding_mode = ")" + padding +
                                  R"(", align_corners = )" + std::to_string(align) +
                                  R"(} : f32[2,3,4,7]
})";
        expectArtifactMatchesInterpreter(model, {x, grid});
      }
}

TEST(LowerSamplingOps, GridSampleVolumesAndIntegerImages) {
  for (const char *mode : {"linear", "nearest", "cubic"}) {
    SCOPED_TRACE(mode);
    const std::string model = std::string(R"(kiln.model opsets {"" = 20}
graph @g(%x: f32[1,2,3,4,5], %grid: f32[1,2,3,4,3]) -> (%y) {
  %y = GridSample(%x, %grid) {mode = ")") +
                              mode + R"(", padding_mode = "reflection"} : f32[1,2,2,3,4]
})";
    expectArtifactMatchesInterpreter(model,
                                     {randomTensor(DType::F32, {1, 2, 3, 4, 5}, 22),
                                      randomTensor(DType::F32, {1, 2, 3, 4, 3}, 23, -1.2, 1.2)});
  }
  expectArtifactMatchesInterpreter(R"(kiln.model opsets {"" = 20}
graph @g(%x: i32[1,2,4,4], %grid: f32[1,3,3,2]) -> (%y) {
  %y = GridSample(%x, %grid) {mode = "linear", padding_mode = "border"} : i32[1,2,3,3]
})",
                                   {randomTensor(DType::I32, {1, 2, 4, 4}, 24, -50, 50),
                                    randomTensor(DType::F32, {1, 3, 3, 2}, 25, -1.1, 1.1)});
}

TEST(LowerSamplingOps, GridSampleWithSymbolicDims) {
  const std::string model = R"(kiln.model opsets {"" = 20}
graph @g(%x: f32[n,c,h,w], %grid: f32[m,p,q,2]) -> (%y) {
  %y = GridSample(%x, %grid) {mode = "linear"} : f32[n,c,p,q]
})";
  for (int64_t k : {1, 2, 4})
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {k, 3, k + 2, 4}, k),
                                             randomTensor(DType::F32, {k, 2, k + 1, 2}, k + 9)});
  EXPECT_NE(artifactRunError(model, {randomTensor(DType::F32, {1, 3, 4, 4}, 1),
                                     randomTensor(DType::F32, {2, 2, 2, 2}, 2)})
                .find("grid batch"),
            std::string::npos);
}

// ---- RoiAlign ------------------------------------------------------------------------

TEST(LowerSamplingOps, RoiAlignEveryModeAndCoordinateTransformation) {
  const Tensor x = randomTensor(DType::F32, {2, 3, 10, 9}, 30);
  const Tensor rois = Tensor::fromVector(
      std::vector<float>{0, 0, 8, 9, 1.5f, 2.2f, 6.1f, 7.3f, -2, -1, 12, 3, 4, 4, 4.5f, 4.2f},
      {4, 4});
  const Tensor batch = i64s({0, 1, 1, 0});
  for (const char *mode : {"avg", "max"})
    for (const char *ctm : {"half_pixel", "output_half_pixel"})
      for (int ratio : {0, 2}) {
        SCOPED_TRACE(::testing::Message() << mode << " " << ctm << " " << ratio);
        const std::string model = std::string(R"(kiln.model opsets {"" = 16}
graph @g(%x: f32[2,3,10,9], %rois: f32[4,4], %batch: i64[4]) -> (%y) {
  %y = RoiAlign(%x, %rois, %batch) {mode = ")") +
                                  mode + R"(", coordinate_transformation_mode = ")" + ctm +
                                  R"(", output_height = 3, output_width = 4, sampling_ratio = )" +
                                  std::to_string(ratio) + R"(, spatial_scale = 0.9} : f32[4,3,3,4]
})";
        expectArtifactMatchesInterpreter(model, {x, rois, batch});
      }
}

TEST(LowerSamplingOps, RoiAlignLargeSamplingGridsAndHalfPrecision) {
  // Grids of 19 and of several hundred samples per side (sampling_ratio 0).
  const std::string model = R"(kiln.model opsets {"" = 16}
graph @g(%x: f16[1,2,40,40], %rois: f16[2,4], %batch: i32[2]) -> (%y) {
  %y = RoiAlign(%x, %rois, %batch) {mode = "MODE", output_height = 2, output_width = 1} : f16[2,2,2,1]
})";
  for (const char *mode : {"avg", "max"}) {
    std::string m = model;
    m.replace(m.find("MODE"), 4, mode);
    Tensor rois(DType::F16, {2, 4});
    const double corners[] = {0, 0, 39, 37, -300, -200, 500, 700};
    for (int i = 0; i < 8; ++i) rois.setDouble(i, corners[i]);
    expectArtifactMatchesInterpreter(m,
                                     {randomTensor(DType::F16, {1, 2, 40, 40}, 32), rois,
                                      Tensor::fromVector(std::vector<int32_t>{0, 0}, {2})},
                                     {2e-3, 2e-3});
  }
}

TEST(LowerSamplingOps, RoiAlignReportsBadBatchIndices) {
  const std::string model = R"(kiln.model opsets {"" = 16}
graph @g(%x: f32[1,2,5,5], %rois: f32[r,4], %batch: i64[r]) -> (%y) {
  %y = RoiAlign(%x, %rois, %batch) {output_height = 2, output_width = 2} : f32[r,2,2,2]
})";
  const Tensor rois = Tensor::fromVector(std::vector<float>{0, 0, 3, 3, 1, 1, 4, 4}, {2, 4});
  expectArtifactMatchesInterpreter(
      model, {randomTensor(DType::F32, {1, 2, 5, 5}, 31), rois, i64s({0, 0})});
  EXPECT_NE(
      artifactRunError(model, {randomTensor(DType::F32, {1, 2, 5, 5}, 31), rois, i64s({0, 3})})
          .find("batch index"),
      std::string::npos);
}

// ---- MaxUnpool -----------------------------------------------------------------------

TEST(LowerSamplingOps, MaxUnpoolWithAndWithoutOutputShape) {
  const Tensor x = randomTensor(DType::F32, {1, 2, 2, 3}, 40);
  const Tensor idx = randomTensor(DType::I64, {1, 2, 2, 3}, 41, 0, 2 * 4 * 6);
  expectArtifactMatchesInterpreter(R"(kiln.model opsets {"" = 11}
graph @g(%x: f32[1,2,2,3], %i: i64[1,2,2,3]) -> (%y) {
  %y = MaxUnpool(%x, %i) {kernel_shape = [2, 2], strides = [2, 2]} : f32[1,2,4,6]
})",
                                   {x, idx});
  expectArtifactMatchesInterpreter(
      R"(kiln.model opsets {"" = 11}
graph @g(%x: f32[1,2,2,3], %i: i64[1,2,2,3], %shape: i64[4]) -> (%y) {
  %y = MaxUnpool(%x, %i, %shape) {kernel_shape = [2, 2], strides = [2, 2]} : f32[?,?,?,?]
})",
      {x, randomTensor(DType::I64, {1, 2, 2, 3}, 42, 0, 2 * 4 * 5), i64s({1, 2, 5, 7})});
}

TEST(LowerSamplingOps, MaxUnpoolReportsIndicesOutOfRange) {
  const std::string model = R"(kiln.model opsets {"" = 11}
graph @g(%x: i32[1,1,2,2], %i: i64[1,1,2,2]) -> (%y) {
  %y = MaxUnpool(%x, %i) {kernel_shape = [2, 2], strides = [2, 2], pads = [0, 0, 1, 1]} : i32[1,1,3,3]
})";
  const Tensor x = randomTensor(DType::I32, {1, 1, 2, 2}, 43, -9, 9);
  expectArtifactMatchesInterpreter(
      model, {x, Tensor::fromVector(std::vector<int64_t>{0, 4, 8, 4}, {1, 1, 2, 2})});
  EXPECT_NE(artifactRunError(
                model, {x, Tensor::fromVector(std::vector<int64_t>{0, 9, 2, 3}, {1, 1, 2, 2})})
                .find("out of range"),
            std::string::npos);
}

TEST(LowerSamplingOps, LargeInputsSplitOverFourThreads) {
  testing::OpCheckOptions four;
  four.threads = 4;
  expectArtifactMatchesInterpreter(
      resizeByScales("mode = \"cubic\"", "f32", "[2,8,60,70]"),
      {randomTensor(DType::F32, {2, 8, 60, 70}, 50), f32s({1, 1, 1.3f, 0.8f})}, four);
  expectArtifactMatchesInterpreter(R"(kiln.model opsets {"" = 20}
graph @g(%x: f32[2,16,30,30], %grid: f32[2,40,40,2]) -> (%y) {
  %y = GridSample(%x, %grid) {mode = "cubic", padding_mode = "border"} : f32[2,16,40,40]
})",
                                   {randomTensor(DType::F32, {2, 16, 30, 30}, 51),
                                    randomTensor(DType::F32, {2, 40, 40, 2}, 52, -1.1, 1.1)},
                                   four);
  std::vector<float> rois;
  for (int r = 0; r < 40; ++r)
    for (float v : {float(r % 7), float(r % 5), float(r % 7 + 9), float(r % 5 + 12)})
      rois.push_back(v);
  std::vector<int64_t> batch(40, 1);
  expectArtifactMatchesInterpreter(R"(kiln.model opsets {"" = 16}
graph @g(%x: f32[2,32,24,24], %rois: f32[40,4], %batch: i64[40]) -> (%y) {
  %y = RoiAlign(%x, %rois, %batch) {output_height = 5, output_width = 5} : f32[40,32,5,5]
})",
                                   {randomTensor(DType::F32, {2, 32, 24, 24}, 53),
                                    Tensor::fromVector(rois, {40, 4}), i64s(batch)},
                                   four);
}

} // namespace
} // namespace kiln
