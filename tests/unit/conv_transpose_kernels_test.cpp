// kernels::PackedConvTranspose against a plain float64 scatter loop: the
// exact-cover path (kernel == stride: 2x2 s2 as in PP-OCR's det head, 1x1,
// 3x1), overlapping taps (3x3 s1, 4x4 s2 p1, 3x3 s2 with output_padding),
// gaps (stride > kernel), dilation, groups (and one input channel per
// group), asymmetric and negative padding (an output_shape larger than the
// full result), a 1-D op laid along H, batch 3, wide and tall inputs that
// split into many row blocks, on every ISA this CPU supports, with 1 and 2
// threads.
#include "kernel_isas.h"
#include "kernels/conv_transpose.h"
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
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

std::string describe(const ConvTransposeShape &s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "N%ld C%ld H%ld W%ld K%ld R%ld S%ld stride%ldx%ld dil%ldx%ld pad%ld,%ld out%ldx%ld "
                "g%ld",
                long(s.N), long(s.C), long(s.H), long(s.W), long(s.K), long(s.R), long(s.S),
                long(s.strideH), long(s.strideW), long(s.dilationH), long(s.dilationW),
                long(s.padTop), long(s.padLeft), long(s.outH), long(s.outW), long(s.groups));
  return buf;
}

// y[n, g*Kg + m, ih*sh + r*dh - padTop, iw*sw + s*dw - padLeft] +=
//   x[n, g*Cg + c, ih, iw] * w[g*Cg + c, m, r, s]
std::vector<double> reference(const ConvTransposeShape &s, const std::vector<float> &x,
                              const std::vector<float> &w, const std::vector<float> &bias) {
  const int64_t Cg = s.C / s.groups, Kg = s.K / s.groups, outHW = s.outH * s.outW;
  std::vector<double> y(size_t(s.N * s.K * outHW), 0.0);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t o = 0; o < outHW; ++o)
        y[size_t((n * s.K + k) * outHW + o)] = bias.empty() ? 0.0 : bias[size_t(k)];
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t c = 0; c < s.C; ++c) {
      const int64_t g = c / Cg;
      for (int64_t ih = 0; ih < s.H; ++ih)
        for (int64_t iw = 0; iw < s.W; ++iw) {
          const double xv = x[size_t(((n * s.C + c) * s.H + ih) * s.W + iw)];
          for (int64_t m = 0; m < Kg; ++m)
            for (int64_t r = 0; r < s.R; ++r)
              for (int64_t t = 0; t < s.S; ++t) {
                const int64_t oh = ih * s.strideH + r * s.dilationH - s.padTop;
                const int64_t ow = iw * s.strideW + t * s.dilationW - s.padLeft;
                if (oh < 0 || oh >= s.outH || ow < 0 || ow >= s.outW) continue;
                const double wv = w[size_t(((c * Kg + m) * s.R + r) * s.S + t)];
                y[size_t((n * s.K + g * Kg + m) * outHW + oh * s.outW + ow)] += xv * wv;
              }
        }
    }
  return y;
}

void check(const ConvTransposeShape &s, bool withBias, GemmIsa isa, runtime::ThreadPool &pool) {
  ASSERT_TRUE(s.valid()) << describe(s);
  std::mt19937 rng(uint32_t(s.C * 131 + s.K * 7 + s.H * 3 + s.W));
  const std::vector<float> x = randomVector(size_t(s.N * s.C * s.H * s.W), rng);
  const std::vector<float> w = randomVector(size_t(s.C * (s.K / s.groups) * s.R * s.S), rng);
  const std::vector<float> bias = withBias ? randomVector(size_t(s.K), rng) : std::vector<float>();
  PackedConvTranspose ct =
      PackedConvTranspose::pack(s, w.data(), withBias ? bias.data() : nullptr, isa);
  // NaN-filled: every element must be written (exact cover writes, the
  // others fill first).
  std::vector<float> y(size_t(s.N * s.K * s.outH * s.outW), std::nanf(""));
  ct.run(s, x.data(), y.data(), &pool);
  const std::vector<double> ref = reference(s, x, w, bias);
  const double depth = double(s.C / s.groups * s.R * s.S);
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y[i], ref[i], 1e-5 * depth + 1e-5 * std::abs(ref[i]))
        << gemmIsaName(isa) << " threads=" << pool.threads() << " " << describe(s)
        << " bias=" << withBias << " at " << i;
}

