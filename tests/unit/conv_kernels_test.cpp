// kernels::PackedConv against a plain float64 loop: 1x1, 3x3, 5x5, 7x7, strides
// 1/2/3, asymmetric pads, dilations 2-36 (dead taps), groups 1/2/C
// (depthwise, with a channel multiplier too), odd sizes, batch 1 and 3, Conv1d, every epilogue
// kind, explicit and thread-local workspaces, on every ISA this CPU supports, with 1 and 2 threads.
#include "kernel_isas.h"
#include "kernels/conv.h"
#include "kernels/conv_taps.h"
#include "kernels/conv_winograd.h"
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
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

double refOp(const EpilogueOp &op, double v, int64_t row, int64_t col, int64_t imageOffset) {
  auto hardSigmoid = [&](double x) { return std::max(0.0, std::min(1.0, op.a * x + op.b)); };
  switch (op.kind) {
  case EpilogueKind::kAddRowBias:
    return v + op.data[row];
  case EpilogueKind::kAddColBias:
    return v + op.data[col];
  case EpilogueKind::kMulRowScale:
    return v * op.data[row];
  case EpilogueKind::kMulColScale:
    return v * op.data[col];
  case EpilogueKind::kAddTensor:
    return v + op.data[imageOffset + row * op.ld + col];
  case EpilogueKind::kRelu:
    return std::max(v, 0.0);
  case EpilogueKind::kClip:
    return std::min(std::max(v, double(op.a)), double(op.b));
  case EpilogueKind::kLeakyRelu:
    return v < 0 ? v * op.a : v;
  case EpilogueKind::kSigmoid:
    return 1.0 / (1.0 + std::exp(-v));
  case EpilogueKind::kSilu:
    return v / (1.0 + std::exp(-v));
  case EpilogueKind::kHardSigmoid:
    return hardSigmoid(v);
  case EpilogueKind::kHardSwish:
    return v * hardSigmoid(v);
  case EpilogueKind::kTanh:
    return std::tanh(v);
  case EpilogueKind::kGelu:
    return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  case EpilogueKind::kGeluTanh:
    return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  return v;
}

std::string describe(const ConvShape &s) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "N%ld C%ld H%ld W%ld K%ld R%ld S%ld stride%ldx%ld dil%ldx%ld pad%ld,%ld,%ld,%ld g%ld",
      long(s.N), long(s.C), long(s.H), long(s.W), long(s.K), long(s.R), long(s.S), long(s.strideH),
      long(s.strideW), long(s.dilationH), long(s.dilationW), long(s.padTop), long(s.padLeft),
      long(s.padBottom), long(s.padRight), long(s.groups));
  return buf;
}

// The epilogue kinds, one per case in turn; data-carrying ops get their data.
struct EpilogueData {
  std::vector<float> perChannel, perPixel, residual;
};

Epilogue makeEpilogue(int variant, const EpilogueData &d, int64_t P) {
  Epilogue ep;
  auto op = [](EpilogueKind k, float a = 0, float b = 0, const float *data = nullptr,
               int64_t ld = 0) {
    return EpilogueOp{k, a, b, data, ld};
  };
  switch (variant % 14) {
  case 0:
    break;
  case 1:
    ep.push(op(EpilogueKind::kRelu));
    break;
  case 2:
    ep.push(op(EpilogueKind::kSilu));
    break;
  case 3:
    ep.push(op(EpilogueKind::kHardSwish, 1.0f / 6, 0.5f));
    ep.push(op(EpilogueKind::kAddTensor, 0, 0, d.residual.data(), P));
    break;
  case 4:
    ep.push(op(EpilogueKind::kClip, 0.0f, 6.0f));
    break;
  case 5:
    ep.push(op(EpilogueKind::kLeakyRelu, 0.1f));
    break;
  case 6:
    ep.push(op(EpilogueKind::kSigmoid));
    break;
  case 7:
    ep.push(op(EpilogueKind::kTanh));
    break;
  case 8:
    ep.push(op(EpilogueKind::kHardSigmoid, 0.2f, 0.5f));
    break;
  case 9:
    ep.push(op(EpilogueKind::kMulRowScale, 0, 0, d.perChannel.data()));
    ep.push(op(EpilogueKind::kAddRowBias, 0, 0, d.perChannel.data()));
    break;
  case 10:
    ep.push(op(EpilogueKind::kAddColBias, 0, 0, d.perPixel.data()));
    ep.push(op(EpilogueKind::kRelu));
    break;
  case 11:
    ep.push(op(EpilogueKind::kAddTensor, 0, 0, d.residual.data(), P));
    ep.push(op(EpilogueKind::kSilu));
    break;
  case 12: // alone: its own compiled-in fused kernel (as ReLU, SiLU, Clip)
    ep.push(op(EpilogueKind::kHardSwish, 1.0f / 6, 0.5f));
    break;
  case 13: // a residual block's end, also compiled in
    ep.push(op(EpilogueKind::kAddTensor, 0, 0, d.residual.data(), P));
    ep.push(op(EpilogueKind::kRelu));
    break;
  }
  return ep;
}

