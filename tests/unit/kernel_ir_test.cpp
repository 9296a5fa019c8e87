// Tests of the Kernel IR's text form and verifier: the printer's canonical
// text for builder-made kernels, exact round trips of constants of every
// type, the golden files under tests/lit/kernel/, parse errors with their
// positions, one test per verifier rule, and robustness against mangled
// text.
#include "kernel/parser.h"
#include "kernel/printer.h"
#include "kernel/verifier.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

namespace kiln {
namespace {

using kir::Affine;
using kir::Kernel;
using kir::KernelBuilder;
using kir::Opcode;
using kir::Schedule;

// ---- Helpers -------------------------------------------------------------------

Kernel parse(std::string_view text) {
  Expected<Kernel> k = parseKernel(text, "test.kir");
  if (!k.ok()) {
    ADD_FAILURE() << "parse failed: " << k.error().message << "\n" << text;
    return Kernel();
  }
  return std::move(*k);
}

std::string parseError(std::string_view text) {
  Expected<Kernel> k = parseKernel(text, "test.kir");
  return k.ok() ? "(parsed without error)" : k.error().message;
}

std::string verifyError(const Kernel &k) {
  Status s = verifyKernel(k);
  return s.ok() ? "(verified without error)" : s.message();
}

// Parses a kernel that is written correctly but breaks a verifier rule.
std::string verifyError(std::string_view text) {
  return verifyError(parse(text));
}

// Wraps body lines in a kernel with two f32 buffers, params %n and %m and an
// f32 var.
std::string kernelWith(const std::string &body) {
  return "kernel @k(%x: f32, %y: f32 out) params(%n, %m) vars(%acc: f32) {\n" + body + "}\n";
}

Affine affine(std::initializer_list<kir::Term> terms) {
  return Affine{terms};
}

// ---- Printer: canonical text ----------------------------------------------------

// The header's example, built with the builder.
Kernel addRelu() {
  KernelBuilder b("add_relu");
  int x = b.addBuffer("x", DType::F32, false);
  int bias = b.addBuffer("b", DType::F32, false);
  int y = b.addBuffer("y", DType::F32, true);
  int n0 = b.addParam("n0"), n1 = b.addParam("n1"), sb0 = b.addParam("sb0");
  int i0 = b.beginLoop(Affine::param(n0), {Schedule::Kind::Parallel, 1});
  int i1 = b.beginLoop(Affine::param(n1), {Schedule::Kind::Vector, 8});
  Affine xy = affine({{1, n1, i0}, {1, -1, i1}});
  int v0 = b.load(x, xy);
  int v1 = b.load(bias, affine({{1, sb0, i0}}));
  int v2 = b.binary(Opcode::Add, DType::F32, v0, v1);
  int v3 = b.constant(DType::F32, 0.0);
  int v4 = b.binary(Opcode::Max, DType::F32, v2, v3);
  b.store(y, xy, v4);
  b.endLoop();
  b.endLoop();
  return b.finish();
}

TEST(KernelIrText, PrintsTheHeadersExampleFromTheBuilder) {
  EXPECT_EQ(printKernel(addRelu()),
            "kernel @add_relu(%x: f32, %b: f32, %y: f32 out) params(%n0, %n1, %sb0) {\n"
            "  parallel %i0 = 0 to %n0 {\n"
            "    vector(8) %i1 = 0 to %n1 {\n"
            "      %0 = load %x[%i0 * %n1 + %i1]\n"
            "      %1 = load %b[%i0 * %sb0]\n"
            "      %2 = add %0, %1 : f32\n"
            "      %3 = const 0.0 : f32\n"
            "      %4 = max %2, %3 : f32\n"
            "      store %y[%i0 * %n1 + %i1], %4\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_TRUE(verifyKernel(addRelu()).ok()) << verifyError(addRelu());
}

TEST(KernelIrText, PrintsVarsReadWriteCompareSelectCastAndSchedules) {
  KernelBuilder b("k");
  int x = b.addBuffer("x", DType::F32, false);
  int y = b.addBuffer("y", DType::I64, true);
  int n = b.addParam("n");
  int acc = b.addVar("acc", DType::F32);
  int i0 = b.beginLoop(Affine::param(n), {Schedule::Kind::Unroll, 4});
  b.beginLoop(Affine::constant(3));
  int v0 = b.load(x, affine({{1, -1, i0}}));
  int v1 = b.varRead(acc);
  int v2 = b.compare(Opcode::Lt, DType::F32, v0, v1);
  int v3 = b.select(DType::F32, v2, v0, v1);
  b.varWrite(acc, v3);
  int v4 = b.cast(DType::I64, DType::F32, v3);
  b.store(y, affine({{1, -1, i0}}), v4);
  b.endLoop();
  b.endLoop();
  Kernel k = b.finish();
  EXPECT_EQ(printKernel(k), "kernel @k(%x: f32, %y: i64 out) params(%n) vars(%acc: f32) {\n"
                            "  unroll(4) %i0 = 0 to %n {\n"
                            "    for %i1 = 0 to 3 {\n"
                            "      %0 = load %x[%i0]\n"
                            "      %1 = read %acc\n"
                            "      %2 = lt %0, %1 : f32\n"
                            "      %3 = select %2, %0, %1 : f32\n"
                            "      write %acc, %3\n"
                            "      %4 = cast %3 : f32 to i64\n"
                            "      store %y[%i0], %4\n"
                            "    }\n"
                            "  }\n"
                            "}\n");
  EXPECT_TRUE(verifyKernel(k).ok()) << verifyError(k);
}

TEST(KernelIrText, AffineTermsDropOnesAndKeepNegativeCoefficients) {
  KernelBuilder b("k");
  int x = b.addBuffer("x", DType::F32, false);
  int n = b.addParam("n"), p3 = b.addParam("p3");
  int i0 = b.beginLoop(Affine::param(n));
  int i1 = b.beginLoop(Affine::param(n));
  int i2 = b.beginLoop(Affine::param(n));
  (void)i1;
  b.load(x, affine({{1, n, i0}, {4, -1, i2}, {-1, p3, -1}, {7, -1, -1}}));
  b.load(x, Affine{});
  b.load(x, affine({{1, -1, -1}, {0, -1, -1}, {-3, n, i2}, {1, p3, -1}}));
  b.endLoop();
  b.endLoop();
  b.endLoop();
  std::string text = printKernel(b.finish());
  EXPECT_NE(text.find("%0 = load %x[%i0 * %n + 4 * %i2 + -1 * %p3 + 7]\n"), std::string::npos);
  EXPECT_NE(text.find("%1 = load %x[0]\n"), std::string::npos);
  EXPECT_NE(text.find("%2 = load %x[1 + 0 + -3 * %i2 * %n + %p3]\n"), std::string::npos);
  EXPECT_EQ(printKernel(parse(text)), text);
}

TEST(KernelIrText, EmptyListsAreLeftOutOfTheSignature) {
  KernelBuilder b("empty");
  Kernel k = b.finish();
  EXPECT_EQ(printKernel(k), "kernel @empty() {\n}\n");
  EXPECT_EQ(printKernel(parse("kernel @empty() params() vars() {}")), "kernel @empty() {\n}\n");
  EXPECT_TRUE(verifyKernel(k).ok());
}

// A const of `type` built from `value`, printed, and its value parsed back.
std::pair<std::string, Kernel> constRoundTrip(DType type, double value) {
  KernelBuilder b("k");
  b.constant(type, value);
  std::string text = printKernel(b.finish());
  size_t at = text.find("const ") + 6;
  return {text.substr(at, text.find('\n', at) - at), parse(text)};
}

TEST(KernelIrText, FloatConstantsPrintTheValueOfTheirTypeAndReadBackExactly) {
  struct Case {
    DType type;
    double value;
    const char *text;
    double parsed; // the value the constant holds after parsing
  } cases[] = {
      {DType::F32, 0.1, "0.1 : f32", double(0.1f)},
      {DType::F32, 1.0 / 3, "0.33333334 : f32", double(1.0f / 3)},
      {DType::F32, 1e-45, "1e-45 : f32", double(std::numeric_limits<float>::denorm_min())},
      {DType::F32, 3.4028234663852886e38, "3.4028235e+38 : f32", 3.4028234663852886e38},
      {DType::F32, 2, "2.0 : f32", 2},
      {DType::F32, -0.0, "-0.0 : f32", -0.0},
      {DType::F64, 0.1, "0.1 : f64", 0.1},
      {DType::F64, 1.0 / 3, "0.3333333333333333 : f64", 1.0 / 3},
      {DType::F64, 5e-324, "5e-324 : f64", 5e-324},
      {DType::F16, 0.1, "0.1 : f16", 0.0999755859375},
      {DType::F16, 65504, "65500.0 : f16", 65504},
      {DType::F16, -1.0 / 3, "-0.3333 : f16", -0.333251953125},
      {DType::BF16, 0.1, "0.1 : bf16", 0.10009765625},
      {DType::F16, 1e6, "inf : f16", std::numeric_limits<double>::infinity()},
      {DType::F32, -std::numeric_limits<double>::infinity(), "-inf : f32",
       -std::numeric_limits<double>::infinity()},
  };
  for (const Case &c : cases) {
    auto [text, k] = constRoundTrip(c.type, c.value);
    EXPECT_EQ(text, c.text);
    ASSERT_EQ(k.body.size(), 1u) << c.text;
    double got = k.body[0].fimm;
    EXPECT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(c.parsed))
        << c.text << ": " << got;
  }
  auto [text, k] = constRoundTrip(DType::F32, std::nan(""));
  EXPECT_EQ(text, "nan : f32");
  EXPECT_TRUE(std::isnan(k.body.at(0).fimm));
}

TEST(KernelIrText, IntegerConstantsCoverTheirTypesRange) {
  EXPECT_EQ(constRoundTrip(DType::I64, -9.2233720368547758e18).first, "-9223372036854775808 : i64");
  EXPECT_EQ(constRoundTrip(DType::Bool, 1).first, "true : bool");
  EXPECT_EQ(constRoundTrip(DType::Bool, 0).first, "false : bool");
  EXPECT_EQ(constRoundTrip(DType::I8, -128).first, "-128 : i8");
  Kernel k = parse("kernel @k() {\n  %0 = const 18446744073709551615 : u64\n"
                   "  %1 = const 1 : bool\n}\n");
  EXPECT_EQ(k.body.at(0).iimm, -1); // the same 64 bits
  EXPECT_EQ(printKernel(k), "kernel @k() {\n  %0 = const 18446744073709551615 : u64\n"
                            "  %1 = const true : bool\n}\n");
}

TEST(KernelIrText, BuilderKernelRoundTripsToTheSameStructure) {
  Kernel a = addRelu();
  Kernel b = parse(printKernel(a));
  EXPECT_EQ(b.numValues, a.numValues);
  EXPECT_EQ(b.numLoopVars, a.numLoopVars);
  ASSERT_EQ(b.body.size(), 1u);
  const kir::Inst &inner = b.body[0].body.at(0);
  EXPECT_EQ(inner.schedule.kind, Schedule::Kind::Vector);
  EXPECT_EQ(inner.schedule.width, 8);
  ASSERT_EQ(inner.body.size(), 6u);
  const kir::Inst &store = inner.body[5];
  EXPECT_EQ(store.op, Opcode::Store);
  EXPECT_EQ(store.buffer, 2);
  EXPECT_EQ(store.type, DType::F32);
  EXPECT_EQ(store.operands, std::vector<int>{4});
  ASSERT_EQ(store.index.terms.size(), 2u);
  EXPECT_EQ(store.index.terms[0].param, 1);
  EXPECT_EQ(store.index.terms[0].loopVar, 0);
  EXPECT_EQ(printKernel(b), printKernel(a));
}

TEST(KernelIrText, PrinterMarksReferencesOutOfRangeInsteadOfCrashing) {
  Kernel k = addRelu();
  k.body[0].body[0].body[0].buffer = 9;
  k.body[0].body[0].body[1].index.terms[0].param = 7;
  k.body[0].body[0].body[2].operands.clear();
  std::string text = printKernel(k);
  EXPECT_NE(text.find("%0 = load %<bad buffer 9>["), std::string::npos) << text;
  EXPECT_NE(text.find("%i0 * %<bad param 7>]"), std::string::npos) << text;
  EXPECT_NE(text.find("%2 = add %<missing operand>, %<missing operand> : f32"), std::string::npos);
}

// ---- Golden files ----------------------------------------------------------------

std::filesystem::path litDir() {
  return std::filesystem::path(KILN_SOURCE_DIR) / "tests" / "lit" / "kernel";
}

// The file's text after its leading `//` comment lines.
std::string withoutLeadingComments(const std::string &text) {
  size_t pos = 0;
  while (text.compare(pos, 2, "//") == 0) {
    size_t eol = text.find('\n', pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
  }
  return text.substr(pos);
}

std::vector<std::string> goldenTexts() {
  std::vector<std::string> texts;
  for (const auto &entry : std::filesystem::directory_iterator(litDir())) {
    if (entry.path().extension() != ".kir") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    texts.push_back(ss.str());
  }
  return texts;
}

TEST(KernelIrText, GoldenFilesParseVerifyAndPrintBackToTheirOwnText) {
  int kernels = 0;
  for (const std::string &file : goldenTexts()) {
    Expected<std::vector<Kernel>> ks = parseKernels(file, "golden.kir");
    ASSERT_TRUE(ks.ok()) << ks.error().message;
    EXPECT_EQ(printKernels(*ks), withoutLeadingComments(file));
    for (const Kernel &k : *ks) {
      EXPECT_TRUE(verifyKernel(k).ok()) << verifyError(k);
      ++kernels;
    }
  }
  EXPECT_GE(kernels, 7) << "golden files missing from " << litDir();
}

// ---- Parser errors ------------------------------------------------------------------

TEST(KernelIrParser, ReportsUnknownOpcodesAndTypesAtTheirPosition) {
  EXPECT_EQ(parseError(kernelWith("  %0 = frobnicate %1 : f32\n")),
            "test.kir:2:8: unknown opcode 'frobnicate'");
  EXPECT_EQ(parseError(kernelWith("  %0 = neg %1 : f31\n")),
            "test.kir:2:17: unknown element type 'f31'");
  EXPECT_EQ(parseError(kernelWith("  %0 = store %x[0], %1\n")),
            "test.kir:2:8: 'store' has no result");
  EXPECT_EQ(
      parseError(kernelWith("  frob %x\n")),
      "test.kir:2:3: expected an instruction (%N = ..., store, write, if or a loop), found 'frob'");
}

TEST(KernelIrParser, ReportsUndefinedNamesAndNamesOfTheWrongKind) {
  EXPECT_EQ(parseError(kernelWith("  %0 = load %w[0]\n")),
            "test.kir:2:13: use of undefined name %w");
  EXPECT_EQ(parseError(kernelWith("  %0 = load %acc[0]\n")),
            "test.kir:2:13: %acc is a var, expected a buffer");
  EXPECT_EQ(parseError(kernelWith("  %0 = read %x\n")),
            "test.kir:2:13: %x is a buffer, expected a var");
  EXPECT_EQ(parseError(kernelWith("  %0 = load %x[%acc]\n")),
            "test.kir:2:16: %acc is a var, expected a param");
  EXPECT_EQ(parseError(kernelWith("  %0 = add %n, %1 : f32\n")),
            "test.kir:2:12: expected an SSA value (%N), found '%n'");
  EXPECT_EQ(parseError("kernel @k(%x: f32, %x: f32) {}"),
            "test.kir:1:20: name %x is already declared");
}

TEST(KernelIrParser, ReportsBadAffineExpressions) {
  EXPECT_EQ(parseError(kernelWith("  %0 = load %x[%n * ]\n")),
            "test.kir:2:21: expected an integer, loop variable or param, found ']'");
  EXPECT_EQ(parseError(kernelWith("  %0 = load %x[2 * 3]\n")),
            "test.kir:2:20: a term has at most one coefficient");
  EXPECT_EQ(parseError(kernelWith("  %0 = load %x[%i0 * %i1]\n")),
            "test.kir:2:22: a term has at most one loop variable");
  EXPECT_EQ(parseError(kernelWith("  %0 = load %x[%n * %m]\n")),
            "test.kir:2:21: a term has at most one param");
  EXPECT_EQ(parseError(kernelWith("  %0 = load %x[%i0 - 1]\n")),
            "test.kir:2:20: terms are joined by '+'; subtract with a negative coefficient (+ "
            "-1 * %n)");
  EXPECT_EQ(parseError(kernelWith("  %0 = load %x[%i0 -1]\n")),
            "test.kir:2:20: terms are joined by '+'; subtract with a negative coefficient (+ "
            "-1 * %n)");
  EXPECT_EQ(parseError(kernelWith("  %0 = load %x[1.5]\n")),
            "test.kir:2:16: '1.5' is not an int64 integer");
  EXPECT_EQ(parseError(kernelWith("  %0 = load %x[99999999999999999999]\n")),
            "test.kir:2:16: '99999999999999999999' is not an int64 integer");
}

TEST(KernelIrParser, ReportsMissingBracesAndTrailingText) {
  EXPECT_EQ(parseError("kernel @k() {\n  for %i0 = 0 to 4 {\n"),
            "test.kir:3:1: expected an instruction or '}', found end of input");
  EXPECT_EQ(parseError("kernel @k() \n  %0 = const 1 : i32\n}"),
            "test.kir:2:3: expected '{', found '%0'");
  EXPECT_EQ(parseError("kernel @k() {}\nkernel @j() {}"),
            "test.kir:2:1: expected end of input after the kernel, found 'kernel'");
  Expected<std::vector<Kernel>> two = parseKernels("kernel @k() {}\nkernel @j() {}", "t.kir");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2u);
}

TEST(KernelIrParser, ReportsBadLoops) {
  EXPECT_EQ(parseError(kernelWith("  for %i0 = 1 to %n {\n  }\n")),
            "test.kir:2:13: expected 0 (loops start at 0), found '1'");
  EXPECT_EQ(parseError(kernelWith("  vector %i0 = 0 to %n {\n  }\n")),
            "test.kir:2:10: expected '(', found '%i0'");
  EXPECT_EQ(parseError(kernelWith("  unroll(x) %i0 = 0 to %n {\n  }\n")),
            "test.kir:2:10: expected the unroll factor, found 'x'");
  EXPECT_EQ(parseError(kernelWith("  for %0 = 0 to %n {\n  }\n")),
            "test.kir:2:7: expected a loop variable (%iN), found '%0'");
  std::string deep = "kernel @k() {\n";
  for (int d = 0; d < 100; ++d) deep += "for %i" + std::to_string(d) + " = 0 to 2 {\n";
  EXPECT_EQ(parseError(deep), "test.kir:66:1: loops are nested more than 64 deep");
}

TEST(KernelIrParser, ReportsBadNumbersAndNames) {
  EXPECT_EQ(parseError(kernelWith("  %07 = const 1 : i32\n")),
            "test.kir:2:3: '%07' has a leading zero");
  EXPECT_EQ(parseError(kernelWith("  %99999999 = const 1 : i32\n")),
            "test.kir:2:3: '%99999999' is too large (numbers are below 16777216)");
  EXPECT_EQ(parseError(kernelWith("  %1x = const 1 : i32\n")),
            "test.kir:2:3: '%1x' is not a name, value or loop variable");
  EXPECT_EQ(parseError("kernel @k(%i3: f32) {}"),
            "test.kir:1:11: expected a name (%name), found '%i3'");
  EXPECT_EQ(parseError("kernel @7() {}"), "test.kir:1:8: expected a kernel name after '@'");
  EXPECT_EQ(parseError("kernel @k() {\n  %0 = const 0.5 : i32\n}"),
            "test.kir:2:14: '0.5' is not an integer (the constant is i32)");
  EXPECT_EQ(parseError("kernel @k() {\n  %0 = const 1e39 : f32\n}"),
            "test.kir:2:14: '1e39' is out of range for f32");
  EXPECT_EQ(parseError("kernel @k() {\n  %0 = const 1.2.3 : f64\n}"),
            "test.kir:2:14: '1.2.3' is not a number");
  EXPECT_EQ(parseError("kernel @k() {\n  %0 = const true : f32\n}"),
            "test.kir:2:14: 'true' is not a number (the constant is f32)");
  EXPECT_EQ(parseError("kernel @k() {\n  %0 = const true : i8\n}"),
            "test.kir:2:14: 'true' is a bool (the constant is i8)");
  EXPECT_EQ(parseError("kernel @k() {\n  %0 = const -nan : f32\n}"),
            "test.kir:2:15: expected inf after '-', found 'nan'");
  EXPECT_EQ(parseError("kernel @k() {\n  %0 = const 1 : i32 \x01\n}"),
            "test.kir:2:22: unexpected byte 0x01");
}

TEST(KernelIrParser, AcceptsCommentsAndFreeLayout) {
  Kernel k = parse("// leading\nkernel @k(%y: i32 out) params(%n) { // trailing\n"
                   "parallel %i0=0 to %n{%0=const 3:i32 store %y[%i0],%0}}");
  EXPECT_EQ(printKernel(k), "kernel @k(%y: i32 out) params(%n) {\n"
                            "  parallel %i0 = 0 to %n {\n"
                            "    %0 = const 3 : i32\n"
                            "    store %y[%i0], %0\n"
                            "  }\n"
                            "}\n");
}

// ---- Verifier: one test per rule ----------------------------------------------------------

TEST(KernelIrVerifier, RejectsOperandsOfTheWrongType) {
  EXPECT_EQ(verifyError(kernelWith("  %3 = const 1 : i64\n  %4 = const 1.0 : f32\n"
                                   "  %5 = add %4, %3 : f32\n")),
            "kernel 'k': %5 = add: operand %3 has type i64, expected f32");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1 : i64\n  %1 = lt %0, %0 : f32\n")),
            "kernel 'k': %1 = lt: operand %0 has type i64, expected f32");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1.0 : f32\n  %1 = select %0, %0, %0 : f32\n")),
            "kernel 'k': %1 = select: operand %0 has type f32, expected bool");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1 : i32\n  %1 = cast %0 : f32 to i64\n")),
            "kernel 'k': %1 = cast: operand %0 has type i32, expected f32");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1 : i32\n  write %acc, %0\n")),
            "kernel 'k': write %acc: operand %0 has type i32, expected f32");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1 : i32\n  store %y[0], %0\n")),
            "kernel 'k': store %y: operand %0 has type i32, expected f32");
}

