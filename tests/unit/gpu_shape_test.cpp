// GPU shaping of Kernel IR (codegen/gpu): which loops a grid plan may split
// and when a launch's sizes let it (grid_plan.h), the row-pass to
// one-element-per-invocation rewrite (row_to_element.h), and -- on a Vulkan
// device, lavapipe in CI -- the rewritten, split kernels against the
// lowered ones run by the CPU JIT on the same random inputs.
#include "codegen/gpu/grid_plan.h"
#include "codegen/gpu/row_to_element.h"
#include "codegen/vulkan/emit_glsl.h"
#include "codegen/vulkan/loop_count.h"
#include "codegen/vulkan/spirv.h"
#include "cpu_jit_run.h"
#include "kernel/parser.h"
#include "kernel/printer.h"
#include "kernel/verifier.h"
#include "runtime/vulkan/vulkan_device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace kiln {
namespace {

using codegen::gpu::chooseGrid;
using codegen::gpu::planGrid;

kir::Kernel parse(const char *text) {
  auto k = parseKernel(text, "test");
  EXPECT_TRUE(k.ok()) << k.error().message;
  return k.ok() ? *k : kir::Kernel{};
}

constexpr int64_t kMany = int64_t(1) << 40;

// Concat of two rows: two sibling loops, independent when the second half
// starts at or past the end of the first.
constexpr const char *kConcat = R"(
kernel @concat(%a: f32, %b: f32, %y: f32 out) params(%n, %stride, %off) {
  parallel %i0 = 0 to 3 {
    vector(8) %i1 = 0 to %n {
      %0 = load %a[%i0 * %n + %i1]
      store %y[%i0 * %stride + %i1], %0
    }
    vector(8) %i2 = 0 to %n {
      %1 = load %b[%i0 * %n + %i2]
      store %y[%i0 * %stride + %off + %i2], %1
    }
  }
}
)";

TEST(GridPlan, SiblingLoopsSplitWhenTheirElementsAreDisjoint) {
  const kir::Kernel k = parse(kConcat);
  const codegen::gpu::GridPlan plan = planGrid(k);
  ASSERT_EQ(plan.levels.size(), 1u);
  EXPECT_EQ(plan.levels[0].loops.size(), 2u);
  const codegen::gpu::GridLaunch g = chooseGrid(plan, {5, 10, 5}, 3, kMany);
  EXPECT_EQ(g.depth, 1);
  EXPECT_EQ(g.invocations, 15);
  // The halves overlap (element 2 is the first half's 2 and the second's
  // 0: its serial result is the second's): not split.
  EXPECT_EQ(chooseGrid(plan, {5, 10, 2}, 3, kMany).depth, 0);
  // Too many invocations: not split either.
  EXPECT_EQ(chooseGrid(plan, {5, 10, 5}, 3, 14).depth, 0);
  // What an invocation loops over shrinks with the split.
  EXPECT_EQ(codegen::loopIterationsPerInvocation(k, {5, 10, 5}, plan, 0), 10);
  EXPECT_EQ(codegen::loopIterationsPerInvocation(k, {5, 10, 5}, plan, 1), 2);
}

TEST(GridPlan, AReductionIntoOneElementIsNotSplit) {
  const kir::Kernel k = parse(R"(
kernel @rowsum(%x: f32, %y: f32 out) params(%m) {
  parallel %i0 = 0 to 4 {
    for %i1 = 0 to %m {
      %0 = load %y[%i0]
      %1 = load %x[%i0 * %m + %i1]
      %2 = add %0, %1 : f32
      store %y[%i0], %2
    }
  }
}
)");
  const codegen::gpu::GridPlan plan = planGrid(k);
  ASSERT_EQ(plan.levels.size(), 1u);                   // statically affine...
  EXPECT_EQ(chooseGrid(plan, {7}, 4, kMany).depth, 0); // ...but every iteration hits %y[%i0]
  EXPECT_EQ(chooseGrid(plan, {1}, 4, kMany).depth, 1); // one iteration: nothing to race
}

TEST(GridPlan, ALoopWhoseVariableCarriesAcrossIterationsIsNotALevel) {
  const kir::Kernel k = parse(R"(
kernel @prefix(%x: f32, %y: f32 out) params(%m) vars(%acc: f32) {
  parallel %i0 = 0 to 4 {
    %0 = const 0.0 : f32
    write %acc, %0
    for %i1 = 0 to %m {
      %1 = read %acc
      %2 = load %x[%i0 * %m + %i1]
      %3 = add %1, %2 : f32
      write %acc, %3
      store %y[%i0 * %m + %i1], %3
    }
  }
}
)");
  EXPECT_TRUE(planGrid(k).levels.empty());
}

