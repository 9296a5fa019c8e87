// Quantization lowerings (lower/quant_ops.cpp, quant_matmul.cpp,
// quant_conv.cpp) through the artifact, against the interpreter (op_check.h),
// on random inputs; plus the rounding cases (ties, saturation, the dynamic
// scale and zero point) against values worked out by hand, on both.
#include "op_check.h"

#include "interp/interpreter.h"
#include "ir/parser.h"
#include "package/package.h"
#include "runtime/api/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln {
namespace {

using testing::expectArtifactMatchesInterpreter;
using testing::randomTensor;

// A scalar of any dtype (f16 and bf16 included).
Tensor scalarOf(DType dtype, double v) {
  Tensor t(dtype, {});
  t.setDouble(0, v);
  return t;
}

template <class T> Tensor values(std::vector<T> v, Shape64 shape = {}) {
  if (shape.empty() && v.size() != 1) shape = {int64_t(v.size())};
  return Tensor::fromVector<T>(v, shape);
}

// The outputs of `model` on the interpreter and through the artifact.
struct BothRuns {
  std::vector<Tensor> interp, artifact;
};

BothRuns runBoth(const std::string &model, const std::vector<Tensor> &inputs) {
  BothRuns out;
  auto parsed = parseModel(model, "test.kir");
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
  if (!parsed.ok()) return out;
  std::vector<RtValue> in(inputs.begin(), inputs.end());
  Interpreter interp;
  auto want = interp.run(*parsed->graph, std::move(in));
  EXPECT_TRUE(want.ok()) << (want.ok() ? "" : want.error().message);
  if (want.ok())
    for (RtValue &v : *want) out.interp.push_back(v.tensor);
  auto again = parseModel(model, "test.kir");
  auto bytes = package::packageModel(std::move(*again), package::PackageOptions{});
  EXPECT_TRUE(bytes.ok()) << (bytes.ok() ? "" : bytes.error().message);
  if (!bytes.ok()) return out;
  auto loaded = rt::LoadedModel::fromMemory(bytes->data(), bytes->size());
  EXPECT_FALSE(loaded.error);
  if (loaded.error) return out;
  rt::Session session(*loaded.value, 1);
  auto got = session.run(inputs);
  EXPECT_TRUE(got.ok()) << (got.ok() ? "" : got.error().message);
  if (got.ok())
    for (RtValue &v : *got) out.artifact.push_back(v.tensor);
  return out;
}

// Both paths give exactly `want` for output `index`.
void expectBothGive(const BothRuns &runs, size_t index, const std::vector<double> &want) {
  for (const auto *side : {&runs.interp, &runs.artifact}) {
    const char *name = side == &runs.interp ? "interpreter" : "artifact";
    ASSERT_LT(index, side->size()) << name;
    const Tensor &t = (*side)[index];
    ASSERT_EQ(t.numel(), int64_t(want.size())) << name;
    for (int64_t i = 0; i < t.numel(); ++i)
      EXPECT_EQ(t.getDouble(i), want[size_t(i)]) << name << " element " << i;
  }
}

// The artifact's run-time error for `inputs` (the interpreter must fail too).
std::string artifactRunError(const std::string &model, const std::vector<Tensor> &inputs) {
  auto parsed = parseModel(model, "test.kir");
  if (!parsed.ok()) return "parse: " + parsed.error().message;
  auto bytes = package::packageModel(std::move(*parsed), package::PackageOptions{});
  if (!bytes.ok()) return "compile: " + bytes.error().message;
  auto loaded = rt::LoadedModel::fromMemory(bytes->data(), bytes->size());
  if (loaded.error) return "load: " + loaded.error->message;
  rt::Session session(*loaded.value, 1);
  auto got = session.run(inputs);
  return got.ok() ? "" : got.error().message;
}

std::string header(int opset = 21) {
  return "kiln.model opsets {\"\" = " + std::to_string(opset) + "}\n";
}

// ---- QuantizeLinear -------------------------------------------------------------------

TEST(LowerQuantOps, QuantizeRoundsHalfToEvenAndSaturates) {
  // scale 0.5: x / scale = 0.5, 1.5, 2.5, -0.5, -1.5 round to 0, 2, 2, -0, -2;
  // zero point 10; 200 and -200 saturate, NaN gives 0.
  const std::string model = header(13) + R"(graph @g(%x: f32[9], %s: f32[], %z: u8[]) -> (%y) {
  %y = QuantizeLinear(%x, %s, %z) : u8[9]
})";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  BothRuns r =
      runBoth(model, {values<float>({0.25f, 0.75f, 1.25f, -0.25f, -0.75f, 200, -200, nan, -5.25f}),
                      Tensor::scalar<float>(0.5f), Tensor::scalar<uint8_t>(10)});
  expectBothGive(r, 0, {10, 12, 12, 10, 8, 255, 0, 0, 0});
}

