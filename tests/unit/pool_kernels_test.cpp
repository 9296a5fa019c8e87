// kernels::maxPool2d / averagePool2d / global pools against plain loops with
// ONNX semantics: kernel 1..5, strides 1..3, dilation 2, asymmetric pads,
// ceil_mode output sizes (windows hanging past the padding),
// count_include_pad, 1-D (H = 1), odd sizes, batch 3, 1 and 2 threads, on
// every row-loop ISA this CPU has; and every ISA against the portable loops
// bit for bit (zeros' signs and NaNs included).
#include "kernel_isas.h"
#include "kernels/pool.h"
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

std::vector<float> randomVector(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

// ONNX's output size; with ceil_mode the last window must start inside the
// input or its leading padding (ONNX Runtime's rule).
int64_t outSize(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil) {
  const int64_t span = in + pb + pe - ((k - 1) * d + 1);
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + pb) --out;
  return out;
}

struct Case {
  int64_t N, C, H, W, kh, kw, sh, sw, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  bool ceil = false;
};

PoolShape toShape(const Case &c) {
  PoolShape s;
  s.N = c.N, s.C = c.C, s.H = c.H, s.W = c.W;
  s.kernelH = c.kh, s.kernelW = c.kw, s.strideH = c.sh, s.strideW = c.sw;
  s.dilationH = c.dh, s.dilationW = c.dw;
  s.padTop = c.pt, s.padLeft = c.pl, s.padBottom = c.pb, s.padRight = c.pr;
  s.outH = outSize(c.H, c.kh, c.sh, c.dh, c.pt, c.pb, c.ceil);
  s.outW = outSize(c.W, c.kw, c.sw, c.dw, c.pl, c.pr, c.ceil);
  return s;
}

std::string describe(const PoolShape &s) {
  char buf[200];
  std::snprintf(
      buf, sizeof buf, "N%ld C%ld %ldx%ld -> %ldx%ld k%ldx%ld s%ldx%ld d%ldx%ld p%ld,%ld,%ld,%ld",
      long(s.N), long(s.C), long(s.H), long(s.W), long(s.outH), long(s.outW), long(s.kernelH),
      long(s.kernelW), long(s.strideH), long(s.strideW), long(s.dilationH), long(s.dilationW),
      long(s.padTop), long(s.padLeft), long(s.padBottom), long(s.padRight));
  return buf;
}

enum class Kind { kMax, kAvg, kAvgIncludePad };

void check(const PoolShape &s, Kind kind, runtime::ThreadPool &pool, GemmIsa isa) {
  ASSERT_TRUE(s.valid()) << describe(s);
  std::mt19937 rng(uint32_t(s.H * 31 + s.W + s.kernelH * 7 + int(kind)));
  auto x = randomVector(size_t(s.N * s.C * s.H * s.W), rng);
  std::vector<float> y(size_t(s.N * s.C * s.outH * s.outW), std::nanf(""));
  if (kind == Kind::kMax)
    maxPool2d(s, x.data(), y.data(), &pool, isa);
  else
    averagePool2d(s, kind == Kind::kAvgIncludePad, x.data(), y.data(), &pool, isa);
  for (int64_t plane = 0; plane < s.N * s.C; ++plane)
    for (int64_t oh = 0; oh < s.outH; ++oh)
      for (int64_t ow = 0; ow < s.outW; ++ow) {
        double best = std::numeric_limits<float>::lowest(), sum = 0;
        int64_t count = 0, padded = 0;
        for (int64_t r = 0; r < s.kernelH; ++r)
          for (int64_t t = 0; t < s.kernelW; ++t) {
            const int64_t ih = oh * s.strideH - s.padTop + r * s.dilationH;
            const int64_t iw = ow * s.strideW - s.padLeft + t * s.dilationW;
            if (ih < s.H + s.padBottom && iw < s.W + s.padRight) ++padded;
            if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
            const double v = x[size_t((plane * s.H + ih) * s.W + iw)];
            best = std::max(best, v);
            sum += v;
            ++count;
          }
        double ref = best;
        if (kind == Kind::kAvg) ref = count ? sum / double(count) : 0.0;
        if (kind == Kind::kAvgIncludePad) ref = padded ? sum / double(padded) : 0.0;
        const double got = y[size_t((plane * s.outH + oh) * s.outW + ow)];
        ASSERT_NEAR(got, ref, 1e-5 + 1e-4 * std::abs(ref))
            << "kind " << int(kind) << " isa " << gemmIsaName(isa) << " threads=" << pool.threads()
            << " " << describe(s) << " at plane " << plane << " (" << oh << "," << ow << ")";
      }
}

std::vector<Case> cases() {
  return {
      {1, 3, 8, 8, 2, 2, 2, 2},                           // 2x2 s2
      {3, 5, 13, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},        // 3x3 s2 p1, batch 3
      {1, 4, 20, 20, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},       // SPPF 5x5 s1 p2
      {1, 2, 13, 13, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true}, // ceil_mode
      {1, 2, 12, 11, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true}, // ceil_mode + pads
      {1, 2, 14, 15, 2, 2, 3, 3, 1, 1, 0, 0, 0, 0, true}, // stride > kernel, ceil
      {1, 3, 11, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},       // dilation 2
      {1, 2, 9, 10, 3, 2, 1, 2, 1, 1, 0, 1, 2, 0},        // asymmetric pads
      {2, 3, 1, 31, 1, 3, 1, 2, 1, 1, 0, 1, 0, 1},        // 1-D
      {1, 1, 1, 1, 1, 1, 1, 1},                           // 1x1
      {1, 2, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},        // wide rows
      {1, 1, 5, 5, 5, 5, 1, 1, 1, 1, 4, 4, 4, 4},         // windows fully in padding
      {1, 2, 10, 10, 4, 4, 3, 3, 2, 1, 1, 2, 3, 1, true}, // everything at once
      {1, 2, 9, 75, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true},  // 3x3 s2 ceil, 37 outputs a row
      {1, 2, 5, 70, 2, 4, 1, 2, 1, 2, 0, 1, 0, 2},        // stride 2, dilation 2, 35 outputs
      {1, 2, 6, 53, 3, 5, 1, 1, 1, 1, 1, 2, 1, 2},        // stride 1, 53 outputs
  };
}