TEST(KernelIrVerifier, RejectsUseBeforeDefinitionAndOutsideTheDefiningLoop) {
  EXPECT_EQ(verifyError(kernelWith("  %0 = neg %9 : f32\n  %9 = const 1.0 : f32\n")),
            "kernel 'k': %0 = neg: operand %9 is not defined before its use");
  EXPECT_EQ(verifyError(kernelWith("  %0 = neg %7 : f32\n")),
            "kernel 'k': %0 = neg: operand %7 is not defined before its use");
  EXPECT_EQ(verifyError(kernelWith("  for %i0 = 0 to %n {\n    %0 = load %x[%i0]\n  }\n"
                                   "  %1 = neg %0 : f32\n")),
            "kernel 'k': %1 = neg: operand %0 is used outside the loop that defines it");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1.0 : f32\n  %0 = const 2.0 : f32\n")),
            "kernel 'k': %0 = const: %0 is defined twice");
}

TEST(KernelIrVerifier, RejectsLoopVariablesOutsideTheirLoopAndInBounds) {
  EXPECT_EQ(verifyError(kernelWith("  for %i0 = 0 to %n {\n  }\n  %0 = load %x[%i0]\n")),
            "kernel 'k': %0 = load: index uses loop variable %i0 outside its loop");
  EXPECT_EQ(
      verifyError(kernelWith("  for %i0 = 0 to %n {\n    for %i1 = 0 to %i0 {\n    }\n  }\n")),
      "kernel 'k': for %i1: upper bound uses loop variable %i0; loop bounds use params only");
  EXPECT_EQ(verifyError(kernelWith("  for %i0 = 0 to %n {\n  }\n  for %i0 = 0 to %n {\n  }\n")),
            "kernel 'k': for %i0: loop variable %i0 is defined twice");
}

