// CPU code generation from Kernel IR, for every x86 level this machine can
// run (x86-64 baseline, x86-64-v3 = AVX2, x86-64-v4 = AVX-512): the inline
// vector math against libm over a wide range including the saturation
// points and special values, and every Kernel IR file of tests/lit/kernel
// compiled and linked.
#include "codegen/cpu/compile.h"
#include "codegen/cpu/cpu_target.h"
#include "codegen/cpu/jit.h"
#include "kernel/kernel_ir.h"
#include "kernel/parser.h"
#include "kernel/verifier.h"

#include "support/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <regex>
#include <sstream>

#include <unistd.h>

namespace kiln {
namespace {

using kir::Opcode;

const char *kLevels[] = {"x86-64", "x86-64-v3", "x86-64-v4"};

// y[i] = op(x[i]) over n elements, with a vector loop (a tail included).
kir::Kernel unaryKernel(Opcode op, int width) {
  kir::KernelBuilder b(std::string("unary_") + kir::opcodeName(op));
  int x = b.addBuffer("x", DType::F32, false);
  int y = b.addBuffer("y", DType::F32, true);
  int n = b.addParam("n");
  int i = b.beginLoop(kir::Affine::param(n), {kir::Schedule::Kind::Vector, width});
  kir::Affine at;
  at.add(1, -1, i);
  b.store(y, at, b.unary(op, DType::F32, b.load(x, at)));
  b.endLoop();
  return b.finish();
}

std::vector<float> testInputs() {
  std::vector<float> v = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, 0.1f, 0.39f, 0.41f, 0.5f, 1.0f,
                          -1.0f, 2.5f, -3.7f, 9.0f, -9.0f, 20.0f, -20.0f, 80.0f, -80.0f, 88.0f,
                          89.0f, -87.0f, -100.0f, 100.0f, 1e30f, -1e30f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  for (int i = -400; i <= 400; ++i) v.push_back(static_cast<float>(i) * 0.0517f);
  return v;
}

double reference(Opcode op, double x) {
  switch (op) {
  case Opcode::Exp: return std::exp(x);
  case Opcode::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
  case Opcode::Tanh: return std::tanh(x);
  case Opcode::Erf: return std::erf(x);
  case Opcode::Log: return std::log(x);
  case Opcode::Sqrt: return std::sqrt(x);
  default: return std::numeric_limits<double>::quiet_NaN();
  }
}

class CpuCodegen : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    auto t = codegen::cpuTargetFromName(GetParam());
    ASSERT_TRUE(t.ok()) << t.error().message;
    if (!t->runsOnHost()) GTEST_SKIP() << GetParam() << " is not supported by this CPU";
    target_ = *t;
  }
  codegen::CpuTarget target_;
};

TEST_P(CpuCodegen, InlineMathMatchesLibmIncludingSaturationAndSpecialValues) {
  const Opcode ops[] = {Opcode::Exp, Opcode::Sigmoid, Opcode::Tanh, Opcode::Erf, Opcode::Log,
                        Opcode::Sqrt};
  std::vector<kir::Kernel> kernels;
  for (Opcode op : ops) kernels.push_back(unaryKernel(op, target_.lanes(4)));
  auto object = codegen::compileKernels(kernels, target_);
  ASSERT_TRUE(object.ok()) << object.error().message;
  auto jit = codegen::CpuJit::create();
  ASSERT_TRUE(jit.ok()) << jit.error().message;
  ASSERT_TRUE((*jit)->addObject(*object).ok());

  std::vector<float> x = testInputs();
  for (size_t k = 0; k < kernels.size(); ++k) {
    auto fn = (*jit)->lookup(kernels[k].name);
    ASSERT_TRUE(fn.ok()) << fn.error().message;
    std::vector<float> y(x.size());
    void *buffers[] = {x.data(), y.data()};
    int64_t params[] = {static_cast<int64_t>(x.size())};
    (*fn)(buffers, params, 0, 0);
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = reference(ops[k], x[i]);
      const double got = y[i];
      SCOPED_TRACE(::testing::Message() << kir::opcodeName(ops[k]) << "(" << x[i] << ") on "
                                        << GetParam());
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << got;
      } else if (std::isinf(want) || std::fabs(want) > 3e38) {
        EXPECT_EQ(got, static_cast<float>(want));
      } else {
        EXPECT_NEAR(got, want, 4e-7 * std::fabs(want) + 1e-37) << "got " << got;
      }
    }
  }
}