// A QAT model's fake quantization (Relu -> QuantizeLinear ->
// DequantizeLinear, one scale and zero point) fuses into one elementwise
// kernel; it rounds, saturates and maps NaN exactly as the ops alone.
TEST(LowerQuantOps, FakeQuantizeChainFusesAndRoundsLikeTheOps) {
  const std::string model = header(13) + R"(graph @g(%x: f32[10], %s: f32[], %z: u8[]) -> (%y) {
  %r = Relu(%x) : f32[10]
  %q = QuantizeLinear(%r, %s, %z) : u8[10]
  %d = DequantizeLinear(%q, %s, %z) : f32[10]
  %y = Add(%d, %x) : f32[10]
})";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // x / 0.5 = 0.5, 1.5, 2.5 round to 0, 2, 2; +10, -10, times 0.5; 200
  // saturates at 255; negatives are 0 after Relu; NaN quantizes to 0 (then
  // -5, plus NaN).
  BothRuns r = runBoth(model, {values<float>({0.25f, 0.75f, 1.25f, 200, -3, 0, 1, 2.75f, 60, nan}),
                               Tensor::scalar<float>(0.5f), Tensor::scalar<uint8_t>(10)});
  ASSERT_EQ(r.artifact.size(), 1u);
  const std::vector<double> want = {0.25, 1.75, 2.25, 322.5, -3, 0, 2, 5.75, 120};
  for (const auto *side : {&r.interp, &r.artifact})
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ((*side)[0].getDouble(int64_t(i)), want[i]) << i;
  EXPECT_TRUE(std::isnan(r.artifact[0].getDouble(9)));
  for (const char *t : {"u8", "i8", "u16", "i16"}) {
    SCOPED_TRACE(t);
    const std::string typed = header(21) + "graph @g(%x: f32[n,37], %s: f32[1], %z: " + t +
                              "[]) -> (%y) {\n  %a = Mul(%x, %x) : f32[n,37]\n" +
                              "  %q = QuantizeLinear(%a, %s, %z) : " + t + "[n,37]\n" +
                              "  %y = DequantizeLinear(%q, %s, %z) : f32[n,37]\n}";
    expectArtifactMatchesInterpreter(typed, {randomTensor(DType::F32, {5, 37}, 3, -20, 20),
                                             values<float>({0.37f}, {1}),
                                             randomTensor(*dtypeFromName(t), {}, 4, 0, 100)});
  }
}

TEST(LowerQuantOps, QuantizeDividesInF32LikeOnnxRuntime) {
  // 0.35f / 0.1f is 3.5 in f32 (rounds to 4) but 3.4999999 in f64 (3);
  // 0.75f / 0.1f is 7.5 in f32 (8), 7.4999999 in f64 (7).
  const std::string model = header(13) + R"(graph @g(%x: f32[2], %s: f32[]) -> (%y) {
  %y = QuantizeLinear(%x, %s) : u8[2]
})";
  BothRuns r = runBoth(model, {values<float>({0.35f, 0.75f}), Tensor::scalar<float>(0.1f)});
  expectBothGive(r, 0, {4, 8});
}

TEST(LowerQuantOps, QuantizeEveryOutputTypePerTensor) {
  for (const char *t : {"u8", "i8", "u16", "i16"}) {
    SCOPED_TRACE(t);
    const std::string model = header(21) + "graph @g(%x: f32[3,5], %s: f32[], %z: " + t +
                              "[]) -> (%y) {\n  %y = QuantizeLinear(%x, %s, %z) : " + t +
                              "[3,5]\n}";
    DType zt = *dtypeFromName(t);
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {3, 5}, 1, -300, 300),
                                             Tensor::scalar<float>(0.75f),
                                             randomTensor(zt, {}, 2, 0, 100)});
  }
}

TEST(LowerQuantOps, QuantizeWithoutZeroPointUsesOutputDtypeOrU8) {
  const std::string u8 = header(21) + R"(graph @g(%x: f32[7], %s: f32[]) -> (%y) {
  %y = QuantizeLinear(%x, %s) : u8[7]
})";
  expectArtifactMatchesInterpreter(
      u8, {randomTensor(DType::F32, {7}, 3, -5, 300), Tensor::scalar<float>(1.5f)});
  const std::string i16 = header(21) + R"(graph @g(%x: f32[7], %s: f32[]) -> (%y) {
  %y = QuantizeLinear(%x, %s) {output_dtype = 5} : i16[7]
})";
  expectArtifactMatchesInterpreter(
      i16, {randomTensor(DType::F32, {7}, 3, -1e5, 1e5), Tensor::scalar<float>(1.5f)});
}

