// Elementwise lowerings (lower/elementwise_dispatch.cpp, the general
// dispatch, and lower/elementwise.cpp, the specialized kernel, both built
// on lower/elementwise_ops.h) through the artifact, against the
// interpreter (op_check.h), on random inputs. Most cases run twice: as the
// compiler picks (specialized where it can), and with KILN_DEBUG_GENERAL,
// which sends every node to its general dispatch.
#include "op_check.h"

#include "ir/parser.h"
#include "lower/ops.h"
#include "package/package.h"
#include "runtime/api/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <tuple>

namespace kiln {
namespace {

using testing::expectArtifactMatchesInterpreter;
using testing::OpCheckOptions;
using testing::randomTensor;

const char *kAllDTypes[] = {"f32", "f64", "f16", "bf16", "i8",  "u8",  "i16",
                            "u16", "i32", "u32", "i64",  "u64", "bool"};
const char *kIntDTypes[] = {"i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"};
const char *kFloatDTypes[] = {"f32", "f64", "f16", "bf16"};

DType dt(const std::string &name) {
  return *dtypeFromName(name);
}

// Tolerances per dtype: 16-bit floats may round one ulp apart where f32
// libm results differ in their last bit.
OpCheckOptions tolerance(const std::string &dtype) {
  OpCheckOptions o;
  if (dtype == "f16") o.rtol = 2e-3, o.atol = 1e-3;
  if (dtype == "bf16") o.rtol = 1e-2, o.atol = 1e-2;
  if (dtype == "f32") o.rtol = 1e-5, o.atol = 1e-6;
  return o;
}

// Sets KILN_DEBUG_GENERAL while alive.
struct GeneralOnly {
  GeneralOnly() { setenv("KILN_DEBUG_GENERAL", "1", 1); }
  ~GeneralOnly() { unsetenv("KILN_DEBUG_GENERAL"); }
};

// The check on the compiler's choice of step, then on the general dispatch.
void expectBothPaths(const std::string &model, const std::vector<Tensor> &inputs,
                     const OpCheckOptions &options = {}) {
  {
    SCOPED_TRACE("as compiled");
    expectArtifactMatchesInterpreter(model, inputs, options);
  }
  SCOPED_TRACE("general dispatch");
  GeneralOnly general;
  expectArtifactMatchesInterpreter(model, inputs, options);
}

// The run-time error of `model` on `inputs` through the artifact ("" when it
// runs; "compile: ..." when it does not compile).
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

// A graph with one input %x of `type` and one output per op line
// ("Sin(%x)" and the like) of type `outType`.
std::string unaryModel(const std::string &type, const std::vector<std::string> &ops,
                       const std::string &outType) {
  std::string outs, body;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string y = "%y" + std::to_string(i);
    outs += (i ? ", " : "") + y;
    body += "  " + y + " = " + ops[i] + " : " + outType + "\n";
  }
  return "kiln.model opsets {\"\" = 21}\ngraph @g(%x: " + type + ") -> (" + outs + ") {\n" + body +
         "}";
}

Tensor withSpecials(Tensor t) {
  const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 0.5, -0.5, 2.5, 1e30, -1e30};
  for (int64_t i = 0; i < t.numel() && i < 10; ++i) t.setDouble(i, specials[i]);
  return t;
}

// ---- unary math and activations --------------------------------------------------

TEST(LowerElementwise, MathFunctionsOnEveryFloatType) {
  for (const char *t : kFloatDTypes) {
    SCOPED_TRACE(t);
    const std::string type = std::string(t) + "[3,17]";
    expectBothPaths(
        unaryModel(type,
                   {"Sin(%x)", "Cos(%x)", "Tan(%x)", "Atan(%x)", "Sinh(%x)", "Cosh(%x)",
                    "Asinh(%x)", "Floor(%x)", "Ceil(%x)", "Round(%x)", "Exp(%x)", "Sigmoid(%x)",
                    "Tanh(%x)", "Erf(%x)", "Abs(%x)", "Neg(%x)", "Sign(%x)", "Reciprocal(%x)"},
                   type),
        {randomTensor(dt(t), {3, 17}, 1, -3, 3)}, tolerance(t));
    // Inside the domains of the inverse functions, logarithms and roots.
    expectBothPaths(
        unaryModel(type, {"Asin(%x)", "Acos(%x)", "Atanh(%x)", "Log(%x)", "Sqrt(%x)"}, type),
        {randomTensor(dt(t), {3, 17}, 2, 0.01, 0.99)}, tolerance(t));
    expectBothPaths(unaryModel(type, {"Acosh(%x)"}, type), {randomTensor(dt(t), {3, 17}, 3, 1, 9)},
                    tolerance(t));
  }
}