// The CPU's row-pass form of y = relu(x @ w + bias) (lower/matmul_ops.cpp):
// initialize the row, accumulate one k at a time, epilogue.
constexpr const char *kMatMulRows = R"(
kernel @mm(%x: f32, %w: f32, %bias: f32, %y: f32 out) params(%k, %n) {
  parallel %i0 = 0 to 5 {
    %0 = index %i0 * %n
    vector(8) %i1 = 0 to %n {
      %1 = load %bias[%i1]
      store %y[%i1 + %0], %1
    }
    for %i2 = 0 to %k {
      %2 = load %x[%i0 * %k + %i2]
      vector(8) %i3 = 0 to %n {
        %3 = load %y[%i3 + %0]
        %4 = load %w[%i2 * %n + %i3]
        %5 = mul %2, %4 : f32
        %6 = add %3, %5 : f32
        store %y[%i3 + %0], %6
      }
    }
    vector(8) %i4 = 0 to %n {
      %7 = load %y[%i4 + %0]
      %8 = const 0.0 : f32
      %9 = max %7, %8 : f32
      store %y[%i4 + %0], %9
    }
  }
}
)";

// A 1-D convolution row the way the CPU's conv lowering writes it: the
// interior and the two padded borders as segments of the row.
constexpr const char *kConvRowSegments = R"(
kernel @conv(%x: f32, %w: f32, %y: f32 out) params(%len, %left, %mid, %rightAt, %right) {
  parallel %i0 = 0 to 2 {
    %0 = index %i0 * %len
    vector(8) %i1 = 0 to %len {
      %1 = const 0.5 : f32
      store %y[%i1 + %0], %1
    }
    for %i2 = 0 to 3 {
      %2 = load %w[%i0 * 3 + %i2]
      for %i3 = 0 to %left {
        %3 = load %y[%i3 + %0]
        %4 = index %i3 + %i2 + -1
        %5 = const 0 : i64
        %6 = max %4, %5 : i64
        %7 = load %x[%6]
        %8 = mul %2, %7 : f32
        %9 = add %3, %8 : f32
        store %y[%i3 + %0], %9
      }
      vector(8) %i4 = 0 to %mid {
        %10 = load %y[%left + %i4 + %0]
        %11 = load %x[%left + %i4 + %i2 + -1]
        %12 = mul %2, %11 : f32
        %13 = add %10, %12 : f32
        store %y[%left + %i4 + %0], %13
      }
      for %i5 = 0 to %right {
        %14 = load %y[%rightAt + %i5 + %0]
        %15 = index %rightAt + %i5 + %i2 + -1
        %16 = index %len + -1
        %17 = min %15, %16 : i64
        %18 = load %x[%17]
        %19 = mul %2, %18 : f32
        %20 = add %14, %19 : f32
        store %y[%rightAt + %i5 + %0], %20
      }
    }
  }
}
)";

TEST(RowToElement, RowPassesBecomeOneElementLoopWithARegisterAccumulator) {
  auto shaped = codegen::gpu::rowPassesToElements(parse(kMatMulRows));
  ASSERT_TRUE(shaped);
  ASSERT_TRUE(verifyKernel(shaped->kernel).ok()) << verifyKernel(shaped->kernel).error().message;
  EXPECT_TRUE(shaped->segments.empty());
  const std::string text = printKernel(shaped->kernel);
  // One element loop around the reduction; %y stored once per element.
  EXPECT_NE(text.find("vars(%elem_y: f32)"), std::string::npos) << text;
  size_t stores = 0;
  for (size_t at = text.find("store %y"); at != std::string::npos;
       at = text.find("store %y", at + 1))
    ++stores;
  EXPECT_EQ(stores, 1u) << text;
  // ...and the element loop is a grid level.
  const codegen::gpu::GridPlan plan = planGrid(shaped->kernel);
  ASSERT_EQ(plan.levels.size(), 1u);
  EXPECT_EQ(chooseGrid(plan, {7, 6}, 5, kMany).depth, 1);
}