TEST(KernelIrVerifier, RejectsMisplacedParallelAndVectorLoops) {
  EXPECT_EQ(
      verifyError(kernelWith("  for %i0 = 0 to %n {\n    parallel %i1 = 0 to %n {\n    }\n  }\n")),
      "kernel 'k': parallel %i1: a parallel loop must be at the top level");
  EXPECT_EQ(
      verifyError(kernelWith("  parallel %i0 = 0 to %n {\n  }\n  parallel %i1 = 0 to %n {\n  }\n")),
      "kernel 'k': parallel %i1: a kernel has at most one parallel loop");
  EXPECT_EQ(
      verifyError(kernelWith("  vector(4) %i0 = 0 to %n {\n    for %i1 = 0 to %n {\n    }\n  }\n")),
      "kernel 'k': for %i1: a loop inside vector loop %i0 (a vector loop is innermost)");
  EXPECT_EQ(
      verifyError(kernelWith("  %0 = const 1.0 : f32\n  store %y[0], %0\n"
                             "  parallel %i0 = 0 to %n {\n  }\n")),
      "kernel 'k': store %y: a store outside the parallel loop (it would run once per chunk)");
}

TEST(KernelIrVerifier, RejectsBadWidths) {
  EXPECT_EQ(verifyError(kernelWith("  vector(0) %i0 = 0 to %n {\n  }\n")),
            "kernel 'k': vector(0) %i0: width 0 is less than 1");
  EXPECT_EQ(verifyError(kernelWith("  unroll(-2) %i0 = 0 to %n {\n  }\n")),
            "kernel 'k': unroll(-2) %i0: width -2 is less than 1");
  Kernel k = parse(kernelWith("  for %i0 = 0 to %n {\n  }\n"));
  k.body[0].schedule.width = 4; // the text cannot show it
  EXPECT_EQ(verifyError(k), "kernel 'k': for %i0: width 4 on a loop without one (expected 1)");
}