TEST(LowerElementwise, MathFunctionsKeepNaNInfinitiesAndSignedZeros) {
  const std::string type = "f32[4,10]";
  expectBothPaths(unaryModel(type,
                             {"Sign(%x)", "Abs(%x)", "Floor(%x)", "Round(%x)", "Relu(%x)",
                              "Sigmoid(%x)", "Softplus(%x)", "Mish(%x)", "Atan(%x)", "Gelu(%x)"},
                             type),
                  {withSpecials(randomTensor(DType::F32, {4, 10}, 4, -5, 5))});
}

TEST(LowerElementwise, ActivationsWithEveryAttribute) {
  for (const char *t : {"f32", "f64", "f16", "bf16"}) {
    SCOPED_TRACE(t);
    const std::string type = std::string(t) + "[2,3,16]";
    expectBothPaths(
        unaryModel(type,
                   {"Relu(%x)", "LeakyRelu(%x) {alpha = 0.1}", "Elu(%x) {alpha = 0.5}", "Selu(%x)",
                    "Selu(%x) {alpha = 1.5, gamma = 0.5}", "Celu(%x)", "Celu(%x) {alpha = 2.0}",
                    "HardSigmoid(%x) {alpha = 0.3, beta = 0.4}", "HardSwish(%x)", "Softplus(%x)",
                    "Softsign(%x)", "ThresholdedRelu(%x) {alpha = 0.5}", "Mish(%x)", "Gelu(%x)",
                    "Gelu(%x) {approximate = \"tanh\"}", "Shrink(%x) {bias = 0.2, lambd = 0.7}",
                    "Shrink(%x)"},
                   type),
        {randomTensor(dt(t), {2, 3, 16}, 5, -6, 6)}, tolerance(t));
  }
}

TEST(LowerElementwise, ExpM1AndLog1pStayAccurateNearZero) {
  const std::string type = "f32[64]";
  OpCheckOptions o;
  o.atol = 0; // relative accuracy only
  o.rtol = 1e-5;
  expectBothPaths(unaryModel(type, {"Elu(%x)", "Celu(%x)", "Softplus(%x)"}, type),
                  {randomTensor(DType::F32, {64}, 6, -1e-4, 1e-4)}, o);
}

TEST(LowerElementwise, IntegerUnaryOpsWrapAndTruncate) {
  for (const char *t : kIntDTypes) {
    SCOPED_TRACE(t);
    const std::string type = std::string(t) + "[5,7]";
    const bool isSigned = t[0] == 'i';
    expectBothPaths(unaryModel(type,
                               {"Abs(%x)", "Neg(%x)", "Sign(%x)", "Relu(%x)",
                                "Shrink(%x) {bias = 1.5, lambd = 3.0}", "BitwiseNot(%x)"},
                               type),
                    {randomTensor(dt(t), {5, 7}, 7, isSigned ? -128 : 0, isSigned ? 127 : 255)});
  }
}

TEST(LowerElementwise, IsInfDetectsEachSignAndIsNaN) {
  for (const char *t : kFloatDTypes) {
    SCOPED_TRACE(t);
    const std::string type = std::string(t) + "[12]";
    expectBothPaths(
        unaryModel(type,
                   {"IsInf(%x)", "IsInf(%x) {detect_negative = 0}",
                    "IsInf(%x) {detect_positive = 0}",
                    "IsInf(%x) {detect_negative = 0, detect_positive = 0}", "IsNaN(%x)"},
                   "bool[12]"),
        {withSpecials(randomTensor(dt(t), {12}, 8))});
  }
}

// ---- binary arithmetic, bits and logic ------------------------------------------------

std::string binaryModel(const std::string &a, const std::string &b, const std::string &out,
                        const std::vector<std::string> &ops) {
  std::string outs, body;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string y = "%y" + std::to_string(i);
    outs += (i ? ", " : "") + y;
    body += "  " + y + " = " + ops[i] + " : " + out + "\n";
  }
  return "kiln.model opsets {\"\" = 21}\ngraph @g(%a: " + a + ", %b: " + b + ") -> (" + outs +
         ") {\n" + body + "}";
}