TEST(RowToElement, BorderSegmentsAreGuardedAndCheckedPerLaunch) {
  auto shaped = codegen::gpu::rowPassesToElements(parse(kConvRowSegments));
  ASSERT_TRUE(shaped);
  ASSERT_TRUE(verifyKernel(shaped->kernel).ok()) << verifyKernel(shaped->kernel).error().message;
  EXPECT_EQ(shaped->segments.size(), 3u);
  EXPECT_TRUE(codegen::gpu::fitsLaunch(*shaped, {9, 1, 7, 8, 1}));
  EXPECT_FALSE(codegen::gpu::fitsLaunch(*shaped, {9, 1, 7, 8, 2})); // right border past the row
}

TEST(RowToElement, RefusedForALaunchWhereOneElementReadsAnothers) {
  // The accumulation reads %y one element on: elements depend on each
  // other, so the shaped kernel must not run (the lowered one does).
  std::string text = kMatMulRows;
  text.replace(text.find("%3 = load %y[%i3 + %0]"), 22, "%3 = load %y[%i3 + 1 + %0]");
  auto shaped = codegen::gpu::rowPassesToElements(parse(text.c_str()));
  ASSERT_TRUE(shaped);
  EXPECT_FALSE(codegen::gpu::fitsLaunch(*shaped, {7, 6}));
  EXPECT_TRUE(codegen::gpu::fitsLaunch(*shaped, {7, 1})); // one element: nothing to race
}

// Softmax over axis 1 of [1, 3, n] (yolov8's DFL head, lower/): running max
// and sum per column in scratch rows, the output written at 3 rows per
// column -- a buffer that stays in memory, its columns disjoint because
// n * k + r takes each element once (r < n).
constexpr const char *kSoftmaxColumns = R"(
kernel @softmax(%x: f32, %y: f32 out, %m: f32 out, %s: f32 out) params(%n) {
  parallel %i0 = 0 to 1 {
    vector(8) %i1 = 0 to %n {
      %0 = const -inf : f32
      store %m[%i1], %0
      %1 = const 0.0 : f32
      store %s[%i1], %1
    }
    for %i2 = 0 to 3 {
      vector(8) %i3 = 0 to %n {
        %2 = load %x[%i2 * %n + %i3]
        %3 = load %m[%i3]
        %4 = max %3, %2 : f32
        store %m[%i3], %4
      }
    }
    for %i4 = 0 to 3 {
      vector(8) %i5 = 0 to %n {
        %5 = load %m[%i5]
        %6 = load %x[%i4 * %n + %i5]
        %7 = sub %6, %5 : f32
        %8 = exp %7 : f32
        %9 = load %s[%i5]
        %10 = add %9, %8 : f32
        store %s[%i5], %10
      }
    }
    for %i6 = 0 to 3 {
      vector(8) %i7 = 0 to %n {
        %11 = load %s[%i7]
        %12 = load %m[%i7]
        %13 = load %x[%i6 * %n + %i7]
        %14 = sub %13, %12 : f32
        %15 = exp %14 : f32
        %16 = div %15, %11 : f32
        store %y[%i6 * %n + %i7], %16
      }
    }
  }
}
)";

TEST(RowToElement, ABufferWrittenAcrossReductionStepsStaysInMemory) {
  auto shaped = codegen::gpu::rowPassesToElements(parse(kSoftmaxColumns));
  ASSERT_TRUE(shaped);
  const std::string text = printKernel(shaped->kernel);
  EXPECT_NE(text.find("vars(%elem_m: f32, %elem_s: f32)"), std::string::npos) << text;
  EXPECT_TRUE(codegen::gpu::fitsLaunch(*shaped, {11}));
}

// ---- on a Vulkan device ------------------------------------------------------------

class GpuShapeDeviceTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    auto d = vulkan::Device::open();
    if (d.ok()) device_ = std::move(*d);
  }
  static void TearDownTestSuite() { device_.reset(); }
  void SetUp() override {
    if (!device_) GTEST_SKIP() << "no Vulkan device";
  }

  // The lowered kernel on the CPU JIT; the shaped one on the device, split
  // as chooseGrid picks. Float buffers; returns each run's buffers.
  void compare(const kir::Kernel &lowered, const kir::Kernel &shaped,
               std::vector<std::vector<float>> buffers, const std::vector<int64_t> &params,
               int64_t extent, int expectDepth) {
    std::vector<std::vector<float>> cpu = buffers;
    std::vector<void *> ptrs;
    for (auto &b : cpu) ptrs.push_back(b.data());
    Status ran = runOnCpuJit(lowered, ptrs, params, 0, extent);
    ASSERT_TRUE(ran.ok()) << ran.error().message;

    const codegen::gpu::GridPlan plan = planGrid(shaped);
    const codegen::gpu::GridLaunch g = chooseGrid(plan, params, extent, kMany);
    EXPECT_EQ(g.depth, expectDepth);
    auto glsl = codegen::emitGlsl(shaped, plan);
    ASSERT_TRUE(glsl.ok()) << glsl.error().message;
    auto spirv = codegen::compileGlslCompute(*glsl);
    ASSERT_TRUE(spirv.ok()) << spirv.error().message;
    auto kernel = device_->createKernel(*spirv, int(buffers.size()));
    ASSERT_TRUE(kernel.ok()) << kernel.error().message;
    std::vector<std::shared_ptr<vulkan::Buffer>> owned;
    for (auto &b : buffers) {
      auto buf = device_->allocate(b.size() * sizeof(float));
      ASSERT_TRUE(buf.ok());
      std::memcpy((*buf)->data(), b.data(), b.size() * sizeof(float));
      owned.push_back(std::move(*buf));
    }
    std::vector<int64_t> words = params;
    words.push_back(0);
    words.push_back(extent);
    words.push_back(g.depth);
    words.insert(words.end(), g.sizes.begin(), g.sizes.end());
    words.resize(params.size() + 3 + plan.levels.size(), 1);
    ASSERT_TRUE(device_->dispatch(**kernel, owned, words, g.invocations).ok());
    for (size_t b = 0; b < buffers.size(); ++b) {
      const auto *got = static_cast<const float *>(owned[b]->data());
      for (size_t e = 0; e < buffers[b].size(); ++e)
        ASSERT_NEAR(got[e], cpu[b][e], 1e-5f * (1 + std::fabs(cpu[b][e])))
            << "buffer " << b << " element " << e;
    }
  }

  static std::vector<float> random(size_t n, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> v(n);
    for (float &x : v) x = u(rng);
    return v;
  }

  static std::unique_ptr<vulkan::Device> device_;
};
std::unique_ptr<vulkan::Device> GpuShapeDeviceTest::device_;

TEST_F(GpuShapeDeviceTest, ShapedMatMulMatchesTheLoweredKernel) {
  std::mt19937 rng(std::random_device{}());
  const kir::Kernel lowered = parse(kMatMulRows);
  auto shaped = codegen::gpu::rowPassesToElements(lowered);
  ASSERT_TRUE(shaped);
  const int64_t k = 37, n = 19;
  compare(lowered, shaped->kernel,
          {random(5 * k, rng), random(k * n, rng), random(n, rng), random(5 * n, rng)}, {k, n}, 5,
          1);
}

TEST_F(GpuShapeDeviceTest, ShapedConvRowWithBordersMatchesTheLoweredKernel) {
  std::mt19937 rng(std::random_device{}());
  const kir::Kernel lowered = parse(kConvRowSegments);
  auto shaped = codegen::gpu::rowPassesToElements(lowered);
  ASSERT_TRUE(shaped);
  const int64_t len = 23;
  const std::vector<int64_t> params{len, 1, len - 2, len - 1, 1};
  ASSERT_TRUE(codegen::gpu::fitsLaunch(*shaped, params));
  compare(lowered, shaped->kernel, {random(len, rng), random(6, rng), random(2 * len, rng)}, params,
          2, 1);
}

TEST_F(GpuShapeDeviceTest, ShapedColumnSoftmaxMatchesTheLoweredKernel) {
  std::mt19937 rng(std::random_device{}());
  const kir::Kernel lowered = parse(kSoftmaxColumns);
  auto shaped = codegen::gpu::rowPassesToElements(lowered);
  ASSERT_TRUE(shaped);
  const int64_t n = 29;
  compare(lowered, shaped->kernel,
          {random(3 * n, rng), random(3 * n, rng), random(n, rng), random(n, rng)}, {n}, 1, 1);
}

TEST_F(GpuShapeDeviceTest, SplitSiblingLoopsMatchTheCpu) {
  std::mt19937 rng(std::random_device{}());
  const kir::Kernel k = parse(kConcat);
  compare(k, k, {random(15, rng), random(15, rng), random(30, rng)}, {5, 10, 5}, 3, 1);
  // Overlapping halves run unsplit, still right.
  compare(k, k, {random(15, rng), random(15, rng), random(30, rng)}, {5, 10, 2}, 3, 0);
}

} // namespace
} // namespace kiln