TEST(LowerQuantOps, QuantizePerAxisOnEveryAxis) {
  for (int axis : {0, 1, 2, -1}) {
    SCOPED_TRACE(axis);
    const int64_t dims[] = {2, 3, 4};
    const int64_t n = dims[axis < 0 ? axis + 3 : axis];
    const std::string len = std::to_string(n);
    const std::string model = header(13) + "graph @g(%x: f32[2,3,4], %s: f32[" + len +
                              "], %z: i8[" + len + "]) -> (%y) {\n" +
                              "  %y = QuantizeLinear(%x, %s, %z) {axis = " + std::to_string(axis) +
                              "} : i8[2,3,4]\n}";
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {2, 3, 4}, 4, -20, 20),
                                             randomTensor(DType::F32, {n}, 5, 0.05, 0.5),
                                             randomTensor(DType::I8, {n}, 6, -10, 10)});
  }
}

TEST(LowerQuantOps, QuantizeBlockedWithARaggedLastBlock) {
  // axis 1 of [2, 5, 3] in blocks of 2: scales [2, 3, 3].
  const std::string model =
      header(21) + R"(graph @g(%x: f32[2,5,3], %s: f32[2,3,3], %z: u8[2,3,3]) -> (%y) {
  %y = QuantizeLinear(%x, %s, %z) {axis = 1, block_size = 2} : u8[2,5,3]
})";
  expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {2, 5, 3}, 7, -20, 20),
                                           randomTensor(DType::F32, {2, 3, 3}, 8, 0.05, 0.5),
                                           randomTensor(DType::U8, {2, 3, 3}, 9, 100, 150)});
  const std::string last = header(21) + R"(graph @g(%x: f32[4,7], %s: f32[4,2]) -> (%y) {
  %y = QuantizeLinear(%x, %s) {axis = -1, block_size = 4, output_dtype = 3} : i8[4,7]
})";
  expectArtifactMatchesInterpreter(last, {randomTensor(DType::F32, {4, 7}, 7, -20, 20),
                                          randomTensor(DType::F32, {4, 2}, 8, 0.05, 0.5)});
}

TEST(LowerQuantOps, QuantizeF16F64AndI32Inputs) {
  const std::string f16 = header(21) + R"(graph @g(%x: f16[3,4], %s: f16[]) -> (%y) {
  %y = QuantizeLinear(%x, %s) : u8[3,4]
})";
  expectArtifactMatchesInterpreter(
      f16, {randomTensor(DType::F16, {3, 4}, 1, -5, 100), scalarOf(DType::F16, 0.375)});
  const std::string f64 = header(21) + R"(graph @g(%x: f64[3,4], %s: f64[], %z: i8[]) -> (%y) {
  %y = QuantizeLinear(%x, %s, %z) : i8[3,4]
})";
  expectArtifactMatchesInterpreter(f64, {randomTensor(DType::F64, {3, 4}, 1, -50, 50),
                                         Tensor::scalar<double>(0.3), Tensor::scalar<int8_t>(3)});
  const std::string i32 = header(21) + R"(graph @g(%x: i32[3,4], %s: f32[], %z: i16[]) -> (%y) {
  %y = QuantizeLinear(%x, %s, %z) : i16[3,4]
})";
  expectArtifactMatchesInterpreter(i32, {randomTensor(DType::I32, {3, 4}, 1, -1e6, 1e6),
                                         Tensor::scalar<float>(7.0f), Tensor::scalar<int16_t>(-3)});
}

TEST(LowerQuantOps, QuantizeWithSymbolicDimsAndEmptyTensors) {
  const std::string model = header(13) + R"(graph @g(%x: f32[n,c], %s: f32[c], %z: u8[c]) -> (%y) {
  %y = QuantizeLinear(%x, %s, %z) {axis = 1} : u8[n,c]
})";
  for (int64_t n : {0, 1, 5})
    for (int64_t c : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << n << "x" << c);
      expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {n, c}, 11, -30, 30),
                                               randomTensor(DType::F32, {c}, 12, 0.1, 0.3),
                                               randomTensor(DType::U8, {c}, 13, 100, 150)});
    }
}