void check(const ConvShape &s, bool withBias, int variant, GemmIsa isa, runtime::ThreadPool &pool,
           bool explicitWorkspace, ConvOrientation orientation = ConvOrientation::kAuto) {
  ASSERT_TRUE(s.valid()) << describe(s);
  std::mt19937 rng(uint32_t(s.C * 1000 + s.K * 17 + s.H * 3 + s.W + variant));
  const int64_t Cg = s.C / s.groups, Kg = s.K / s.groups, outH = s.outH(), outW = s.outW();
  const int64_t P = outH * outW;
  auto x = randomVector(size_t(s.N * s.C * s.H * s.W), rng);
  auto w = randomVector(size_t(s.K * Cg * s.R * s.S), rng);
  auto bias = randomVector(size_t(s.K), rng);
  EpilogueData d{randomVector(size_t(s.K), rng), randomVector(size_t(P), rng),
                 randomVector(size_t(s.N * s.K * P), rng)};
  const Epilogue ep = makeEpilogue(variant, d, P);

  PackedConv conv = PackedConv::pack(s, w.data(), withBias ? bias.data() : nullptr, isa);
  conv.forceOrientation(orientation);
  std::vector<float> y(size_t(s.N * s.K * P), std::nanf(""));
  void *ws = nullptr;
  const size_t wsBytes = conv.workspaceBytes(s, pool.threads());
  if (explicitWorkspace && wsBytes) ws = std::aligned_alloc(64, (wsBytes + 63) / 64 * 64);
  conv.run(s, x.data(), y.data(), ep, ws, &pool);
  std::free(ws);
  // Winograd's transforms scale entries by up to 10 (input) and 17 (output)
  // before and after the sums: its rounding error, relative to the sum of
  // the products' magnitudes, is ~10x the direct conv's (conv_winograd.cpp).
  const double scaleTolerance = conv.orientationFor(s) == ConvOrientation::kWinograd ? 2e-5 : 1e-6;

  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k = 0; k < s.K; ++k) {
      const int64_t g = k / Kg;
      for (int64_t oh = 0; oh < outH; ++oh)
        for (int64_t ow = 0; ow < outW; ++ow) {
          double acc = withBias ? bias[size_t(k)] : 0.0, scale = std::abs(acc);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < s.R; ++r)
              for (int64_t t = 0; t < s.S; ++t) {
                const int64_t ih = oh * s.strideH - s.padTop + r * s.dilationH;
                const int64_t iw = ow * s.strideW - s.padLeft + t * s.dilationW;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                const double prod = double(w[size_t(((k * Cg + c) * s.R + r) * s.S + t)]) *
                                    x[size_t(((n * s.C + g * Cg + c) * s.H + ih) * s.W + iw)];
                acc += prod;
                scale += std::abs(prod);
              }
          const int64_t col = oh * outW + ow;
          for (int o = 0; o < ep.count; ++o) acc = refOp(ep.ops[o], acc, k, col, n * s.K * P);
          const double got = y[size_t((n * s.K + k) * P + col)];
          ASSERT_NEAR(got, acc, 1e-5 + 1e-4 * std::abs(acc) + scaleTolerance * scale)
              << gemmIsaName(isa) << " threads=" << pool.threads() << " "
              << convAlgoName(conv.algo()) << " " << describe(s) << " bias=" << withBias
              << " epilogue variant " << variant << " orientation " << int(conv.orientationFor(s))
              << " at n" << n << " k" << k << " oh" << oh << " ow" << ow;
        }
    }
}