// Output size from ONNX's formula with symmetric pads.
ConvTransposeShape shape(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R,
                         int64_t S, int64_t stride, int64_t pad = 0, int64_t groups = 1,
                         int64_t dilation = 1, int64_t outputPadding = 0) {
  ConvTransposeShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S;
  s.strideH = s.strideW = stride;
  s.dilationH = s.dilationW = dilation;
  s.padTop = s.padLeft = pad;
  s.groups = groups;
  s.outH = ConvTransposeShape::outSize(H, R, stride, dilation, pad, pad, outputPadding);
  s.outW = ConvTransposeShape::outSize(W, S, stride, dilation, pad, pad, outputPadding);
  return s;
}

std::vector<ConvTransposeShape> shapes() {
  std::vector<ConvTransposeShape> v = {
      shape(1, 24, 13, 17, 24, 2, 2, 2),         // det head: 2x2 s2, exact cover
      shape(1, 24, 9, 10, 1, 2, 2, 2),           // det head's last layer: K = 1
      shape(3, 5, 6, 7, 6, 2, 2, 2),             // batch 3
      shape(1, 6, 5, 5, 7, 1, 1, 1),             // 1x1 s1: a plain GEMM
      shape(1, 8, 7, 9, 4, 3, 3, 1, 1),          // 3x3 s1 p1: heavy overlap
      shape(1, 8, 8, 9, 6, 4, 4, 2, 1),          // 4x4 s2 p1: the GAN upsampler
      shape(2, 6, 5, 7, 5, 3, 3, 2, 1, 1, 1, 1), // 3x3 s2 p1 output_padding 1
      shape(1, 4, 6, 5, 3, 2, 2, 3),             // stride > kernel: gaps
      shape(1, 4, 7, 6, 5, 3, 3, 1, 0, 1, 2),    // dilation 2
      shape(1, 8, 6, 6, 10, 2, 2, 2, 0, 2),      // groups 2, exact cover
      shape(1, 8, 6, 7, 6, 3, 3, 2, 1, 2),       // groups 2, overlap
      shape(1, 6, 5, 6, 6, 3, 3, 2, 1, 6),       // one channel per group
      shape(1, 3, 4, 4, 4, 5, 5, 1, 2),          // kernel larger than the input
      shape(1, 16, 40, 50, 16, 2, 2, 2),         // many row blocks, exact
      shape(1, 16, 37, 41, 8, 3, 3, 1, 1),       // many row blocks, two phases
      shape(1, 32, 20, 300, 8, 4, 4, 2, 1),      // wide rows: one-row blocks
  };
  // Asymmetric strides, kernels and pads; exact cover along W only.
  ConvTransposeShape rect = shape(1, 5, 6, 7, 4, 3, 2, 1);
  rect.strideH = 2, rect.strideW = 2, rect.padTop = 1;
  rect.outH = ConvTransposeShape::outSize(6, 3, 2, 1, 1, 0, 0);
  rect.outW = ConvTransposeShape::outSize(7, 2, 2, 1, 0, 0, 0);
  v.push_back(rect);
  // Negative padding: output_shape asks for more than the full result.
  ConvTransposeShape wide = shape(1, 4, 5, 5, 3, 3, 3, 2);
  wide.padTop = -1, wide.padLeft = -2, wide.outH += 2, wide.outW += 3;
  v.push_back(wide);
  // 1-D along H: a 1-D op maps its sequence there.
  ConvTransposeShape oneDExact = shape(2, 6, 50, 1, 4, 4, 1, 4);
  oneDExact.strideW = 1;
  v.push_back(oneDExact);
  ConvTransposeShape oneD = shape(1, 6, 61, 1, 5, 5, 1, 2, 0);
  oneD.strideW = 1, oneD.padTop = 2;
  oneD.outH = ConvTransposeShape::outSize(61, 5, 2, 1, 2, 2, 1);
  v.push_back(oneD);
  return v;
}

class ConvTransposeKernelTest : public ::testing::TestWithParam<IsaAndThreads> {};

TEST_P(ConvTransposeKernelTest, MatchesFloat64Reference) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  int variant = 0;
  for (const ConvTransposeShape &s : shapes()) {
    check(s, variant++ % 3 != 2, isa, pool);
    if (HasFatalFailure()) return;
  }
}

TEST_P(ConvTransposeKernelTest, OnePackServesEveryInputSize) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  for (int64_t h : {1, 2, 9, 33})
    for (int64_t w : {1, 5, 64}) {
      check(shape(1, 12, h, w, 12, 2, 2, 2), true, isa, pool);
      check(shape(1, 12, h, w, 6, 3, 3, 2, 1, 1, 1, 1), false, isa, pool);
      if (HasFatalFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(IsasAndThreads, ConvTransposeKernelTest, isasAndThreads(),
                         isaAndThreadsName);

} // namespace
} // namespace kiln::kernels