TEST(LowerQuantOps, QuantizeScaleOfTheWrongSizeIsARunTimeError) {
  const std::string model = header(13) + R"(graph @g(%x: f32[2,c], %s: f32[k]) -> (%y) {
  %y = QuantizeLinear(%x, %s) {axis = 1} : u8[2,c]
})";
  const std::string error = artifactRunError(
      model, {randomTensor(DType::F32, {2, 4}, 1), randomTensor(DType::F32, {3}, 2, 0.1, 1)});
  EXPECT_NE(error.find("scale has 3 values, expected one value or 4"), std::string::npos) << error;
}

// ---- DequantizeLinear -----------------------------------------------------------------

TEST(LowerQuantOps, DequantizeEveryInputTypeAndLayout) {
  for (const char *t : {"u8", "i8", "u16", "i16", "i32"}) {
    SCOPED_TRACE(t);
    const DType xt = *dtypeFromName(t);
    const std::string ty = t;
    const std::string perTensor =
        header(21) + "graph @g(%x: " + ty + "[3,5], %s: f32[], %z: " + ty +
        "[]) -> (%y) {\n  %y = DequantizeLinear(%x, %s, %z) : " + "f32[3,5]\n}";
    expectArtifactMatchesInterpreter(perTensor,
                                     {randomTensor(xt, {3, 5}, 1, -100, 200),
                                      Tensor::scalar<float>(0.37f), randomTensor(xt, {}, 2, 0, 50)},
                                     {0, 0});
    const std::string perAxis = header(21) + "graph @g(%x: " + ty + "[3,5], %s: f32[5], %z: " + ty +
                                "[5]) -> (%y) {\n  %y = DequantizeLinear(%x, %s, %z) " +
                                "{axis = 1} : f32[3,5]\n}";
    expectArtifactMatchesInterpreter(perAxis,
                                     {randomTensor(xt, {3, 5}, 1, -100, 200),
                                      randomTensor(DType::F32, {5}, 3, 0.01, 2),
                                      randomTensor(xt, {5}, 2, 0, 50)},
                                     {0, 0});
  }
  const std::string blocked =
      header(21) + R"(graph @g(%x: i8[6,4], %s: f32[2,4], %z: i8[2,4]) -> (%y) {
  %y = DequantizeLinear(%x, %s, %z) {axis = 0, block_size = 3} : f32[6,4]
})";
  expectArtifactMatchesInterpreter(blocked,
                                   {randomTensor(DType::I8, {6, 4}, 1, -128, 128),
                                    randomTensor(DType::F32, {2, 4}, 3, 0.01, 2),
                                    randomTensor(DType::I8, {2, 4}, 2, -5, 5)},
                                   {0, 0});
}

TEST(LowerQuantOps, DequantizeToF16BF16AndF64) {
  for (const char *t : {"f16", "bf16", "f64"}) {
    SCOPED_TRACE(t);
    const DType st = *dtypeFromName(t);
    const std::string model = header(21) + "graph @g(%x: u8[n,3], %s: " + t +
                              "[]) -> (%y) {\n  %y = DequantizeLinear(%x, %s) : " + t + "[n,3]\n}";
    expectArtifactMatchesInterpreter(
        model, {randomTensor(DType::U8, {4, 3}, 1, 0, 256), scalarOf(st, 0.0173)}, {0, 0});
  }
}

// ---- DynamicQuantizeLinear ------------------------------------------------------------

TEST(LowerQuantOps, DynamicQuantizeScaleZeroPointAndTiesByHand) {
  // Range [-4, 3.96875]: scale 7.96875 / 255 = 0.03125 exactly, zero point
  // 4 / 0.03125 = 128. x / scale = 0.5, 1.5, 2.5, -0.5, -1.5 round half to
  // even (0, 2, 2, 0, -2), then + 128.
  const std::string model = header(11) + R"(graph @g(%x: f32[n]) -> (%y, %s, %z) {
  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[n], f32[], u8[]
})";
  const float s = 0.03125f;
  BothRuns r = runBoth(model, {values<float>({-4, 3.96875f, 0.5f * s, 1.5f * s, 2.5f * s, -0.5f * s,
                                              -1.5f * s, 0})});
  expectBothGive(r, 0, {0, 255, 128, 130, 130, 128, 126, 128});
  expectBothGive(r, 1, {0.03125});
  expectBothGive(r, 2, {128});
}

TEST(LowerQuantOps, DynamicQuantizeAllPositiveAllNegativeAndAllZero) {
  const std::string model = header(11) + R"(graph @g(%x: f32[n]) -> (%y, %s, %z) {
  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[n], f32[], u8[]
})";
  // All positive: min is 0, zero point 0, scale 2.55 / 255 = 0.01 (in f32).
  BothRuns pos = runBoth(model, {values<float>({2.55f, 1.0f, 0.015f, 0.005f})});
  expectBothGive(pos, 1, {double(2.55f / 255.0f)});
  expectBothGive(pos, 2, {0});
  // All negative: max is 0, zero point 255.
  BothRuns neg = runBoth(model, {values<float>({-2.55f, -1.0f})});
  expectBothGive(neg, 2, {255});
  expectBothGive(neg, 0, {0, 155});
  // All zero: scale 1, zero point 0.
  BothRuns zero = runBoth(model, {values<float>({0, 0, 0})});
  expectBothGive(zero, 0, {0, 0, 0});
  expectBothGive(zero, 1, {1});
  expectBothGive(zero, 2, {0});
}