ConvShape shape(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                int64_t stride = 1, int64_t pad = 0, int64_t groups = 1, int64_t dilation = 1) {
  ConvShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S;
  s.strideH = s.strideW = stride;
  s.padTop = s.padLeft = s.padBottom = s.padRight = pad;
  s.groups = groups;
  s.dilationH = s.dilationW = dilation;
  return s;
}

std::vector<ConvShape> shapes() {
  std::vector<ConvShape> v = {
      shape(1, 16, 7, 13, 24, 1, 1),             // pointwise
      shape(3, 19, 13, 7, 33, 1, 1),             // pointwise, batch 3, odd C/K
      shape(1, 8, 13, 13, 16, 1, 1, 2),          // 1x1 stride 2
      shape(1, 16, 13, 13, 32, 3, 3, 1, 1),      // 3x3 same
      shape(2, 3, 17, 19, 16, 3, 3, 2, 1),       // stem: 3x3 s2
      shape(1, 8, 7, 7, 12, 5, 5, 1, 2),         // 5x5
      shape(1, 6, 13, 13, 10, 3, 3, 1, 2, 1, 2), // dilation 2
      shape(1, 8, 9, 9, 12, 3, 3, 1, 1, 2),      // groups 2
      shape(3, 8, 7, 7, 6, 1, 1, 1, 0, 2),       // grouped 1x1
      shape(1, 4, 11, 11, 5, 3, 3, 3, 1),        // stride 3 (gather path)
      shape(1, 7, 1, 1, 9, 1, 1),                // 1x1 spatial (SE block)
      shape(1, 5, 1, 1, 6, 3, 3, 1, 1),          // 3x3 on a 1x1 input
      shape(1, 64, 20, 20, 70, 3, 3, 1, 1),      // depth 576: two K slices
      shape(1, 16, 5, 5, 350, 3, 3, 1, 1),       // M > mc: two row groups
      shape(1, 64, 18, 18, 330, 3, 3, 1, 1),     // K > pixels: threads split channels, 2 B blocks
      shape(1, 8, 6, 100, 8, 3, 3, 1, 1),        // wide rows
      shape(1, 8, 6, 101, 8, 3, 3, 2, 1),        // wide rows, stride 2
      shape(1, 16, 13, 13, 16, 3, 3, 1, 1, 16),  // depthwise 3x3
      shape(3, 19, 13, 17, 19, 3, 3, 2, 1, 19),  // depthwise 3x3 s2, batch 3
      shape(1, 8, 40, 37, 8, 5, 5, 1, 2, 8),     // depthwise 5x5
      shape(1, 8, 41, 40, 8, 5, 5, 2, 2, 8),     // depthwise 5x5 s2
      shape(1, 6, 13, 13, 6, 3, 3, 1, 2, 6, 2),  // depthwise dilation 2
      shape(1, 4, 9, 9, 8, 3, 3, 1, 1, 4),       // depthwise multiplier 2
      shape(1, 5, 14, 14, 5, 3, 3, 3, 1, 5),     // depthwise stride 3
      shape(1, 3, 1, 7, 3, 1, 3, 1, 1, 3),       // depthwise on H = 1
      shape(1, 24, 33, 70, 24, 3, 3, 1, 1, 24),  // depthwise, wide (interior vectors)
      shape(1, 24, 33, 71, 24, 5, 5, 2, 2, 24),  // depthwise 5x5 s2, wide
      shape(1, 2, 5, 1100, 2, 3, 3, 1, 1, 2),    // depthwise, > 1024 columns
      shape(1, 2, 9, 2100, 2, 5, 5, 2, 2, 2),    // depthwise 5x5 s2, > 1024 columns
      shape(1, 8, 30, 37, 8, 7, 7, 1, 3, 8),     // depthwise 7x7 (ConvNeXt)
      shape(2, 4, 7, 7, 4, 7, 7, 1, 3, 4),       // depthwise 7x7 on a 7x7 map
      shape(1, 3, 11, 1050, 3, 7, 7, 1, 3, 3),   // depthwise 7x7, > 1024 columns
      shape(1, 5, 12, 19, 5, 7, 7, 2, 3, 5),     // depthwise 7x7 s2
      shape(1, 8, 16, 17, 8, 3, 3, 2, 0, 8),     // depthwise 3x3 s2, no padding
      shape(1, 3, 9, 45, 3, 5, 5, 2, 4, 3),      // depthwise 5x5 s2, taps wholly in padding
      // Small planes, 8 or 16 channels per vector (conv_kernels.h), with a
      // partial last group of channels.
      shape(2, 13, 7, 7, 13, 5, 5, 1, 2, 13),   // 5x5 on 7x7, 8 + 5 channels
      shape(1, 16, 14, 14, 16, 3, 3, 2, 1, 16), // 3x3 s2 to 7x7
      shape(1, 8, 7, 7, 8, 7, 7, 1, 3, 8),      // 7x7 on 7x7
      shape(2, 27, 9, 6, 27, 3, 3, 1, 1, 27),   // 16 (AVX-512) + 8 + 3 planes
      shape(1, 9, 9, 11, 9, 3, 3, 1, 2, 9, 2),  // dilation 2
  };
  // Dead taps (conv_taps.h): ASPP-style dilations on a small map (bands of
  // tap rows; dilation 24 leaves the centre tap: a 1x1 read in place), a
  // strided dilated conv, a padded 1x1 (rows reading only padding), 3x3 on
  // 2x2 (two bands), and an 11x11 window with more windows than bands.
  v.push_back(shape(1, 8, 16, 16, 12, 3, 3, 1, 12, 1, 12));
  v.push_back(shape(1, 8, 16, 16, 20, 3, 3, 1, 24, 1, 24));
  v.push_back(shape(2, 5, 16, 13, 7, 3, 3, 1, 36, 1, 36));
  v.push_back(shape(1, 6, 9, 9, 10, 3, 3, 2, 8, 1, 8));
  v.push_back(shape(1, 4, 3, 3, 5, 1, 1, 1, 2));
  v.push_back(shape(1, 9, 2, 2, 11, 3, 3, 1, 1));
  v.push_back(shape(1, 2, 3, 3, 3, 11, 11, 1, 10));
  ConvShape asymDil = shape(1, 7, 5, 20, 9, 3, 3, 1, 0, 1, 6);
  asymDil.padTop = 6, asymDil.padBottom = 3, asymDil.padLeft = 1, asymDil.padRight = 12;
  v.push_back(asymDil);
  ConvShape dwRect = shape(1, 4, 17, 30, 4, 3, 3, 1, 1, 4);
  dwRect.strideW = 2, dwRect.dilationH = 2, dwRect.padTop = 2;
  v.push_back(dwRect);
  ConvShape dwTall = shape(1, 4, 23, 19, 4, 5, 5, 1, 2, 4);
  dwTall.strideH = 2;
  v.push_back(dwTall);
  ConvShape asym = shape(1, 5, 9, 11, 7, 3, 3);
  asym.padTop = 0, asym.padLeft = 2, asym.padBottom = 1, asym.padRight = 0;
  v.push_back(asym);
  ConvShape asymDw = shape(2, 9, 10, 21, 9, 3, 3, 2, 0, 9);
  asymDw.padTop = 2, asymDw.padLeft = 0, asymDw.padBottom = 0, asymDw.padRight = 1;
  v.push_back(asymDw);
  ConvShape rect = shape(1, 3, 10, 9, 4, 2, 3);
  rect.strideH = 2, rect.strideW = 1, rect.dilationH = 2, rect.padTop = 1;
  v.push_back(rect);
  // Conv1d: H = 1, R = 1 (silero VAD's encoder and its strided STFT).
  ConvShape c1 = shape(1, 12, 1, 50, 20, 1, 3);
  c1.padLeft = c1.padRight = 1;
  v.push_back(c1);
  ConvShape c1s = shape(2, 12, 1, 51, 20, 1, 3);
  c1s.strideW = 2, c1s.padLeft = c1s.padRight = 1;
  v.push_back(c1s);
  ConvShape stft = shape(1, 1, 1, 576, 18, 1, 64);
  stft.strideW = 32;
  v.push_back(stft);
  return v;
}