// Non-zero integers (divisors).
Tensor nonZero(Tensor t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.getInt(i) == 0) t.setInt(i, 3);
  return t;
}

TEST(LowerElementwise, IntegerArithmeticWrapsAndDividesTruncating) {
  for (const char *t : kIntDTypes) {
    SCOPED_TRACE(t);
    const std::string s(t);
    const bool isSigned = t[0] == 'i';
    expectBothPaths(
        binaryModel(s + "[4,1,6]", s + "[3,6]", s + "[4,3,6]",
                    {"Add(%a, %b)", "Sub(%a, %b)", "Mul(%a, %b)", "Div(%a, %b)", "Mod(%a, %b)",
                     "Mod(%a, %b) {fmod = 1}", "Max(%a, %b)", "Min(%a, %b)", "BitwiseAnd(%a, %b)",
                     "BitwiseOr(%a, %b)", "BitwiseXor(%a, %b)", "PRelu(%a, %b)"}),
        {randomTensor(dt(t), {4, 1, 6}, 9, isSigned ? -120 : 0, 120),
         nonZero(randomTensor(dt(t), {3, 6}, 10, isSigned ? -20 : 1, 20))});
  }
}

TEST(LowerElementwise, IntegerDivisionOfTheMinimumByMinusOneWraps) {
  const std::string model = binaryModel("i32[3]", "i32[3]", "i32[3]",
                                        {"Div(%a, %b)", "Mod(%a, %b)", "Mod(%a, %b) {fmod = 1}"});
  const int32_t lo = std::numeric_limits<int32_t>::min();
  expectBothPaths(model, {Tensor::fromVector<int32_t>({lo, lo, 7}, {3}),
                          Tensor::fromVector<int32_t>({-1, 1, -1}, {3})});
}

TEST(LowerElementwise, IntegerDivisionByZeroIsARunTimeError) {
  for (const char *op : {"Div(%a, %b)", "Mod(%a, %b)"}) {
    const std::string model = binaryModel("i64[n]", "i64[n]", "i64[n]", {op});
    const std::string error = artifactRunError(model, {Tensor::fromVector<int64_t>({4, 5}, {2}),
                                                       Tensor::fromVector<int64_t>({2, 0}, {2})});
    EXPECT_NE(error.find(std::string(op).substr(0, 3) == "Div" ? "integer division by zero"
                                                               : "integer modulo by zero"),
              std::string::npos)
        << error;
    GeneralOnly general;
    EXPECT_NE(artifactRunError(model, {Tensor::fromVector<int64_t>({4, 5}, {2}),
                                       Tensor::fromVector<int64_t>({2, 0}, {2})}),
              "");
  }
}

TEST(LowerElementwise, FloatModTakesTheSignOfTheDivisorOrTheDividend) {
  for (const char *t : kFloatDTypes) {
    SCOPED_TRACE(t);
    const std::string s(t);
    expectBothPaths(
        binaryModel(s + "[5,8]", s + "[8]", s + "[5,8]",
                    {"Mod(%a, %b)", "Mod(%a, %b) {fmod = 1}", "Div(%a, %b)", "PRelu(%a, %b)"}),
        {randomTensor(dt(t), {5, 8}, 11, -10, 10), randomTensor(dt(t), {8}, 12, -3, 3)},
        tolerance(t));
  }
}

TEST(LowerElementwise, BitShiftsByEveryAmountOnUnsignedTypes) {
  for (const char *t : {"u8", "u16", "u32", "u64"}) {
    SCOPED_TRACE(t);
    const std::string s(t);
    expectBothPaths(binaryModel(s + "[40]", s + "[40]", s + "[40]",
                                {"BitShift(%a, %b) {direction = \"LEFT\"}",
                                 "BitShift(%a, %b) {direction = \"RIGHT\"}"}),
                    {randomTensor(dt(t), {40}, 13, 0, 250), randomTensor(dt(t), {40}, 14, 0, 70)});
  }
}