TEST(LowerQuantOps, DynamicQuantizeIgnoresNaN) {
  const std::string model = header(11) + R"(graph @g(%x: f32[n]) -> (%y, %s, %z) {
  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[n], f32[], u8[]
})";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  BothRuns r = runBoth(model, {values<float>({nan, -1.0f, nan, 1.55f})});
  expectBothGive(r, 1, {double(2.55f / 255.0f)});
  expectBothGive(r, 2, {100});
  expectBothGive(r, 0, {0, 0, 0, 255});
}

TEST(LowerQuantOps, DynamicQuantizeRandomRanksAndTypes) {
  for (const char *t : {"f32", "f16", "f64"}) {
    SCOPED_TRACE(t);
    const std::string model =
        header(11) + "graph @g(%x: " + std::string(t) + "[b,s,8]) -> (%y, %s, %z) {\n" +
        "  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[b,s,8], f32[], u8[]\n}";
    const DType xt = *dtypeFromName(t);
    for (int64_t s : {0, 1, 9}) {
      expectArtifactMatchesInterpreter(model, {randomTensor(xt, {2, s, 8}, 21 + s, -3, 5)});
      expectArtifactMatchesInterpreter(model, {randomTensor(xt, {2, s, 8}, 22 + s, 0.5, 6)});
    }
  }
  const std::string scalar = header(11) + R"(graph @g(%x: f32[]) -> (%y, %s, %z) {
  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[], f32[], u8[]
})";
  expectArtifactMatchesInterpreter(scalar, {Tensor::scalar<float>(-1.7f)});
}

// ---- MatMulInteger --------------------------------------------------------------------

std::string matmulInteger(const std::string &a, const std::string &b, const std::string &y,
                          const std::string &azp = "", const std::string &bzp = "") {
  std::string params = "%a: " + a + ", %b: " + b;
  std::string operands = "%a, %b";
  if (!azp.empty()) params += ", %az: " + azp;
  if (!bzp.empty()) params += ", %bz: " + bzp;
  operands += azp.empty() ? (bzp.empty() ? "" : ", _") : ", %az";
  if (!bzp.empty()) operands += ", %bz";
  return header(10) + "graph @g(" + params + ") -> (%y) {\n  %y = MatMulInteger(" + operands +
         ") : " + y + "\n}";
}

TEST(LowerQuantOps, MatMulIntegerEverySignednessWithPerTensorZeroPoints) {
  for (const char *ta : {"u8", "i8"})
    for (const char *tb : {"u8", "i8"}) {
      SCOPED_TRACE(::testing::Message() << ta << " x " << tb);
      const DType a = *dtypeFromName(ta), b = *dtypeFromName(tb);
      const std::string model =
          matmulInteger(std::string(ta) + "[5,7]", std::string(tb) + "[7,9]", "i32[5,9]",
                        std::string(ta) + "[]", std::string(tb) + "[]");
      expectArtifactMatchesInterpreter(
          model, {randomTensor(a, {5, 7}, 1, -128, 256), randomTensor(b, {7, 9}, 2, -128, 256),
                  randomTensor(a, {}, 3, 0, 100), randomTensor(b, {}, 4, 0, 100)});
    }
  expectArtifactMatchesInterpreter(
      matmulInteger("u8[3,4]", "u8[4,2]", "i32[3,2]"),
      {randomTensor(DType::U8, {3, 4}, 1, 0, 256), randomTensor(DType::U8, {4, 2}, 2, 0, 256)});
}

TEST(LowerQuantOps, MatMulIntegerPerRowAndPerColumnZeroPoints) {
  expectArtifactMatchesInterpreter(
      matmulInteger("u8[2,5,7]", "i8[7,9]", "i32[2,5,9]", "u8[5]", "i8[9]"),
      {randomTensor(DType::U8, {2, 5, 7}, 1, 0, 256), randomTensor(DType::I8, {7, 9}, 2, -128, 128),
       randomTensor(DType::U8, {5}, 3, 0, 256), randomTensor(DType::I8, {9}, 4, -128, 128)});
  // Only b's zero point.
  expectArtifactMatchesInterpreter(matmulInteger("u8[5,7]", "u8[7,9]", "i32[5,9]", "", "u8[9]"),
                                   {randomTensor(DType::U8, {5, 7}, 1, 0, 256),
                                    randomTensor(DType::U8, {7, 9}, 2, 0, 256),
                                    randomTensor(DType::U8, {9}, 4, 0, 256)});
}