class ConvKernelTest : public ::testing::TestWithParam<IsaAndThreads> {};

TEST_P(ConvKernelTest, MatchesFloat64Reference) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  int variant = 0;
  for (const ConvShape &s : shapes()) {
    check(s, variant % 3 != 2, variant, isa, pool, variant % 2 == 0);
    if (HasFatalFailure()) return;
    ++variant;
  }
}

TEST_P(ConvKernelTest, EveryEpilogueKindOnEveryAlgorithm) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  // The 1x1 convs read B in place with the epilogue fused (full tiles of
  // few output channels; the second over two K slices: the fused kernel
  // runs on the last one only). The last two depthwise convs take the
  // channel-vector kernels (8 + 4, and 16 + 8 channels).
  for (const ConvShape &s :
       {shape(2, 12, 9, 10, 20, 3, 3, 1, 1), shape(1, 16, 11, 12, 16, 1, 1),
        shape(1, 600, 4, 17, 20, 1, 1), shape(2, 12, 9, 10, 12, 3, 3, 2, 1, 12),
        shape(2, 24, 7, 7, 24, 5, 5, 1, 2, 24)})
    for (int variant = 0; variant < 14; ++variant) {
      check(s, true, variant, isa, pool, true);
      if (HasFatalFailure()) return;
    }
}

