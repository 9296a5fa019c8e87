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

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

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

INSTANTIATE_TEST_SUITE_P(Levels, CpuCodegen, ::testing::ValuesIn(kLevels),
                         [](const auto &info) {
                           std::string s = info.param;
                           for (char &c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

} // namespace
} // namespace kiln