TEST(LowerQuantOps, MatMulIntegerBroadcastsBatchesAndVectors) {
  expectArtifactMatchesInterpreter(
      matmulInteger("u8[2,1,3,4]", "i8[3,4,5]", "i32[2,3,3,5]", "u8[]", "i8[]"),
      {randomTensor(DType::U8, {2, 1, 3, 4}, 1, 0, 256),
       randomTensor(DType::I8, {3, 4, 5}, 2, -128, 128), Tensor::scalar<uint8_t>(7),
       Tensor::scalar<int8_t>(-2)});
  expectArtifactMatchesInterpreter(
      matmulInteger("u8[4]", "u8[2,4,3]", "i32[2,3]"),
      {randomTensor(DType::U8, {4}, 1, 0, 256), randomTensor(DType::U8, {2, 4, 3}, 2, 0, 256)});
  expectArtifactMatchesInterpreter(matmulInteger("i8[2,3,4]", "i8[4]", "i32[2,3]"),
                                   {randomTensor(DType::I8, {2, 3, 4}, 1, -128, 128),
                                    randomTensor(DType::I8, {4}, 2, -128, 128)});
}

TEST(LowerQuantOps, MatMulIntegerWithSymbolicDims) {
  const std::string model = matmulInteger("u8[b,s,k]", "i8[k,6]", "i32[b,s,6]", "u8[]", "i8[]");
  for (int64_t s : {0, 1, 13})
    expectArtifactMatchesInterpreter(model,
                                     {randomTensor(DType::U8, {2, s, 33}, s, 0, 256),
                                      randomTensor(DType::I8, {33, 6}, 2, -128, 128),
                                      Tensor::scalar<uint8_t>(131), Tensor::scalar<int8_t>(0)});
}

TEST(LowerQuantOps, MatMulIntegerZeroPointOfTheWrongSizeIsARunTimeError) {
  const std::string model = matmulInteger("u8[3,4]", "u8[4,2]", "i32[3,2]", "u8[k]");
  const std::string error = artifactRunError(model, {randomTensor(DType::U8, {3, 4}, 1, 0, 256),
                                                     randomTensor(DType::U8, {4, 2}, 2, 0, 256),
                                                     randomTensor(DType::U8, {2}, 3, 0, 256)});
  EXPECT_NE(error.find("A zero point has 2 values, expected 1 or 3"), std::string::npos) << error;
}

// ---- QLinearMatMul --------------------------------------------------------------------

TEST(LowerQuantOps, QLinearMatMulPerTensorAndPerChannelScales) {
  for (const char *t : {"u8", "i8"}) {
    SCOPED_TRACE(t);
    const DType q = *dtypeFromName(t);
    const std::string ty = t;
    const std::string model =
        header(10) + "graph @g(%a: " + ty + "[2,5,7], %as: f32[], %az: " + ty +
        "[], %b: i8[7,9], " + "%bs: f32[9], %bz: i8[9], %ys: f32[], %yz: " + ty +
        "[]) -> (%y) {\n" + "  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : " + ty +
        "[2,5,9]\n}";
    expectArtifactMatchesInterpreter(
        model,
        {randomTensor(q, {2, 5, 7}, 1, -128, 256), Tensor::scalar<float>(0.0173f),
         randomTensor(q, {}, 2, 0, 100), randomTensor(DType::I8, {7, 9}, 3, -128, 128),
         randomTensor(DType::F32, {9}, 4, 0.001, 0.02), randomTensor(DType::I8, {9}, 5, -3, 3),
         Tensor::scalar<float>(0.0457f), randomTensor(q, {}, 6, 0, 100)});
  }
  // a_scale and a_zero_point per row of A.
  const std::string perRow =
      header(10) +
      R"(graph @g(%a: u8[4,6], %as: f32[4], %az: u8[4], %b: u8[6,3], %bs: f32[], %bz: u8[], %ys: f32[], %yz: u8[]) -> (%y) {
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : u8[4,3]
})";
  expectArtifactMatchesInterpreter(
      perRow,
      {randomTensor(DType::U8, {4, 6}, 1, 0, 256), randomTensor(DType::F32, {4}, 2, 0.01, 0.05),
       randomTensor(DType::U8, {4}, 3, 100, 150), randomTensor(DType::U8, {6, 3}, 4, 0, 256),
       Tensor::scalar<float>(0.02f), Tensor::scalar<uint8_t>(128), Tensor::scalar<float>(0.3f),
       Tensor::scalar<uint8_t>(120)});
}