TEST(KernelIrVerifier, RejectsStoresToInputs) {
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1.0 : f32\n  store %x[0], %0\n")),
            "kernel 'k': store %x: buffer %x is an input; stores go to outputs");
  // Loading an output (read after write in a reduction) is fine.
  EXPECT_EQ(verifyError(kernelWith("  %0 = load %y[0]\n  store %y[0], %0\n")),
            "(verified without error)");
}

TEST(KernelIrVerifier, RejectsOpcodesOnTypesOutsideTheirClass) {
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1 : i32\n  %1 = exp %0 : i32\n")),
            "kernel 'k': %1 = exp: type i32 is not a float type");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1 : i32\n  %1 = pow %0, %0 : i32\n")),
            "kernel 'k': %1 = pow: type i32 is not a float type");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const true : bool\n  %1 = mod %0, %0 : bool\n")),
            "kernel 'k': %1 = mod: type bool is not a numeric type");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1.0 : f32\n  %1 = xor %0, %0 : f32\n")),
            "kernel 'k': %1 = xor: type f32 is not an integer or bool type");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const true : bool\n  %1 = add %0, %0 : bool\n")),
            "kernel 'k': %1 = add: type bool is not a numeric type");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const true : bool\n  %1 = lt %0, %0 : bool\n")),
            "kernel 'k': %1 = lt: type bool is not a numeric type");
  EXPECT_EQ(
      verifyError(kernelWith("  %0 = const true : bool\n  %1 = eq %0, %0 : bool\n"
                             "  %2 = not %1 : bool\n  %3 = const 3 : u8\n  %4 = not %3 : u8\n")),
      "(verified without error)");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 1 : string\n")),
            "kernel 'k': %0 = const: type string is not allowed in a kernel");
}