TEST(LowerElementwise, LogicAndComparisonsOnBoolsIntegersAndFloats) {
  expectBothPaths(
      binaryModel("bool[2,1,5]", "bool[3,5]", "bool[2,3,5]",
                  {"And(%a, %b)", "Or(%a, %b)", "Xor(%a, %b)", "Equal(%a, %b)", "Greater(%a, %b)",
                   "LessOrEqual(%a, %b)"}),
      {randomTensor(DType::Bool, {2, 1, 5}, 15), randomTensor(DType::Bool, {3, 5}, 16)});
  for (const char *t : {"i8", "u64", "f16", "bf16", "f64"}) {
    SCOPED_TRACE(t);
    const std::string s(t);
    expectBothPaths(binaryModel(s + "[6,1]", s + "[6]", "bool[6,6]",
                                {"Equal(%a, %b)", "Greater(%a, %b)", "GreaterOrEqual(%a, %b)",
                                 "Less(%a, %b)", "LessOrEqual(%a, %b)"}),
                    {randomTensor(dt(t), {6, 1}, 17, 0, 4), randomTensor(dt(t), {6}, 18, 0, 4)});
  }
  expectBothPaths(unaryModel("bool[9]", {"Not(%x)"}, "bool[9]"),
                  {randomTensor(DType::Bool, {9}, 19)});
}

TEST(LowerElementwise, PowOfEveryBaseAndExponentTypeCombination) {
  struct Case {
    const char *base, *exponent;
    double lo, hi, elo, ehi;
  };
  for (const Case &c : {Case{"f32", "f32", 0.1, 3, -2, 2}, Case{"f32", "i64", -3, 3, -3, 4},
                        Case{"f64", "i32", -3, 3, -3, 4}, Case{"f16", "f16", 0.1, 3, -2, 2},
                        Case{"bf16", "f32", 0.1, 3, -2, 2}, Case{"i32", "i32", -4, 5, -2, 9},
                        Case{"i64", "f32", -4, 5, 0, 3.5}, Case{"u8", "u8", 0, 6, 0, 5},
                        Case{"i8", "u64", -3, 4, 0, 9}, Case{"i16", "i8", -3, 4, -3, 14}}) {
    SCOPED_TRACE(std::string(c.base) + "^" + c.exponent);
    const std::string b(c.base), e(c.exponent);
    // Integer bases are never 0 here where exponents may be negative.
    Tensor base = randomTensor(dt(b), {4, 6}, 20, c.lo, c.hi);
    if (isInt(dt(b)) && c.elo < 0) base = nonZero(base);
    expectBothPaths(binaryModel(b + "[4,6]", e + "[6]", b + "[4,6]", {"Pow(%a, %b)"}),
                    {base, randomTensor(dt(e), {6}, 21, c.elo, c.ehi)}, tolerance(b));
  }
}

TEST(LowerElementwise, IntegerZeroToANegativePowerIsARunTimeError) {
  const std::string model = binaryModel("i32[2]", "i64[2]", "i32[2]", {"Pow(%a, %b)"});
  const std::string error = artifactRunError(
      model, {Tensor::fromVector<int32_t>({2, 0}, {2}), Tensor::fromVector<int64_t>({2, -1}, {2})});
  EXPECT_NE(error.find("integer 0 raised to a negative power"), std::string::npos) << error;
}

// ---- Where, Clip, variadic ops -----------------------------------------------------------

TEST(LowerElementwise, WhereOnEveryDtypeBroadcastsAllThreeOperands) {
  for (const char *t : kAllDTypes) {
    SCOPED_TRACE(t);
    const std::string s(t);
    const std::string model = "kiln.model opsets {\"\" = 21}\n"
                              "graph @g(%c: bool[2,1,4], %x: " +
                              s + "[3,1], %y: " + s +
                              "[]) -> (%z) {\n  %z = Where(%c, %x, %y) : " + s + "[2,3,4]\n}";
    expectBothPaths(model, {randomTensor(DType::Bool, {2, 1, 4}, 22),
                            randomTensor(dt(t), {3, 1}, 23, -50, 50),
                            randomTensor(dt(t), {}, 24, -50, 50)});
  }
}