// Every GEMM orientation (conv.h) on every shape and epilogue kind, whatever
// the automatic choice would be; forced pixel rows on the dead-tap shapes
// run the full window, whose padding products are zeros. Winograd where it
// applies (3x3, stride 1, one group; AVX-512), forced elsewhere it runs
// channel rows.
TEST_P(ConvKernelTest, EveryOrientationMatchesTheReference) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  int variant = 0;
  for (const ConvShape &s : shapes())
    for (ConvOrientation o :
         {ConvOrientation::kChannelRows, ConvOrientation::kPixelRows, ConvOrientation::kWinograd}) {
      if (o == ConvOrientation::kWinograd && !detail::winogradApplies(s, isa)) continue;
      check(s, variant % 3 != 2, variant % 14, isa, pool, variant % 2 == 0, o);
      if (HasFatalFailure()) return;
      ++variant;
    }
  // Pixel rows with few output channels (threads split the pixel panels):
  // a 1x1 over several K slices, a grouped 3x3; and a 1x1 on a map of fewer
  // than 16 pixels (its rows are copied one run at a time).
  for (const ConvShape &s : {shape(2, 12, 5, 6, 40, 3, 3, 1, 1), shape(2, 600, 13, 13, 20, 1, 1),
                             shape(1, 24, 12, 12, 30, 3, 3, 1, 1, 2), shape(1, 40, 3, 3, 8, 1, 1)})
    for (int v = 0; v < 14; ++v) {
      check(s, true, v, isa, pool, v % 2 == 0, ConvOrientation::kPixelRows);
      if (HasFatalFailure()) return;
    }
}

// Winograd's tiling: batches, partial tiles at the edges, a tile row wider
// than a vector of tiles (19), several tile panels, depth past one K slice
// (600 channels), several output channel blocks (150), no padding, wide and
// asymmetric padding, a 2x2 map.
TEST_P(ConvKernelTest, WinogradMatchesTheReference) {
  auto [isa, threads] = GetParam();
  if (!detail::winogradApplies(shape(1, 1, 3, 3, 1, 3, 3), isa)) GTEST_SKIP() << "no transforms";
  runtime::ThreadPool pool(threads);
  ConvShape asym = shape(1, 5, 9, 11, 7, 3, 3);
  asym.padTop = 0, asym.padLeft = 2, asym.padBottom = 1, asym.padRight = 0;
  int variant = 0;
  for (const ConvShape &s :
       {shape(2, 19, 17, 23, 37, 3, 3, 1, 1), shape(1, 8, 9, 75, 20, 3, 3, 1, 1),
        shape(1, 600, 6, 6, 24, 3, 3, 1, 1), shape(1, 24, 10, 10, 150, 3, 3, 1, 0),
        shape(1, 6, 7, 7, 9, 3, 3, 1, 2), shape(1, 4, 2, 2, 5, 3, 3, 1, 1), asym,
        shape(3, 16, 12, 12, 16, 3, 3, 1, 1)}) {
    for (int v = 0; v < 14; v += 3) {
      check(s, variant % 3 != 2, (variant + v) % 14, isa, pool, variant % 2 == 0,
            ConvOrientation::kWinograd);
      if (HasFatalFailure()) return;
    }
    ++variant;
  }
}