TEST(KernelIrVerifier, RejectsConstantsOutsideTheirType) {
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 128 : i8\n")),
            "kernel 'k': %0 = const: constant 128 does not fit i8");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const -1 : u32\n")),
            "kernel 'k': %0 = const: constant -1 does not fit u32");
  EXPECT_EQ(verifyError(kernelWith("  %0 = const 2 : bool\n")),
            "kernel 'k': %0 = const: constant 2 does not fit bool");
}

TEST(KernelIrVerifier, RejectsBadNames) {
  KernelBuilder b("k");
  b.addBuffer("i7", DType::F32, false);
  EXPECT_EQ(verifyError(b.finish()),
            "kernel 'k': buffer name 'i7' is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not "
            "i<digits>)");
  KernelBuilder c("k");
  c.addParam("n");
  c.addVar("n", DType::F32);
  EXPECT_EQ(verifyError(c.finish()), "kernel 'k': name %n is declared twice");
  EXPECT_EQ(verifyError(KernelBuilder("9lives").finish()),
            "kernel '9lives': the kernel's name is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, "
            "not i<digits>)");
  EXPECT_TRUE(isKernelIrName("i"));
  EXPECT_TRUE(isKernelIrName("i0x"));
  EXPECT_TRUE(isKernelIrName("x.y_2"));
  EXPECT_FALSE(isKernelIrName("i12"));
  EXPECT_FALSE(isKernelIrName("a-b"));
}