// ---- ConvInteger ----------------------------------------------------------------------

std::string convInteger(const std::string &x, const std::string &w, const std::string &y,
                        const std::string &attrs, bool zeroPoints = true,
                        const std::string &wzp = "u8[]") {
  const std::string xt = x.substr(0, x.find('['));
  if (!zeroPoints)
    return header(10) + "graph @g(%x: " + x + ", %w: " + w + ") -> (%y) {\n" +
           "  %y = ConvInteger(%x, %w) {" + attrs + "} : " + y + "\n}";
  return header(10) + "graph @g(%x: " + x + ", %w: " + w + ", %xz: " + xt + "[], %wz: " + wzp +
         ") -> (%y) {\n  %y = ConvInteger(%x, %w, %xz, %wz) {" + attrs + "} : " + y + "\n}";
}

TEST(LowerQuantOps, ConvInteger2dPadsStridesDilationsAndGroups) {
  struct Case {
    const char *attrs, *out;
  } cases[] = {
      {"pads = [1, 1, 1, 1]", "i32[2,6,7,9]"},
      {"pads = [0, 2, 1, 0], strides = [2, 3]", "i32[2,6,3,3]"},
      {"dilations = [2, 1], pads = [2, 1, 2, 1]", "i32[2,6,7,9]"},
      {"group = 2, pads = [1, 1, 1, 1], strides = [2, 2]", "i32[2,6,4,5]"},
      {"auto_pad = \"SAME_UPPER\", strides = [2, 2]", "i32[2,6,4,5]"},
      {"auto_pad = \"SAME_LOWER\", strides = [1, 2]", "i32[2,6,7,5]"},
      {"auto_pad = \"VALID\"", "i32[2,6,5,7]"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.attrs);
    const bool grouped = std::string(c.attrs).find("group") != std::string::npos;
    const int64_t cg = grouped ? 2 : 4;
    const std::string w = "u8[6," + std::to_string(cg) + ",3,3]";
    expectArtifactMatchesInterpreter(convInteger("u8[2,4,7,9]", w, c.out, c.attrs),
                                     {randomTensor(DType::U8, {2, 4, 7, 9}, 1, 0, 256),
                                      randomTensor(DType::U8, {6, cg, 3, 3}, 2, 0, 256),
                                      Tensor::scalar<uint8_t>(117), Tensor::scalar<uint8_t>(131)});
  }
}

TEST(LowerQuantOps, ConvInteger1dAnd3dSignedAndPerChannelZeroPoints) {
  expectArtifactMatchesInterpreter(convInteger("i8[1,3,10]", "i8[4,3,3]", "i32[1,4,5]",
                                               "pads = [1, 1], strides = [2]", true, "i8[4]"),
                                   {randomTensor(DType::I8, {1, 3, 10}, 1, -128, 128),
                                    randomTensor(DType::I8, {4, 3, 3}, 2, -128, 128),
                                    Tensor::scalar<int8_t>(-3),
                                    randomTensor(DType::I8, {4}, 3, -5, 5)});
  expectArtifactMatchesInterpreter(convInteger("u8[1,2,4,5,6]", "i8[3,2,2,3,2]", "i32[1,3,4,5,3]",
                                               "pads = [0, 1, 0, 1, 1, 0], strides = [1, 1, 2]",
                                               true, "i8[]"),
                                   {randomTensor(DType::U8, {1, 2, 4, 5, 6}, 1, 0, 256),
                                    randomTensor(DType::I8, {3, 2, 2, 3, 2}, 2, -128, 128),
                                    Tensor::scalar<uint8_t>(128), Tensor::scalar<int8_t>(1)});
  expectArtifactMatchesInterpreter(
      convInteger("u8[1,2,5,5]", "u8[3,2,2,2]", "i32[1,3,4,4]", "", false),
      {randomTensor(DType::U8, {1, 2, 5, 5}, 1, 0, 256),
       randomTensor(DType::U8, {3, 2, 2, 2}, 2, 0, 256)});
}

TEST(LowerQuantOps, ConvIntegerWithSymbolicBatchAndSpatialDims) {
  const std::string model =
      convInteger("u8[n,3,h,w]", "u8[5,3,3,3]", "i32[n,5,?,?]", "pads = [1, 1, 1, 1]");
  for (int64_t n : {0, 1, 2})
    for (int64_t hw : {1, 6}) {
      SCOPED_TRACE(::testing::Message() << n << " " << hw);
      expectArtifactMatchesInterpreter(model,
                                       {randomTensor(DType::U8, {n, 3, hw, hw + 2}, 1, 0, 256),
                                        randomTensor(DType::U8, {5, 3, 3, 3}, 2, 0, 256),
                                        Tensor::scalar<uint8_t>(5), Tensor::scalar<uint8_t>(250)});
    }
}