TEST(LowerElementwise, ClipWithAbsentBoundsOnIntegersAndFloats) {
  for (const char *t : {"f32", "f16", "f64", "i8", "u8", "i64"}) {
    SCOPED_TRACE(t);
    const std::string s(t);
    const std::string model = "kiln.model opsets {\"\" = 21}\n"
                              "graph @g(%x: " +
                              s + "[4,5], %lo: " + s + "[], %hi: " + s +
                              "[1]) -> (%a, %b, %c, %d) {\n"
                              "  %a = Clip(%x, %lo, %hi) : " +
                              s +
                              "[4,5]\n"
                              "  %b = Clip(%x, %lo) : " +
                              s +
                              "[4,5]\n"
                              "  %c = Clip(%x, _, %hi) : " +
                              s +
                              "[4,5]\n"
                              "  %d = Clip(%x) : " +
                              s + "[4,5]\n}";
    const bool unsignedType = t[0] == 'u';
    expectBothPaths(model, {randomTensor(dt(t), {4, 5}, 25, unsignedType ? 0 : -100, 100),
                            randomTensor(dt(t), {}, 26, unsignedType ? 0 : -20, 10),
                            randomTensor(dt(t), {1}, 27, 10, 40)});
  }
}

TEST(LowerElementwise, ClipWithMinAboveMaxGivesMaxAndKeepsNaN) {
  const std::string model = "kiln.model opsets {\"\" = 21}\n"
                            "graph @g(%x: f32[10], %lo: f32[], %hi: f32[]) -> (%y) {\n"
                            "  %y = Clip(%x, %lo, %hi) : f32[10]\n}";
  expectBothPaths(model, {withSpecials(randomTensor(DType::F32, {10}, 28)), Tensor::scalar(3.0f),
                          Tensor::scalar(1.0f)});
}

TEST(LowerElementwise, VariadicOpsOverManyBroadcastingInputs) {
  for (const char *t : {"f32", "f16", "i32", "u8", "f64"}) {
    SCOPED_TRACE(t);
    const std::string s(t);
    const std::string model = "kiln.model opsets {\"\" = 21}\n"
                              "graph @g(%a: " +
                              s + "[2,1,3], %b: " + s + "[4,1], %c: " + s + "[], %d: " + s +
                              "[2,4,3]) -> (%mx, %mn, %sm, %me, %one) {\n"
                              "  %mx = Max(%a, %b, %c, %d) : " +
                              s +
                              "[2,4,3]\n"
                              "  %mn = Min(%a, %b, %c, %d) : " +
                              s +
                              "[2,4,3]\n"
                              "  %sm = Sum(%a, %b, %c, %d) : " +
                              s +
                              "[2,4,3]\n"
                              "  %me = Mean(%a, %b, %c, %d) : " +
                              s +
                              "[2,4,3]\n"
                              "  %one = Sum(%d) : " +
                              s + "[2,4,3]\n}";
    const double lo = t[0] == 'u' ? 0 : -50;
    expectBothPaths(model,
                    {randomTensor(dt(t), {2, 1, 3}, 29, lo, 50),
                     randomTensor(dt(t), {4, 1}, 30, lo, 50), randomTensor(dt(t), {}, 31, lo, 50),
                     randomTensor(dt(t), {2, 4, 3}, 32, lo, 50)},
                    tolerance(t));
  }
}

// ---- Cast, CastLike ----------------------------------------------------------------------

TEST(LowerElementwise, CastBetweenEveryPairOfNumericAndBoolTypes) {
  for (const char *from : kAllDTypes) {
    SCOPED_TRACE(std::string("from ") + from);
    std::string body, outList;
    for (const char *to : kAllDTypes) {
      const std::string y = std::string("%to_") + to;
      outList += (outList.empty() ? "" : ", ") + y;
      body += "  " + y + " = Cast(%x) {to = " + std::to_string(onnxCodeOf(dt(to))) + "} : " + to +
              "[64]\n";
    }
    const std::string model = "kiln.model opsets {\"\" = 21}\ngraph @g(%x: " + std::string(from) +
                              "[64]) -> (" + outList + ") {\n" + body + "}";
    Tensor x = randomTensor(dt(from), {64}, 33,
                            isSignedInt(dt(from)) || isFloat(dt(from)) ? -70000 : 0, 70000);
    if (isFloat(dt(from))) x = withSpecials(x);
    if (dt(from) == DType::I64 || dt(from) == DType::U64) // wide values that round in f32
      for (int64_t i = 0; i < 8; ++i) x.setInt(i, (int64_t(1) << 40) + 12345 * i + 1);
    expectBothPaths(model, {x});
  }
}