INSTANTIATE_TEST_SUITE_P(IsasAndThreads, ConvKernelTest, isasAndThreads(), isaAndThreadsName);

TEST(ConvKernel, PicksTheAlgorithmFromTheWeightShape) {
  std::vector<float> w(64 * 64 * 9, 0.5f);
  EXPECT_EQ(PackedConv::pack(shape(1, 16, 8, 8, 32, 1, 1), w.data(), nullptr).algo(),
            ConvAlgo::kGemm1x1);
  EXPECT_EQ(PackedConv::pack(shape(1, 16, 8, 8, 32, 1, 1, 2), w.data(), nullptr).algo(),
            ConvAlgo::kGemm);
  EXPECT_EQ(PackedConv::pack(shape(1, 16, 8, 8, 32, 3, 3, 1, 1), w.data(), nullptr).algo(),
            ConvAlgo::kGemm);
  EXPECT_EQ(PackedConv::pack(shape(1, 16, 8, 8, 16, 3, 3, 1, 1, 16), w.data(), nullptr).algo(),
            ConvAlgo::kDepthwise);
  EXPECT_EQ(PackedConv::pack(shape(1, 16, 8, 8, 16, 3, 3, 1, 1, 16), w.data(), nullptr)
                .workspaceBytes(shape(1, 16, 8, 8, 16, 3, 3, 1, 1, 16), 2),
            0u);
}

TEST(ConvKernel, SmallMapsTurnTheGemmAround) {
  std::vector<float> w(512 * 512 * 9, 0.5f);
  // ResNet's last stage: 49 pixels fill 49 of 64 columns, 512 channels all.
  const ConvShape r7 = shape(1, 512, 7, 7, 512, 3, 3, 1, 1);
  EXPECT_EQ(PackedConv::pack(r7, w.data(), nullptr).orientationFor(r7),
            ConvOrientation::kPixelRows);
  // Large maps, few channels, grouped convs with narrow groups: channel rows
  // (a 3x3 stride-1 conv on a large map may be Winograd instead).
  const ConvShape big = shape(1, 64, 56, 56, 64, 3, 3, 2, 1);
  EXPECT_EQ(PackedConv::pack(big, w.data(), nullptr).orientationFor(big),
            ConvOrientation::kChannelRows);
  const ConvShape grouped = shape(1, 440, 7, 7, 440, 3, 3, 1, 1, 55);
  EXPECT_EQ(PackedConv::pack(grouped, w.data(), nullptr).orientationFor(grouped),
            ConvOrientation::kChannelRows);
  // Dead taps are only dropped with channel rows.
  const ConvShape aspp = shape(1, 64, 16, 16, 64, 3, 3, 1, 24, 1, 24);
  EXPECT_EQ(PackedConv::pack(aspp, w.data(), nullptr).orientationFor(aspp),
            ConvOrientation::kChannelRows);
}

TEST(ConvKernel, WinogradTakesLargeMapsOfThreeByThreeConvs) {
  const ConvShape r56 = shape(1, 64, 56, 56, 64, 3, 3, 1, 1);
  const ConvShape r7 = shape(1, 512, 7, 7, 512, 3, 3, 1, 1);
  std::vector<float> w(512 * 512 * 9, 0.5f);
  for (GemmIsa isa : supportedIsas()) {
    const bool applies = detail::winogradApplies(r56, isa);
    EXPECT_EQ(PackedConv::pack(r56, w.data(), nullptr, isa).orientationFor(r56) ==
                  ConvOrientation::kWinograd,
              applies)
        << gemmIsaName(isa);
    // 49 pixels are 4 tiles of a 32-tile panel: pixel rows.
    EXPECT_NE(PackedConv::pack(r7, w.data(), nullptr, isa).orientationFor(r7),
              ConvOrientation::kWinograd);
    // Stride 2, dilation 2 and groups do not apply.
    for (const ConvShape &s :
         {shape(1, 64, 56, 56, 64, 3, 3, 2, 1), shape(1, 64, 56, 56, 64, 3, 3, 1, 2, 1, 2),
          shape(1, 64, 56, 56, 64, 3, 3, 1, 1, 2)})
      EXPECT_NE(PackedConv::pack(s, w.data(), nullptr, isa).orientationFor(s),
                ConvOrientation::kWinograd)
          << describe(s);
  }
}