TEST_P(CpuCodegen, CompilesEveryKernelIrTestFile) {
  const std::string dir = std::string(KILN_SOURCE_DIR) + "/tests/lit/kernel";
  std::vector<kir::Kernel> kernels;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".kir") continue;
    std::ifstream f(entry.path());
    std::stringstream text;
    text << f.rdbuf();
    auto parsed = parseKernels(text.str(), entry.path().string());
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    for (kir::Kernel &k : *parsed) {
      ASSERT_TRUE(verifyKernel(k).ok());
      kernels.push_back(std::move(k));
    }
  }
  ASSERT_FALSE(kernels.empty());
  auto object = codegen::compileKernels(kernels, target_);
  ASSERT_TRUE(object.ok()) << object.error().message;
  auto jit = codegen::CpuJit::create();
  ASSERT_TRUE(jit.ok());
  ASSERT_TRUE((*jit)->addObject(*object).ok());
  for (const kir::Kernel &k : kernels) EXPECT_TRUE((*jit)->lookup(k.name).ok()) << k.name;
}

// Compiles `text` (one kernel) for the target and returns its entry.
codegen::KernelEntry compileOne(const codegen::CpuTarget &target, const std::string &text,
                                std::unique_ptr<codegen::CpuJit> &jit) {
  auto k = parseKernel(text, "test.kir");
  EXPECT_TRUE(k.ok()) << k.error().message;
  if (!k.ok()) return nullptr;
  Status v = verifyKernel(*k);
  EXPECT_TRUE(v.ok()) << v.error().message;
  auto object = codegen::compileKernels({*k}, target);
  EXPECT_TRUE(object.ok()) << object.error().message;
  auto created = codegen::CpuJit::create();
  EXPECT_TRUE(created.ok());
  jit = std::move(*created);
  EXPECT_TRUE(jit->addObject(*object).ok());
  auto fn = jit->lookup(k->name);
  EXPECT_TRUE(fn.ok());
  return fn.ok() ? *fn : nullptr;
}

// f32 -> f16/bf16 -> f32 round trips in generated code agree bit for bit
// with support/half.h (the hardware path on F16C levels, the integer path
// on the x86-64 baseline), over normals, subnormals, ties, overflow and NaN.
TEST_P(CpuCodegen, SixteenBitFloatsRoundLikeSupportHalf) {
  std::unique_ptr<codegen::CpuJit> jit;
  codegen::KernelEntry fn = compileOne(target_, R"(
kernel @round16(%x: f32, %h: f16 out, %b: bf16 out, %hx: f32 out, %bx: f32 out) params(%n) {
  vector(8) %i0 = 0 to %n {
    %0 = load %x[%i0]
    %1 = cast %0 : f32 to f16
    store %h[%i0], %1
    %2 = cast %0 : f32 to bf16
    store %b[%i0], %2
    %3 = cast %1 : f16 to f32
    store %hx[%i0], %3
    %4 = cast %2 : bf16 to f32
    store %bx[%i0], %4
  }
})", jit);
  ASSERT_NE(fn, nullptr);
  std::vector<float> x = testInputs();
  for (float v : {65504.0f, 65519.0f, 65520.0f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 3e-8f, 1.0009765625f,
                  1.00048828125f, 1.00146484375f, -7e-6f, 1.0039062f, 1.01171875f})
    x.push_back(v);
  for (uint32_t bits = 0; bits < 0xffffffffu - 0x01234567u; bits += 0x01234567u)
    x.push_back(bitsToFloat(bits));
  const size_t n = x.size();
  std::vector<uint16_t> h(n), b(n);
  std::vector<float> hx(n), bx(n);
  void *buffers[] = {x.data(), h.data(), b.data(), hx.data(), bx.data()};
  int64_t params[] = {static_cast<int64_t>(n)};
  fn(buffers, params, 0, 0);
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(::testing::Message() << x[i] << " on " << GetParam());
    const uint16_t wantH = Half(x[i]).bits, wantB = BFloat16(x[i]).bits;
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(float(Half::toFloat(h[i]))));
      EXPECT_TRUE(std::isnan(hx[i]) && std::isnan(bx[i]));
      continue;
    }
    EXPECT_EQ(h[i], wantH);
    EXPECT_EQ(b[i], wantB);
    EXPECT_EQ(floatBits(hx[i]), floatBits(float(Half(x[i]))));
    EXPECT_EQ(floatBits(bx[i]), floatBits(float(BFloat16(x[i]))));
  }
}