TEST(LowerElementwise, CastOfWideValuesToHalfRoundsOnce) {
  // Values just above a halfway point of the 16-bit type (2^-bits apart at
  // 1) that a first rounding to f32 would move onto it (then to even).
  for (auto [type, code, bits] : {std::tuple{"f16", 10, 11}, std::tuple{"bf16", 16, 8}}) {
    SCOPED_TRACE(type);
    std::vector<double> v;
    for (int i = 0; i < 16; ++i) v.push_back(1.0 + (2 * i + 1) * std::ldexp(1.0, -bits) + 1e-9);
    std::vector<int64_t> n;
    for (int i = 0; i < 16; ++i)
      n.push_back((int64_t(1) << 40) + (int64_t(2 * i + 1) << (40 - bits)) + 1);
    const std::string t = std::string(type) + "[16]";
    const std::string model = "kiln.model opsets {\"\" = 21}\n"
                              "graph @g(%x: f64[16], %n: i64[16]) -> (%y, %z) {\n"
                              "  %y = Cast(%x) {to = " +
                              std::to_string(code) + "} : " + t +
                              "\n"
                              "  %z = Cast(%n) {to = " +
                              std::to_string(code) + "} : " + t + "\n}";
    OpCheckOptions exact;
    exact.rtol = exact.atol = 0;
    expectBothPaths(model, {Tensor::fromVector(v, {16}), Tensor::fromVector(n, {16})}, exact);
  }
}

TEST(LowerElementwise, CastLikeTakesTheSecondInputsType) {
  const std::string model = "kiln.model opsets {\"\" = 21}\n"
                            "graph @g(%x: f32[8], %like: i8[2], %h: f16[]) -> (%y, %z) {\n"
                            "  %y = CastLike(%x, %like) : i8[8]\n"
                            "  %z = CastLike(%x, %h) : f16[8]\n}";
  expectBothPaths(model, {randomTensor(DType::F32, {8}, 34, -300, 300),
                          randomTensor(DType::I8, {2}, 35), randomTensor(DType::F16, {}, 36)});
}

// ---- broadcasting, shapes, fused groups ---------------------------------------------------

TEST(LowerElementwise, BroadcastsSymbolicDimsThatAreOneOnSomeRuns) {
  const std::string model = "kiln.model opsets {\"\" = 21}\n"
                            "graph @g(%a: f32[n,1,4], %b: f32[m,k,1]) -> (%y) {\n"
                            "  %y = Add(%a, %b) : f32[?,k,4]\n}";
  for (auto [n, m, k] : {std::tuple{3, 3, 2}, std::tuple{1, 3, 2}, std::tuple{3, 1, 5},
                         std::tuple{1, 1, 1}, std::tuple{0, 1, 3}}) {
    SCOPED_TRACE(::testing::Message() << n << " " << m << " " << k);
    expectBothPaths(
        model, {randomTensor(DType::F32, {n, 1, 4}, 37), randomTensor(DType::F32, {m, k, 1}, 38)});
  }
}

TEST(LowerElementwise, MergesDimsOfSymbolicSameShapeOperands) {
  const std::string model = "kiln.model opsets {\"\" = 21}\n"
                            "graph @g(%a: f32[n,c,h], %b: f32[n,c,h], %s: f32[c,1]) -> (%y) {\n"
                            "  %p = Mul(%a, %b) : f32[n,c,h]\n"
                            "  %y = Add(%p, %s) : f32[n,c,h]\n}";
  for (auto [n, c, h] : {std::tuple{2, 3, 1500}, std::tuple{1, 1, 7}, std::tuple{4, 5, 0}}) {
    SCOPED_TRACE(::testing::Message() << n << " " << c << " " << h);
    expectBothPaths(model, {randomTensor(DType::F32, {n, c, h}, 39),
                            randomTensor(DType::F32, {n, c, h}, 40),
                            randomTensor(DType::F32, {c, 1}, 41)});
  }
}

TEST(LowerElementwise, LargeFlatSpacesSplitIntoBlocksAndATail) {
  const std::string model = unaryModel("f32[n]", {"Sin(%x)"}, "f32[n]");
  for (int64_t n : {1, 1023, 1024, 1025, 5000}) {
    SCOPED_TRACE(n);
    GeneralOnly general;
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {n}, 42)});
  }
}