TEST(ConvKernel, WinogradWeightsAreMadeFromTheOtherFormsAndBack) {
  // Packed for a 3x3 map (pixel rows) and run on 20x20 (Winograd): the
  // same bits as a conv packed for 20x20. Packed as Winograd and run on
  // the 3x3 map: weights recovered from the transform, within a few ulps.
  const ConvShape small = shape(1, 16, 3, 3, 64, 3, 3, 1, 1),
                  large = shape(1, 16, 20, 20, 64, 3, 3, 1, 1);
  std::mt19937 rng(7);
  auto x = randomVector(size_t(16 * 20 * 20), rng);
  auto w = randomVector(size_t(64 * 16 * 9), rng);
  runtime::ThreadPool pool(2);
  for (GemmIsa isa : supportedIsas()) {
    if (!detail::winogradApplies(large, isa)) continue;
    PackedConv packedSmall = PackedConv::pack(small, w.data(), nullptr, isa);
    PackedConv packedLarge = PackedConv::pack(large, w.data(), nullptr, isa);
    ASSERT_EQ(packedSmall.orientationFor(small), ConvOrientation::kPixelRows);
    ASSERT_EQ(packedLarge.orientationFor(large), ConvOrientation::kWinograd);
    std::vector<float> a(size_t(64 * 400)), b(a.size());
    packedSmall.run(large, x.data(), a.data(), {}, nullptr, &pool);
    packedLarge.run(large, x.data(), b.data(), {}, nullptr, &pool);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << gemmIsaName(isa);
    PackedConv reference = PackedConv::pack(small, w.data(), nullptr, isa);
    std::vector<float> c(size_t(64 * 9)), d(c.size());
    packedLarge.run(small, x.data(), c.data(), {}, nullptr, &pool);
    reference.run(small, x.data(), d.data(), {}, nullptr, &pool);
    for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], d[i], 1e-5 * (1 + std::abs(d[i])));
  }
}

