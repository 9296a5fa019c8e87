// Signal-processing lowerings (lower/signal_ops.cpp) through the artifact,
// against the interpreter (op_check.h): DFT in every direction, side and
// axis form, with dft_length padding and truncating, STFT with and without
// a window, the three windows and the mel filter bank, symbolic dims and
// the run-time errors of bad inputs.
#include "artifact_run_error.h"
#include "op_check.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing::artifactRunError;
using testing::expectArtifactMatchesInterpreter;
using testing::randomTensor;

Tensor scalarI64(int64_t v) {
  return Tensor::fromVector(std::vector<int64_t>{v}, {1});
}

std::string dftModel(const std::string &inType, const std::string &attrs, bool lengthInput,
                     bool axisInput) {
  std::string inputs = "%x: " + inType;
  std::string args = "%x";
  if (lengthInput || axisInput) {
    inputs += ", %n: i64[1]";
    args += lengthInput ? ", %n" : ", _";
  }
  if (axisInput) {
    inputs += ", %axis: i64[]";
    args += ", %axis";
  }
  return R"(kiln.model opsets {"" = 20}
graph @g()" +
         inputs + R"() -> (%y) {
  %y = DFT()" +
         args + ") {" + attrs + R"(} : f32[*]
})";
}

TEST(LowerSignalOps, DftEveryDirectionSideAndAxis) {
  const Tensor complex = randomTensor(DType::F32, {2, 5, 4, 2}, 1);
  const Tensor real = randomTensor(DType::F32, {2, 5, 4, 1}, 2);
  for (int axis : {1, 2, -2})
    for (int inverse = 0; inverse <= 1; ++inverse)
      for (int onesided = 0; onesided <= 1; ++onesided) {
        SCOPED_TRACE(::testing::Message()
                     << "axis " << axis << " inverse " << inverse << " onesided " << onesided);
        const std::string attrs = "axis = " + std::to_string(axis) +
                                  ", inverse = " + std::to_string(inverse) +
                                  ", onesided = " + std::to_string(onesided);
        expectArtifactMatchesInterpreter(dftModel("f32[2,5,4,2]", attrs, false, false), {complex},
                                         {1e-4, 1e-5});
        if (!(inverse && onesided))
          expectArtifactMatchesInterpreter(dftModel("f32[2,5,4,1]", attrs, false, false), {real},
                                           {1e-4, 1e-5});
      }
}

TEST(LowerSignalOps, DftLengthPadsOrTruncatesAndAxisComesFromAnInput) {
  const Tensor x = randomTensor(DType::F32, {3, 6, 2}, 3);
  for (int64_t n : {3, 6, 9})
    for (int inverse = 0; inverse <= 1; ++inverse)
      for (int onesided = 0; onesided <= 1; ++onesided) {
        SCOPED_TRACE(::testing::Message()
                     << "n " << n << " inverse " << inverse << " onesided " << onesided);
        const std::string attrs =
            "inverse = " + std::to_string(inverse) + ", onesided = " + std::to_string(onesided);
        expectArtifactMatchesInterpreter(dftModel("f32[3,6,2]", attrs, true, true),
                                         {x, scalarI64(n), Tensor::scalar<int64_t>(-2)},
                                         {1e-4, 1e-5});
        expectArtifactMatchesInterpreter(dftModel("f32[3,6,2]", attrs, true, true),
                                         {x, scalarI64(n), Tensor::scalar<int64_t>(0)},
                                         {1e-4, 1e-5});
      }
}

TEST(LowerSignalOps, DftWithSymbolicDimsAndOtherFloatTypes) {
  const std::string model = dftModel("f32[b,n,1]", "axis = 1", false, false);
  for (int64_t n : {1, 7, 16})
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {2, n, 1}, n)}, {1e-4, 1e-5});
  expectArtifactMatchesInterpreter(
      R"(kiln.model opsets {"" = 17}
graph @g(%x: f64[4,6,2]) -> (%y) {
  %y = DFT(%x) {axis = 1, inverse = 1} : f64[4,6,2]
})",
      {randomTensor(DType::F64, {4, 6, 2}, 4)}, {1e-9, 1e-12});
  expectArtifactMatchesInterpreter(
      R"(kiln.model opsets {"" = 17}
graph @g(%x: f16[4,6,1]) -> (%y) {
  %y = DFT(%x) {axis = 1, onesided = 1} : f16[4,4,2]
})",
      {randomTensor(DType::F16, {4, 6, 1}, 5)}, {2e-3, 2e-3});
}

TEST(LowerSignalOps, DftReportsABadAxisAndLength) {
  const std::string model = dftModel("f32[3,6,2]", "", true, true);
  const Tensor x = randomTensor(DType::F32, {3, 6, 2}, 6);
  EXPECT_NE(
      artifactRunError(model, {x, scalarI64(4), Tensor::scalar<int64_t>(2)}).find("out of range"),
      std::string::npos);
  EXPECT_NE(artifactRunError(model, {x, scalarI64(0), Tensor::scalar<int64_t>(1)})
                .find("must be positive"),
            std::string::npos);
}