TEST(KernelIrVerifier, RejectsIndicesOutOfRangeInBuiltKernels) {
  Kernel k = addRelu();
  k.body[0].body[0].body[1].index.terms[0].param = 3;
  EXPECT_EQ(verifyError(k),
            "kernel 'add_relu': %1 = load: index uses param 3, but the kernel has 3");
  k = addRelu();
  k.body[0].body[0].body[0].buffer = -2;
  EXPECT_EQ(verifyError(k),
            "kernel 'add_relu': %0 = load: buffer -2 is out of range (the kernel has 3)");
  k = addRelu();
  k.body[0].body[0].body[0].type = DType::I32;
  EXPECT_EQ(verifyError(k), "kernel 'add_relu': %0 = load: has type i32, but buffer %x holds f32");
  k = addRelu();
  k.body[0].body[0].body[2].operands.pop_back();
  EXPECT_EQ(verifyError(k), "kernel 'add_relu': %2 = add: has 1 operands, expected 2");
  k = addRelu();
  k.numValues = 3;
  EXPECT_EQ(verifyError(k),
            "kernel 'add_relu': %3 = const: result %3 is out of range (the kernel has 3 values)");
  k = addRelu();
  k.body[0].body[0].loopVar = 5;
  EXPECT_EQ(
      verifyError(k),
      "kernel 'add_relu': vector(8) %i5: loop variable %i5 is out of range (the kernel has 2)");
}