TEST(ConvKernel, OnePackRunsManyInputSizesAndThreadsAtOnce) {
  // The weights fix C, K, R, S, strides, pads and groups; N, H, W vary.
  runtime::ThreadPool pool(2);
  for (GemmIsa isa : supportedIsas()) {
    for (ConvShape s : {shape(1, 8, 9, 9, 12, 3, 3, 1, 1), shape(1, 8, 9, 9, 8, 3, 3, 2, 1, 8),
                        shape(1, 8, 16, 16, 12, 3, 3, 1, 12, 1, 12)}) {
      check(s, true, 2, isa, pool, true);
      s.N = 2, s.H = 17, s.W = 6;
      check(s, true, 3, isa, pool, false);
      s.N = 1, s.H = 3, s.W = 40;
      check(s, true, 1, isa, pool, true);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(ConvKernel, EachOrientationsWeightsAreMadeFromTheOtherOnFirstUse) {
  // Packed for a 3x3 map (pixel rows), run on 20x20 (channel rows), and the
  // other way round: the same bits as a conv packed for the run's size.
  // (Two groups: one group on 20x20 would be Winograd.)
  ConvShape small = shape(1, 16, 3, 3, 64, 3, 3, 1, 1, 2),
            large = shape(1, 16, 20, 20, 64, 3, 3, 1, 1, 2);
  std::mt19937 rng(5);
  auto x = randomVector(size_t(16 * 20 * 20), rng);
  auto w = randomVector(size_t(64 * 16 * 9), rng);
  auto bias = randomVector(64, rng);
  runtime::ThreadPool pool(2);
  for (GemmIsa isa : supportedIsas()) {
    PackedConv packedSmall = PackedConv::pack(small, w.data(), bias.data(), isa);
    PackedConv packedLarge = PackedConv::pack(large, w.data(), bias.data(), isa);
    ASSERT_EQ(packedSmall.orientationFor(small), ConvOrientation::kPixelRows);
    ASSERT_EQ(packedSmall.orientationFor(large), ConvOrientation::kChannelRows);
    for (const ConvShape &s : {large, small}) {
      std::vector<float> a(size_t(64 * s.outH() * s.outW())), b(a.size());
      packedSmall.run(s, x.data(), a.data(), {}, nullptr, &pool);
      packedLarge.run(s, x.data(), b.data(), {}, nullptr, &pool);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << gemmIsaName(isa) << " " << describe(s);
    }
  }
}

TEST(ConvKernel, DeadTapPlanKeepsOnlyTapsThatReadTheInput) {
  using detail::planTapBands;
  // Dilation 24 on 16x16: only the centre tap reads the input.
  detail::TapPlan p = planTapBands(shape(1, 8, 16, 16, 8, 3, 3, 1, 24, 1, 24));
  ASSERT_EQ(p.count, 1);
  EXPECT_EQ(p.bands[0].oh0, 0);
  EXPECT_EQ(p.bands[0].oh1, 16);
  EXPECT_EQ(p.bands[0].window, (detail::TapWindow{1, 2, 1, 2}));
  // Dilation 12: rows 0-3 also read the bottom tap row, rows 12-15 the top.
  p = planTapBands(shape(1, 8, 16, 16, 8, 3, 3, 1, 12, 1, 12));
  ASSERT_EQ(p.count, 3);
  EXPECT_EQ(p.bands[0].oh1, 4);
  EXPECT_EQ(p.bands[0].window, (detail::TapWindow{1, 3, 0, 3}));
  EXPECT_EQ(p.bands[1].oh1, 12);
  EXPECT_EQ(p.bands[1].window, (detail::TapWindow{1, 2, 0, 3}));
  EXPECT_EQ(p.bands[2].oh1, 16);
  EXPECT_EQ(p.bands[2].window, (detail::TapWindow{0, 2, 0, 3}));
  // An ordinary 3x3 conv: the border rows alone do not pay for bands.
  p = planTapBands(shape(1, 8, 14, 14, 8, 3, 3, 1, 1));
  ASSERT_EQ(p.count, 1);
  EXPECT_EQ(p.bands[0].window, (detail::TapWindow{0, 3, 0, 3}));
  // A padded 1x1: the rows reading only padding join their neighbours.
  p = planTapBands(shape(1, 8, 3, 3, 8, 1, 1, 1, 2));
  ASSERT_EQ(p.count, 1);
  EXPECT_EQ(p.bands[0].oh1, 7);
  EXPECT_EQ(p.bands[0].window, (detail::TapWindow{0, 1, 0, 1}));
}

TEST(ConvKernel, DeadTapBandsGiveTheSameBitsOnAnyThreadCount) {
  // Tasks cut the output columns differently with 2 threads, so a band
  // boundary falls inside a task; each output's sum must not depend on it.
  const ConvShape s = shape(1, 16, 16, 16, 24, 3, 3, 1, 12, 1, 12);
  std::mt19937 rng(3);
  auto x = randomVector(size_t(s.C * s.H * s.W), rng);
  auto w = randomVector(size_t(s.K * s.C * 9), rng);
  for (GemmIsa isa : supportedIsas()) {
    PackedConv conv = PackedConv::pack(s, w.data(), nullptr, isa);
    std::vector<float> y1(size_t(s.K * 256)), y2(y1.size());
    runtime::ThreadPool one(1), two(2);
    conv.run(s, x.data(), y1.data(), {}, nullptr, &one);
    conv.run(s, x.data(), y2.data(), {}, nullptr, &two);
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float))) << gemmIsaName(isa);
  }
}

TEST(ConvKernel, ValidRejectsBadShapes) {
  EXPECT_TRUE(shape(1, 4, 5, 5, 4, 3, 3).valid());
  EXPECT_FALSE(shape(1, 4, 2, 5, 4, 3, 3).valid());          // window taller than the input
  EXPECT_FALSE(shape(1, 6, 5, 5, 4, 3, 3, 1, 1, 4).valid()); // groups do not divide C
  EXPECT_FALSE(shape(1, 4, 5, 5, 4, 3, 3, 0).valid());       // stride 0
}

} // namespace
} // namespace kiln::kernels