TEST(LowerSignalOps, StftWithAndWithoutAWindow) {
  const Tensor real = randomTensor(DType::F32, {2, 20, 1}, 10);
  const Tensor complex = randomTensor(DType::F32, {1, 17, 2}, 11);
  const Tensor window = randomTensor(DType::F32, {6}, 12, 0, 1);
  for (int onesided = 0; onesided <= 1; ++onesided) {
    SCOPED_TRACE(onesided);
    const std::string attrs = "{onesided = " + std::to_string(onesided) + "}";
    expectArtifactMatchesInterpreter(R"(kiln.model opsets {"" = 17}
graph @g(%x: f32[2,20,1], %step: i64[], %w: f32[6]) -> (%y) {
  %y = STFT(%x, %step, %w) )" + attrs + R"( : f32[?,?,?,?]
})",
                                     {real, Tensor::scalar<int64_t>(3), window}, {1e-4, 1e-5});
    expectArtifactMatchesInterpreter(
        R"(kiln.model opsets {"" = 17}
graph @g(%x: f32[1,17,2], %step: i64[], %len: i64[]) -> (%y) {
  %y = STFT(%x, %step, _, %len) )" +
            attrs + R"( : f32[?,?,?,?]
})",
        {complex, Tensor::scalar<int64_t>(4), Tensor::scalar<int64_t>(5)}, {1e-4, 1e-5});
  }
  const std::string both = R"(kiln.model opsets {"" = 17}
graph @g(%x: f32[2,20,1], %step: i64[], %w: f32[6], %len: i64[]) -> (%y) {
  %y = STFT(%x, %step, %w, %len) {onesided = 0} : f32[?,?,?,?]
})";
  expectArtifactMatchesInterpreter(
      both, {real, Tensor::scalar<int64_t>(2), window, Tensor::scalar<int64_t>(6)}, {1e-4, 1e-5});
  EXPECT_NE(
      artifactRunError(both, {real, Tensor::scalar<int64_t>(2), window, Tensor::scalar<int64_t>(5)})
          .find("differs from the window length"),
      std::string::npos);
}

TEST(LowerSignalOps, WindowsEveryKindSizeAndOutputType) {
  for (const char *op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    for (int periodic = 0; periodic <= 1; ++periodic)
      for (const auto &[code, type] : {std::pair{"1", "f32"}, {"11", "f64"}, {"6", "i32"}}) {
        SCOPED_TRACE(::testing::Message() << op << " periodic " << periodic << " type " << type);
        const std::string model = std::string(R"(kiln.model opsets {"" = 17}
graph @g(%n: i64[]) -> (%y) {
  %y = )") + op + R"((%n) {periodic = )" +
                                  std::to_string(periodic) + ", output_datatype = " + code +
                                  "} : " + type + R"([?]
})";
        for (int64_t n : {0, 1, 2, 10})
          expectArtifactMatchesInterpreter(model, {Tensor::scalar<int64_t>(n)});
      }
}

TEST(LowerSignalOps, MelWeightMatrixFilterBanks) {
  const std::string model = R"(kiln.model opsets {"" = 17}
graph @g(%mel: i64[], %n: i64[], %rate: i64[], %lo: f32[], %hi: f32[]) -> (%y) {
  %y = MelWeightMatrix(%mel, %n, %rate, %lo, %hi) : f32[?,?]
})";
  auto run = [&](int64_t mel, int64_t n, int64_t rate, float lo, float hi) {
    SCOPED_TRACE(::testing::Message() << mel << " " << n << " " << rate << " " << lo << " " << hi);
    expectArtifactMatchesInterpreter(model,
                                     {Tensor::scalar<int64_t>(mel), Tensor::scalar<int64_t>(n),
                                      Tensor::scalar<int64_t>(rate), Tensor::scalar<float>(lo),
                                      Tensor::scalar<float>(hi)});
  };
  run(8, 16, 8192, 0, 4096);
  run(10, 64, 16000, 300, 7000);
  run(3, 9, 1000, 20, 450);
  EXPECT_NE(artifactRunError(model, {Tensor::scalar<int64_t>(8), Tensor::scalar<int64_t>(16),
                                     Tensor::scalar<int64_t>(8192), Tensor::scalar<float>(0),
                                     Tensor::scalar<float>(8000)})
                .find("maps past the last DFT bin"),
            std::string::npos);
}

TEST(LowerSignalOps, LargeTransformsSplitOverFourThreads) {
  testing::OpCheckOptions four{1e-4, 1e-4};
  four.threads = 4;
  expectArtifactMatchesInterpreter(dftModel("f32[3,300,2]", "axis = 1", false, false),
                                   {randomTensor(DType::F32, {3, 300, 2}, 60)}, four);
  expectArtifactMatchesInterpreter(R"(kiln.model opsets {"" = 17}
graph @g(%x: f32[2,2000,1], %step: i64[], %w: f32[128]) -> (%y) {
  %y = STFT(%x, %step, %w) : f32[?,?,?,?]
})",
                                   {randomTensor(DType::F32, {2, 2000, 1}, 61),
                                    Tensor::scalar<int64_t>(64),
                                    randomTensor(DType::F32, {128}, 62)},
                                   four);
}

} // namespace
} // namespace kiln