// ---- Robustness ---------------------------------------------------------------------

// Every accepted text prints to a fixed point, and no text crashes the parser
// or the verifier.
void checkParsesSafely(std::string_view text) {
  Expected<std::vector<Kernel>> ks = parseKernels(text, "fuzz.kir");
  if (!ks.ok()) return;
  std::string printed = printKernels(*ks);
  Expected<std::vector<Kernel>> again = parseKernels(printed, "fuzz.kir");
  ASSERT_TRUE(again.ok()) << again.error().message << "\n" << printed;
  EXPECT_EQ(printKernels(*again), printed);
  for (const Kernel &k : *ks) (void)verifyKernel(k);
}

TEST(KernelIrFuzz, ParserSurvivesEveryTruncationAndRandomMutationsOfValidText) {
  std::mt19937 rng(1234);
  const std::string alphabet = "%@{}[]()*+-=:,. 0123456789ienfotx_\n\x01\xff";
  for (const std::string &file : goldenTexts()) {
    for (size_t n = 0; n <= file.size(); ++n)
      checkParsesSafely(std::string_view(file).substr(0, n));
    for (int round = 0; round < 1500; ++round) {
      std::string mutated = file;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        size_t at = rng() % mutated.size();
        char c = alphabet[rng() % alphabet.size()];
        switch (rng() % 4) {
        case 0:
          mutated[at] = c;
          break;
        case 1:
          mutated.insert(mutated.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        case 2:
          mutated[at] = static_cast<char>(mutated[at] ^ (1 << (rng() % 8)));
          break;
        default:
          mutated.erase(at, 1);
        }
      }
      checkParsesSafely(mutated);
    }
  }
}

} // namespace
} // namespace kiln