class PoolKernelTest : public ::testing::TestWithParam<IsaAndThreads> {};

TEST_P(PoolKernelTest, MaxMatchesReference) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  for (const Case &c : cases()) {
    check(toShape(c), Kind::kMax, pool, isa);
    if (HasFatalFailure()) return;
  }
}

TEST_P(PoolKernelTest, AverageMatchesReference) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  for (const Case &c : cases())
    for (Kind kind : {Kind::kAvg, Kind::kAvgIncludePad}) {
      check(toShape(c), kind, pool, isa);
      if (HasFatalFailure()) return;
    }
}

TEST_P(PoolKernelTest, LargePlanesSplitAcrossThreads) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  for (Kind kind : {Kind::kMax, Kind::kAvg}) {
    check(toShape({1, 1, 160, 160, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}), kind, pool, isa);
    check(toShape({2, 64, 40, 40, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}), kind, pool, isa);
    if (HasFatalFailure()) return;
  }
}

TEST_P(PoolKernelTest, GlobalPoolsMatchReference) {
  runtime::ThreadPool pool(std::get<1>(GetParam()));
  std::mt19937 rng(5);
  for (auto [N, C, spatial] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                               {2, 3, 17},
                               {1, 96, 40 * 40},
                               {3, 5, 7 * 13},
                               {1, 480, 1}}) {
    auto x = randomVector(size_t(N * C * spatial), rng);
    std::vector<float> avg(size_t(N * C)), mx(size_t(N * C));
    globalAveragePool(N, C, spatial, x.data(), avg.data(), &pool);
    globalMaxPool(N, C, spatial, x.data(), mx.data(), &pool);
    for (int64_t p = 0; p < N * C; ++p) {
      double sum = 0, best = std::numeric_limits<float>::lowest();
      for (int64_t i = 0; i < spatial; ++i) {
        sum += x[size_t(p * spatial + i)];
        best = std::max(best, double(x[size_t(p * spatial + i)]));
      }
      ASSERT_NEAR(avg[size_t(p)], sum / double(spatial), 1e-5 + 1e-4 * std::abs(sum / spatial));
      ASSERT_EQ(mx[size_t(p)], float(best));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsasAndThreads, PoolKernelTest, isasAndThreads(), isaAndThreadsName);

TEST(PoolKernel, MaxPropagatesNaN) {
  PoolShape s;
  s.H = 1, s.W = 4, s.outH = 1, s.outW = 2, s.kernelW = 2, s.strideW = 2;
  const float x[4] = {1.0f, std::nanf(""), 3.0f, 2.0f};
  for (GemmIsa isa : supportedIsas()) {
    float y[2];
    maxPool2d(s, x, y, nullptr, isa);
    EXPECT_TRUE(std::isnan(y[0])) << gemmIsaName(isa);
    EXPECT_EQ(y[1], 3.0f) << gemmIsaName(isa);
  }
}

// The vector row loops reduce each output in the portable loops' order, so
// every ISA gives the same bits: NaNs in either the accumulated or the new
// operand win (in the vertical and the horizontal pass), +0 and -0 keep the
// portable choice, sums round alike.
TEST(PoolKernel, EveryIsaGivesThePortableBits) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pick(0, 9);
  for (const Case &c :
       {Case{1, 3, 9, 75, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true},
        Case{1, 2, 7, 41, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, Case{2, 2, 8, 66, 2, 2, 2, 2}}) {
    const PoolShape s = toShape(c);
    std::vector<float> x = randomVector(size_t(s.N * s.C * s.H * s.W), rng);
    for (float &v : x) { // ties of zeros of both signs, and a few NaNs
      const int k = pick(rng);
      if (k == 0) v = 0.0f;
      if (k == 1) v = -0.0f;
      if (k == 2 && pick(rng) < 2) v = std::nanf("");
    }
    const size_t outs = size_t(s.N * s.C * s.outH * s.outW);
    for (Kind kind : {Kind::kMax, Kind::kAvg}) {
      std::vector<float> want(outs), got(outs);
      auto run = [&](GemmIsa isa, std::vector<float> &y) {
        if (kind == Kind::kMax)
          maxPool2d(s, x.data(), y.data(), nullptr, isa);
        else
          averagePool2d(s, false, x.data(), y.data(), nullptr, isa);
      };
      run(GemmIsa::kPortable, want);
      for (GemmIsa isa : supportedIsas()) {
        run(isa, got);
        for (size_t i = 0; i < outs; ++i) {
          uint32_t a, b;
          std::memcpy(&a, &want[i], 4);
          std::memcpy(&b, &got[i], 4);
          const bool bothNaN = std::isnan(want[i]) && std::isnan(got[i]);
          ASSERT_TRUE(bothNaN || a == b)
              << gemmIsaName(isa) << " kind " << int(kind) << " " << describe(s) << " at " << i
              << ": " << got[i] << " vs portable " << want[i];
        }
      }
    }
  }
}

} // namespace
} // namespace kiln::kernels