TEST(LowerQuantOps, ConvIntegerKernelLargerThanInputIsARunTimeError) {
  const std::string model = convInteger("u8[1,1,h,4]", "u8[1,1,3,3]", "i32[1,1,?,2]", "");
  const std::string error =
      artifactRunError(model, {randomTensor(DType::U8, {1, 1, 2, 4}, 1, 0, 9),
                               randomTensor(DType::U8, {1, 1, 3, 3}, 2, 0, 9),
                               Tensor::scalar<uint8_t>(0), Tensor::scalar<uint8_t>(0)});
  EXPECT_NE(error.find("smaller than the dilated kernel"), std::string::npos) << error;
}

// ---- QLinearConv ----------------------------------------------------------------------

TEST(LowerQuantOps, QLinearConvPerChannelWeightsBiasAndBothTypes) {
  for (const char *t : {"u8", "i8"}) {
    SCOPED_TRACE(t);
    const DType q = *dtypeFromName(t);
    const std::string ty = t;
    const std::string model =
        header(10) + "graph @g(%x: " + ty + "[2,4,6,7], %xs: f32[], %xz: " + ty +
        "[], %w: i8[6,2,3,3], %ws: f32[6], %wz: i8[6], %ys: f32[], %yz: " + ty +
        "[], %b: i32[6]) -> (%y) {\n" +
        "  %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz, %b) {group = 2, pads = [1, 1, "
        "1, 1], strides = [1, 2]} : " +
        ty + "[2,6,6,4]\n}";
    expectArtifactMatchesInterpreter(
        model, {randomTensor(q, {2, 4, 6, 7}, 1, -128, 256), Tensor::scalar<float>(0.0173f),
                randomTensor(q, {}, 2, 0, 100), randomTensor(DType::I8, {6, 2, 3, 3}, 3, -128, 128),
                randomTensor(DType::F32, {6}, 4, 0.001, 0.01), Tensor(DType::I8, {6}),
                Tensor::scalar<float>(0.0391f), randomTensor(q, {}, 6, 0, 100),
                randomTensor(DType::I32, {6}, 7, -2000, 2000)});
  }
  // No bias, u8 weights.
  const std::string bare =
      header(10) +
      R"(graph @g(%x: u8[1,3,5,5], %xs: f32[], %xz: u8[], %w: u8[2,3,3,3], %ws: f32[], %wz: u8[], %ys: f32[], %yz: u8[]) -> (%y) {
  %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz) : u8[1,2,3,3]
})";
  expectArtifactMatchesInterpreter(
      bare, {randomTensor(DType::U8, {1, 3, 5, 5}, 1, 0, 256), Tensor::scalar<float>(0.02f),
             Tensor::scalar<uint8_t>(128), randomTensor(DType::U8, {2, 3, 3, 3}, 3, 0, 256),
             Tensor::scalar<float>(0.003f), Tensor::scalar<uint8_t>(120),
             Tensor::scalar<float>(0.05f), Tensor::scalar<uint8_t>(3)});
}

TEST(LowerQuantOps, RequantizeUsesTheF32ProductOfScales) {
  // acc = 1 (x 1 * w 1); x_scale * w_scale / y_scale = 0.1f * 5.0f / 1.0f
  // is 0.5 exactly in f32, so 1 * 0.5 rounds (half to even) to 0, plus the
  // zero point 10; in f64 it would be 0.50000000745, rounding to 1.
  const std::string model =
      header(10) +
      R"(graph @g(%x: u8[1,1,1,1], %xs: f32[], %xz: u8[], %w: u8[1,1,1,1], %ws: f32[], %wz: u8[], %ys: f32[], %yz: u8[]) -> (%y) {
  %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz) : u8[1,1,1,1]
})";
  BothRuns r = runBoth(model, {values<uint8_t>({1}, {1, 1, 1, 1}), Tensor::scalar<float>(0.1f),
                               Tensor::scalar<uint8_t>(0), values<uint8_t>({1}, {1, 1, 1, 1}),
                               Tensor::scalar<float>(5.0f), Tensor::scalar<uint8_t>(0),
                               Tensor::scalar<float>(1.0f), Tensor::scalar<uint8_t>(10)});
  expectBothGive(r, 0, {10});
}

} // namespace
} // namespace kiln