// A vector loop runs as a main copy over whole blocks of 4 vectors and a
// masked tail copy for the rest (emit_llvm.cpp): every length, below,
// at and past the block edges, must reduce and store exactly its elements,
// the rows of a parallel loop included (each call runs a slice of them).
TEST_P(CpuCodegen, VectorLoopsOfEveryLengthReduceAndStoreTheirElements) {
  std::unique_ptr<codegen::CpuJit> jit;
  codegen::KernelEntry fn = compileOne(target_, R"(
kernel @rows(%x: f32, %y: f32 out, %stats: f32 out) params(%rows, %n) vars(%max: f32, %sum: f32) {
  parallel %i0 = 0 to %rows {
    %0 = const -inf : f32
    write %max, %0
    vector(16) %i1 = 0 to %n {
      %1 = load %x[%i0 * %n + %i1]
      %2 = read %max
      %3 = max %2, %1 : f32
      write %max, %3
    }
    %4 = const 0.0 : f32
    write %sum, %4
    vector(16) %i2 = 0 to %n {
      %5 = load %x[%i0 * %n + %i2]
      %6 = read %max
      %7 = sub %5, %6 : f32
      %8 = exp %7 : f32
      store %y[%i0 * %n + %i2], %8
      %9 = read %sum
      %10 = add %9, %8 : f32
      write %sum, %10
    }
    %11 = read %max
    store %stats[2 * %i0], %11
    %12 = read %sum
    store %stats[2 * %i0 + 1], %12
  }
})",
                                       jit);
  ASSERT_NE(fn, nullptr);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  const float canary = 12345.0f;
  for (int64_t n :
       {0, 1, 7, 15, 16, 17, 49, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 300, 1000}) {
    const int64_t rows = 3;
    std::vector<float> x(size_t(rows * n));
    for (float &v : x) v = dist(rng);
    std::vector<float> y(size_t(rows * n + 64), canary), stats(size_t(2 * rows + 2), canary);
    void *buffers[] = {x.data(), y.data(), stats.data()};
    int64_t params[] = {rows, n};
    fn(buffers, params, 0, 1); // a parallel call runs a slice of the rows
    fn(buffers, params, 1, rows);
    for (int64_t r = 0; r < rows; ++r) {
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[size_t(r * n + i)]);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double e = std::exp(double(x[size_t(r * n + i)]) - double(mx));
        sum += e;
        ASSERT_NEAR(y[size_t(r * n + i)], e, 1e-6 * e + 1e-30)
            << "n " << n << " row " << r << " element " << i;
      }
      ASSERT_EQ(stats[size_t(2 * r)], mx) << "n " << n << " row " << r;
      ASSERT_NEAR(stats[size_t(2 * r + 1)], sum, 1e-5 * sum) << "n " << n << " row " << r;
    }
    for (size_t i = size_t(rows * n); i < y.size(); ++i)
      ASSERT_EQ(y[i], canary) << "n " << n << ": stored past the end at " << i;
    ASSERT_EQ(stats[size_t(2 * rows)], canary) << "n " << n;
  }
}