TEST(LowerElementwise, ScalarsAndHighRanks) {
  expectBothPaths(binaryModel("f32[]", "f32[]", "f32[]", {"Add(%a, %b)", "Pow(%a, %b)"}),
                  {Tensor::scalar(2.0f), Tensor::scalar(3.0f)});
  expectBothPaths(binaryModel("i32[2,1,3,1,5]", "i32[4,1,2,1,4,1]", "i32[4,2,2,3,4,5]",
                              {"Add(%a, %b)", "Mul(%a, %b)"}),
                  {randomTensor(DType::I32, {2, 1, 3, 1, 5}, 43, -9, 9),
                   randomTensor(DType::I32, {4, 1, 2, 1, 4, 1}, 44, -9, 9)});
}

TEST(LowerElementwise, ShapesThatDoNotBroadcastAreARunTimeError) {
  const std::string model = binaryModel("f32[n]", "f32[m]", "f32[?]", {"Add(%a, %b)"});
  for (bool general : {false, true}) {
    std::optional<GeneralOnly> g;
    if (general) g.emplace();
    const std::string error = artifactRunError(
        model, {randomTensor(DType::F32, {3}, 45), randomTensor(DType::F32, {4}, 46)});
    EXPECT_NE(error.find("do not broadcast"), std::string::npos) << error;
  }
}

TEST(LowerElementwise, FusedGroupsWithSymbolicDimsAndSeveralOutputs) {
  // fuse-elementwise makes one group of the chain; %t is read outside it.
  const std::string model = "kiln.model opsets {\"\" = 21}\n"
                            "graph @g(%x: f32[n,4], %b: f32[4], %h: f16[n,4]) -> (%y, %t, %z) {\n"
                            "  %s = Add(%x, %b) : f32[n,4]\n"
                            "  %t = Relu(%s) : f32[n,4]\n"
                            "  %y = Mul(%t, %s) : f32[n,4]\n"
                            "  %hf = Cast(%h) {to = 1} : f32[n,4]\n"
                            "  %z = Sub(%y, %hf) : f32[n,4]\n}";
  for (int64_t n : {1, 5}) {
    SCOPED_TRACE(n);
    expectBothPaths(model, {randomTensor(DType::F32, {n, 4}, 47), randomTensor(DType::F32, {4}, 48),
                            randomTensor(DType::F16, {n, 4}, 49)});
  }
}

TEST(LowerElementwise, DropoutCopiesAndMasksAndRefusesToDropInTraining) {
  const std::string model = "kiln.model opsets {\"\" = 21}\n"
                            "graph @g(%x: f32[3,4], %r: f32[], %t: bool[]) -> (%y, %m) {\n"
                            "  %y, %m = Dropout(%x, %r, %t) : f32[3,4], bool[3,4]\n}";
  for (int level : {0, 3}) {
    OpCheckOptions o;
    o.optLevel = level;
    expectBothPaths(
        model, {randomTensor(DType::F32, {3, 4}, 50), Tensor::scalar(0.0f), Tensor::scalar(true)},
        o);
    expectBothPaths(
        model, {randomTensor(DType::F32, {3, 4}, 50), Tensor::scalar(0.5f), Tensor::scalar(false)},
        o);
  }
  const std::string error = artifactRunError(
      model, {randomTensor(DType::F32, {3, 4}, 51), Tensor::scalar(0.5f), Tensor::scalar(true)});
  EXPECT_NE(error.find("training-mode dropout is not supported"), std::string::npos) << error;
}

TEST(LowerElementwise, RefusesFusedNodesOfOtherKinds) {
  auto model = parseModel("kiln.model opsets {\"\" = 21}\n"
                          "graph @g(%x: f32[2]) -> (%y) {\n"
                          "  %y = Fused(%x) {body = graph @b(%a: f32[2]) -> (%r) {\n"
                          "    %r = Relu(%a) : f32[2]\n"
                          "  }, kind = \"conv\"} : f32[2]\n}",
                          "t");
  ASSERT_TRUE(model.ok()) << model.error().message;
  const Node &fused = *model->graph->nodes().back();
  lower::DispatchBuilder d(fused, "k");
  lower::LowerFn lower = lower::elementwiseLowering(OpKind::Fused);
  ASSERT_NE(lower, nullptr);
  Status s = lower(d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("kind 'conv'"), std::string::npos) << s.error().message;
}

} // namespace
} // namespace kiln