// Float to 8/16-bit integer casts (every quantize) saturate like
// fpto[su]i.sat on every level, vectorized or not: NaN gives 0, values
// beyond the type's range its end, the rest truncate toward zero.
TEST_P(CpuCodegen, FloatToNarrowIntegersSaturate) {
  std::unique_ptr<codegen::CpuJit> jit;
  codegen::KernelEntry fn = compileOne(target_, R"(
kernel @narrow(%x: f32, %d: f64, %ou8: u8 out, %oi8: i8 out, %ou16: u16 out, %oi16: i16 out, %du8: u8 out, %di8: i8 out) params(%n) {
  vector(8) %i0 = 0 to %n {
    %0 = load %x[%i0]
    %1 = cast %0 : f32 to u8
    store %ou8[%i0], %1
    %2 = cast %0 : f32 to i8
    store %oi8[%i0], %2
    %3 = cast %0 : f32 to u16
    store %ou16[%i0], %3
    %4 = cast %0 : f32 to i16
    store %oi16[%i0], %4
    %5 = load %d[%i0]
    %6 = cast %5 : f64 to u8
    store %du8[%i0], %6
    %7 = cast %5 : f64 to i8
    store %di8[%i0], %7
  }
})",
                                       jit);
  ASSERT_NE(fn, nullptr);
  std::vector<float> x = testInputs();
  for (float v : {-0.0f,
                  0.5f,
                  -0.5f,
                  -0.99f,
                  126.9f,
                  127.0f,
                  127.5f,
                  -128.0f,
                  -128.9f,
                  -129.0f,
                  254.9f,
                  255.0f,
                  255.5f,
                  256.0f,
                  32767.9f,
                  -32768.5f,
                  65535.5f,
                  65536.0f,
                  1e10f,
                  -1e10f,
                  std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(),
                  std::nanf("")})
    x.push_back(v);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-70000.0f, 70000.0f);
  for (int i = 0; i < 200; ++i) x.push_back(wide(rng));
  const size_t n = x.size();
  std::vector<double> d(x.begin(), x.end());
  std::vector<uint8_t> u8(n), du8(n);
  std::vector<int8_t> i8(n), di8(n);
  std::vector<uint16_t> u16(n);
  std::vector<int16_t> i16(n);
  void *buffers[] = {x.data(),   d.data(),   u8.data(),  i8.data(),
                     u16.data(), i16.data(), du8.data(), di8.data()};
  int64_t params[] = {static_cast<int64_t>(n)};
  fn(buffers, params, 0, 0);
  auto want = [](double v, double lo, double hi) {
    return std::isnan(v) ? 0.0 : std::trunc(std::min(std::max(v, lo), hi));
  };
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(::testing::Message() << x[i] << " on " << GetParam());
    EXPECT_EQ(u8[i], want(x[i], 0, 255));
    EXPECT_EQ(i8[i], want(x[i], -128, 127));
    EXPECT_EQ(u16[i], want(x[i], 0, 65535));
    EXPECT_EQ(i16[i], want(x[i], -32768, 32767));
    EXPECT_EQ(du8[i], want(d[i], 0, 255));
    EXPECT_EQ(di8[i], want(d[i], -128, 127));
  }
}

// Integer division and shifts never trap or give poison (verifier.h), and a
// data-dependent index with a conditional status store works.
TEST_P(CpuCodegen, IntegerEdgeCasesAndDynamicIndices) {
  std::unique_ptr<codegen::CpuJit> jit;
  codegen::KernelEntry fn = compileOne(target_, R"(
kernel @edges(%a: i32, %d: i32, %u: u8, %idx: i64, %q: i32 out, %r: i32 out, %shl: u8 out, %shr: i32 out, %g: i32 out, %status: i64 out) params(%n) {
  for %i0 = 0 to %n {
    %0 = load %a[%i0]
    %1 = load %d[%i0]
    %2 = div %0, %1 : i32
    store %q[%i0], %2
    %3 = mod %0, %1 : i32
    store %r[%i0], %3
    %4 = load %u[%i0]
    %5 = cast %1 : i32 to u8
    %6 = shl %4, %5 : u8
    store %shl[%i0], %6
    %7 = shr %0, %1 : i32
    store %shr[%i0], %7
    %8 = load %idx[%i0]
    %9 = index %n
    %10 = ge %8, %9 : i64
    if %10 {
      %11 = const 7 : i64
      store %status[0], %11
    }
    %12 = const 0 : i64
    %13 = const 1 : i64
    %14 = sub %9, %13 : i64
    %15 = min %8, %14 : i64
    %16 = max %15, %12 : i64
    %17 = load %a[%16]
    store %g[%i0], %17
  }
})", jit);
  ASSERT_NE(fn, nullptr);
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  std::vector<int32_t> a = {7, -7, 7, kMin, 5, -1};
  std::vector<int32_t> d = {2, 2, 0, -1, 40, 31};
  std::vector<uint8_t> u = {1, 3, 255, 9, 1, 128};
  std::vector<int64_t> idx = {5, 0, 3, 6, 2, 1};
  const size_t n = a.size();
  std::vector<int32_t> q(n), r(n), shr(n), g(n);
  std::vector<uint8_t> shl(n);
  int64_t status = 0;
  void *buffers[] = {a.data(), d.data(), u.data(), idx.data(), q.data(), r.data(),
                     shl.data(), shr.data(), g.data(), &status};
  int64_t params[] = {static_cast<int64_t>(n)};
  fn(buffers, params, 0, 0);
  EXPECT_EQ(q, (std::vector<int32_t>{3, -3, 0, kMin, 0, 0}));
  EXPECT_EQ(r, (std::vector<int32_t>{1, -1, 0, 0, 5, -1}));
  EXPECT_EQ(shl, (std::vector<uint8_t>{4, 12, 255, 0, 0, 0}));
  EXPECT_EQ(shr, (std::vector<int32_t>{1, -2, 7, -1, 0, -1}));
  EXPECT_EQ(g, (std::vector<int32_t>{-1, 7, kMin, -1, 7, -7}));
  EXPECT_EQ(status, 7);
}

// A Relu between two roundings to f16 (Cast -> Relu -> Cast, as
// legalize-precision leaves between an f16 model's convs) must stay f32
// work: with a hardware-widened half on both sides, LLVM narrows the f32
// compare and select into <N x half> ones, which x86 without AVX512-FP16
// scalarizes element by element. emit_llvm.cpp widens through a
// placeholder the optimizer cannot see through and lowers it to the
// hardware conversion afterwards (emit_convert.h), so the final IR compares
// floats and still widens with one vector fpext (vcvtph2ps), not integer
// ops. (The compare fails with a plain fpext; the fpext check fails with
// the integer widening.)
TEST(CpuCodegenHalf, RoundedToHalfReluKeepsVectorF32Compares) {
  const std::string text = R"(kernel @relu16(%x: f32, %y: f32 out) params(%n) {
  vector(16) %i0 = 0 to %n {
    %0 = load %x[%i0]
    %1 = cast %0 : f32 to f16
    %2 = cast %1 : f16 to f32
    %3 = const 0.0 : f32
    %4 = lt %2, %3 : f32
    %5 = select %4, %3, %2 : f32
    %6 = cast %5 : f32 to f16
    %7 = cast %6 : f16 to f32
    store %y[%i0], %7
  }
})";
  auto k = parseKernel(text, "test.kir");
  ASSERT_TRUE(k.ok()) << k.error().message;
  auto target = codegen::cpuTargetFromName("x86-64-v4"); // F16C, no AVX512-FP16
  ASSERT_TRUE(target.ok());
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kiln_relu16_" + std::to_string(::getpid()) + ".ll"))
          .string();
  codegen::CompileOptions options;
  options.dumpLlvmIrPath = path;
  auto object = codegen::compileKernels({*k}, *target, options);
  ASSERT_TRUE(object.ok()) << object.error().message;
  std::ifstream in(path);
  std::stringstream ir;
  ir << in.rdbuf();
  std::filesystem::remove(path);
  EXPECT_TRUE(std::regex_search(ir.str(), std::regex("fcmp [a-z]+ <16 x float>"))) << ir.str();
  EXPECT_FALSE(std::regex_search(ir.str(), std::regex("fcmp [a-z]+ <[0-9]+ x half>"))) << ir.str();
  EXPECT_TRUE(std::regex_search(ir.str(), std::regex("fpext <16 x half> .* to <16 x float>")))
      << ir.str();
  EXPECT_EQ(ir.str().find("kiln_half_to_float"), std::string::npos) << ir.str();
}

INSTANTIATE_TEST_SUITE_P(Levels, CpuCodegen, ::testing::ValuesIn(kLevels),
                         [](const auto &info) {
                           std::string s = info.param;
                           for (char &c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

} // namespace
} // namespace kiln
