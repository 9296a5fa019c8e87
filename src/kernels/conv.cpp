// PackedConv: weight packing, algorithm choice, task planning and threading
// around the GEMM driver (gemm_driver.h) and the per-ISA conv pieces
// (conv_kernels.h). See conv.h for the algorithms and why.
#include "kernels/conv.h"

#include "kernels/conv_kernels.h"
#include "kernels/conv_run.h"
#include "kernels/conv_taps.h"
#include "kernels/conv_winograd.h"
#include "kernels/gemm_driver.h"
#include "runtime/thread_pool.h"

#include <cassert>
#include <cstdlib>
#include <mutex>
#include <utility>

namespace kiln::kernels {

using detail::ceilDiv;
using detail::ConvIsaKernels;
using detail::convKernelsFor;
using detail::ImageEpilogue;
using detail::kParallelFlops;
using detail::roundUp;
using detail::runTasks;
using detail::span;

namespace {

// The packed B block of one task: <= 64 Ki floats (256 KiB), so it stays in
// L2 next to the group's weights. With just-in-time packing each micro-panel
// is read from L1 right after it is packed; the block only matters when
// Kg > mc and later row groups re-read it.
constexpr int64_t kBBlockFloats = int64_t(1) << 16;

// In-place B (im2colDirect) for convs with at most this many row panels.
constexpr int64_t kMaxDirectPanels = 6;

// For run(workspace = null).
thread_local detail::Scratch<float> tConvScratch;

// The conv's B micro-panel at output pixels [j0, j0 + nr) exists in place
// when those pixels lie in one output row, stride 1, and every tap of
// every pixel is inside the input: row (c, r, s) is then nr contiguous
// input floats at base + offsets[(c*R + r)*S + s].
bool im2colDirect(const void *ctx, int64_t j0, int nr, const float **base) {
  const auto &s = *static_cast<const detail::Im2colSource *>(ctx);
  if (s.strideW != 1) return false;
  const int64_t oh = j0 / s.outW, ow = j0 % s.outW;
  if (ow + nr > s.outW) return false;
  const int64_t ih0 = oh * s.strideH - s.padTop, iw0 = ow - s.padLeft;
  if (ih0 < 0 || ih0 + (s.R - 1) * s.dilationH >= s.H) return false;
  if (iw0 < 0 || iw0 + nr - 1 + (s.S - 1) * s.dilationW >= s.W) return false;
  *base = s.x + ih0 * s.W + iw0;
  return true;
}

// In-place B rows of one tap lie a channel plane apart. When planes are a
// multiple of 4 KiB apart every channel's row falls in the same L1 set
// (64 sets of 64-byte lines), so a deep k loop evicts its own rows: a 1x1
// conv of 32 channels over 160x160 planes ran at half the speed of packed B
// (bench/conv: 31-35 vs 69 GF/s) while 16 channels still gained 30%.
constexpr int64_t kMaxRowsPerL1Set = 16;

// How many of `channels` planes `planeBytes` apart share one L1 set.
int64_t channelsPerL1Set(int64_t planeBytes, int64_t channels) {
  constexpr int64_t kLine = 64, kSets = 64;
  if (planeBytes % kLine != 0) return 1; // rows straddle lines: spread over sets
  int64_t step = planeBytes / kLine % kSets, distinct = kSets;
  if (step == 0)
    distinct = 1;
  else
    for (int64_t d = step; d % 2 == 0 && distinct > 1; d /= 2) distinct /= 2;
  return ceilDiv(channels, distinct);
}

// Floats of one task's packed B block for a GEMM of depth `depth`.
int64_t blockCols(const detail::GemmKernelInfo &ki, int64_t depth) {
  const int64_t kcs = detail::sliceDepth(depth, ki.kc);
  return std::max<int64_t>(ki.nr, kBBlockFloats / kcs / ki.nr * ki.nr);
}
int64_t slotFloats(const detail::GemmKernelInfo &ki, int64_t depth) {
  return roundUp(blockCols(ki, depth) * detail::sliceDepth(depth, ki.kc), 16);
}

} // namespace

bool ConvShape::valid() const {
  if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1 || R < 1 || S < 1) return false;
  if (strideH < 1 || strideW < 1 || dilationH < 1 || dilationW < 1) return false;
  if (padTop < 0 || padLeft < 0 || padBottom < 0 || padRight < 0) return false;
  if (groups < 1 || C % groups || K % groups) return false;
  return H + padTop + padBottom >= dilationH * (R - 1) + 1 &&
         W + padLeft + padRight >= dilationW * (S - 1) + 1;
}

const char *convAlgoName(ConvAlgo algo) {
  switch (algo) {
  case ConvAlgo::kGemm:
    return "gemm";
  case ConvAlgo::kGemm1x1:
    return "gemm_1x1";
  case ConvAlgo::kDepthwise:
    return "depthwise";
  }
  return "?";
}

struct PackedConv::GroupWeights {
  ConvOrientation packedAs; // the form pack() made; the others are made from it
  int64_t G, Kg, depth;
  std::once_flag channelRowsOnce, pixelRowsOnce, winogradOnce;
  std::vector<PackedA> channelRows; // W_g, Kg x depth
  std::vector<PackedB> pixelRows;   // W_g^T, depth x Kg
  std::vector<PackedA> winograd;    // U_xi, K x C (groups == 1)

  // All groups' weights [G*Kg][depth] (the ONNX layout) from pack()'s form.
  std::vector<float> source() const {
    std::vector<float> w(size_t(G * Kg * depth));
    if (packedAs == ConvOrientation::kWinograd) {
      std::vector<float> u(size_t(detail::kWinogradXi * Kg * depth / 9));
      const int64_t C = depth / 9;
      for (int xi = 0; xi < detail::kWinogradXi; ++xi)
        winograd[size_t(xi)].unpack(u.data() + xi * Kg * C);
      detail::winogradRecoverWeights(Kg, C, u.data(), w.data());
      return w;
    }
    std::vector<float> wt(packedAs == ConvOrientation::kPixelRows ? size_t(Kg * depth) : 0);
    for (int64_t g = 0; g < G; ++g) {
      float *wg = w.data() + g * Kg * depth;
      if (packedAs == ConvOrientation::kChannelRows) {
        channelRows[size_t(g)].unpack(wg);
        continue;
      }
      pixelRows[size_t(g)].unpack(wt.data()); // W_g^T
      for (int64_t i = 0; i < Kg; ++i)
        for (int64_t k = 0; k < depth; ++k) wg[i * depth + k] = wt[size_t(k * Kg + i)];
    }
    return w;
  }
  void packChannelRows(const float *w, GemmIsa isa) {
    for (int64_t g = 0; g < G; ++g)
      channelRows.push_back(PackedA::pack(false, Kg, depth, w + g * Kg * depth, depth, isa));
  }
  void packPixelRows(const float *w, GemmIsa isa) {
    for (int64_t g = 0; g < G; ++g)
      pixelRows.push_back(PackedB::pack(true, depth, Kg, w + g * Kg * depth, depth, isa));
  }
  void packWinograd(const float *w, GemmIsa isa) {
    const int64_t C = depth / 9;
    std::vector<float> u(size_t(detail::kWinogradXi * Kg * C));
    detail::winogradTransformWeights(Kg, C, w, u.data());
    for (int xi = 0; xi < detail::kWinogradXi; ++xi)
      winograd.push_back(PackedA::pack(false, Kg, C, u.data() + xi * Kg * C, C, isa));
  }
};

PackedConv PackedConv::pack(const ConvShape &s, const float *weights, const float *bias,
                            GemmIsa isa) {
  assert(s.valid());
  PackedConv pc;
  pc.shape_ = s;
  pc.isa_ = resolveGemmIsa(isa);
  const int64_t G = s.groups, Cg = s.C / G, Kg = s.K / G, taps = s.R * s.S;
  if (bias) pc.bias_.assign(bias, bias + s.K);
  // One input channel with many filters (silero's STFT: 258 filters of 256
  // taps over 4 outputs) is a GEMM of depth R*S, not K planes read apart.
  if (G == s.C && Cg == 1 && (G > 1 || Kg == 1)) {
    pc.algo_ = ConvAlgo::kDepthwise;
    pc.taps_.assign(weights, weights + s.K * taps);
    return pc;
  }
  const bool pointwise = s.R == 1 && s.S == 1 && s.strideH == 1 && s.strideW == 1 &&
                         s.padTop == 0 && s.padLeft == 0 && s.padBottom == 0 && s.padRight == 0;
  pc.algo_ = pointwise ? ConvAlgo::kGemm1x1 : ConvAlgo::kGemm;
  const int64_t depth = Cg * taps;
  if (pc.algo_ == ConvAlgo::kGemm) pc.windows_ = std::make_shared<detail::TapWindowPacks>();
  pc.weights_ = std::make_shared<GroupWeights>();
  GroupWeights &gw = *pc.weights_;
  gw.packedAs = pc.orientationFor(s), gw.G = G, gw.Kg = Kg, gw.depth = depth;
  switch (gw.packedAs) {
  case ConvOrientation::kWinograd:
    std::call_once(gw.winogradOnce, [&] { gw.packWinograd(weights, pc.isa_); });
    break;
  case ConvOrientation::kPixelRows:
    std::call_once(gw.pixelRowsOnce, [&] { gw.packPixelRows(weights, pc.isa_); });
    break;
  default:
    std::call_once(gw.channelRowsOnce, [&] { gw.packChannelRows(weights, pc.isa_); });
  }
  return pc;
}

// Each form is made from the one pack() made when a run first needs it.
const std::vector<PackedA> &PackedConv::channelRowWeights() const {
  GroupWeights &gw = *weights_;
  std::call_once(gw.channelRowsOnce, [&] { gw.packChannelRows(gw.source().data(), isa_); });
  return gw.channelRows;
}

const std::vector<PackedB> &PackedConv::pixelRowWeights() const {
  GroupWeights &gw = *weights_;
  std::call_once(gw.pixelRowsOnce, [&] { gw.packPixelRows(gw.source().data(), isa_); });
  return gw.pixelRows;
}

const std::vector<PackedA> &PackedConv::winogradWeights() const {
  GroupWeights &gw = *weights_;
  std::call_once(gw.winogradOnce, [&] { gw.packWinograd(gw.source().data(), isa_); });
  return gw.winograd;
}

// Pixel rows need the whole im2col(X_g)^T of an image and group packed at
// once (every thread's channel columns read all of it): at most this many
// floats (16 MiB).
constexpr int64_t kMaxPixelRowFloats = int64_t(1) << 22;

// Work counted in GEMM columns: the microkernel computes whole NR-column
// panels, so a conv costs about rows x roundUp(columns, NR) x depth. Pixel
// rows add the transposition of Y^T, about what 16 more steps of depth cost
// per output, and must save 8% (bench/conv, AVX-512, 1 thread: ResNet's
// 3x3 and 1x1 convs on 7x7 +22-23%, on 14x14 +3-13%, SqueezeNet's 13x13
// +3%, RegNet's 440-channel 1x1 on 7x7 +12%; 20x20 and larger maps lose
// 8-90% (more the fewer the channels), and so do narrow groups).
ConvOrientation PackedConv::gemmOrientationFor(const ConvShape &s) const {
  const detail::GemmKernelInfo ki = detail::gemmKernelsFor(isa_).info;
  const int64_t Kg = s.K / s.groups, P = s.outH() * s.outW(), depth = s.C / s.groups * s.R * s.S;
  if (P * depth > kMaxPixelRowFloats) return ConvOrientation::kChannelRows;
  const double channelRows = double(roundUp(P, ki.nr)) * double(Kg) * double(depth);
  const double pixelRows = double(P) * double(roundUp(Kg, ki.nr)) * double(depth + 16);
  if (pixelRows >= 0.92 * channelRows) return ConvOrientation::kChannelRows;
  // Dead taps (conv_taps.h) are only dropped in channel rows.
  if (algo_ == ConvAlgo::kGemm && s.padTop + s.padLeft + s.padBottom + s.padRight > 0) {
    const detail::TapPlan plan = detail::planTapBands(s);
    if (plan.count != 1 || plan.bands[0].window != detail::TapWindow{0, s.R, 0, s.S})
      return ConvOrientation::kChannelRows;
  }
  return ConvOrientation::kPixelRows;
}

// Winograd where its cost (conv_winograd.h) is under kWinogradShare of the
// better GEMM orientation's. The model counts multiply-adds and the
// transforms, not that the 36 GEMMs stream 4x the weights per panel of 32
// tiles. Measured (bench/conv, AVX-512, 1 / 2 threads, GF/s as direct
// flops, direct -> Winograd): ResNet's 64 3x3 @56 (cost ratio 0.35) 192 ->
// 386 / 685 (2T, vs 380 direct); 256 @14 (0.67) 176 -> 232 / 260 -> 382;
// SqueezeNet's 64->256 @13 (0.78) 164 -> 162 / 230 -> 288; 512 @7 (2.6)
// 178 -> 48. In a whole network the weights come from memory, and a 14x14
// map's single panel of 16 tiles streams all 9.4 MB of ResNet-50's 256
// 3x3 for one pass; still, leaving those layers direct made ResNet-50 7%
// slower on 2 threads (bench/ab_kiln.py) and no faster on one. Nor did a
// larger share on several threads (0.85, SqueezeNet's 13x13) pay there.
constexpr double kWinogradShare = 0.75;

ConvOrientation PackedConv::orientationFor(const ConvShape &s) const {
  if (algo_ == ConvAlgo::kDepthwise) return ConvOrientation::kChannelRows;
  const bool winograd = algo_ == ConvAlgo::kGemm && detail::winogradApplies(s, isa_);
  if (forced_ == ConvOrientation::kWinograd)
    return winograd ? ConvOrientation::kWinograd : ConvOrientation::kChannelRows;
  if (forced_ != ConvOrientation::kAuto) return forced_;
  const ConvOrientation gemm = gemmOrientationFor(s);
  if (!winograd) return gemm;
  const detail::GemmKernelInfo ki = detail::gemmKernelsFor(isa_).info;
  const int64_t P = s.outH() * s.outW(), depth = s.C * 9;
  const double gemmCost = gemm == ConvOrientation::kPixelRows
                              ? double(P) * double(roundUp(s.K, ki.nr)) * double(depth + 16)
                              : double(roundUp(P, ki.nr)) * double(s.K) * double(depth);
  return detail::winogradCost(s, ki.nr) < kWinogradShare * gemmCost ? ConvOrientation::kWinograd
                                                                    : gemm;
}

size_t PackedConv::workspaceBytes(const ConvShape &s, int threads) const {
  if (algo_ == ConvAlgo::kDepthwise) return 0;
  const ConvOrientation o = orientationFor(s);
  if (o == ConvOrientation::kPixelRows) return pixelRowsWorkspaceBytes(s, threads);
  if (o == ConvOrientation::kWinograd) return winogradWorkspaceBytes(s, threads);
  const detail::GemmKernelInfo ki = detail::gemmKernelsFor(isa_).info;
  const int64_t depth = s.C / s.groups * s.R * s.S;
  return size_t(std::max(threads, 1)) * size_t(slotFloats(ki, depth)) * sizeof(float);
}

void PackedConv::run(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                     void *workspace, runtime::ThreadPool *pool) const {
  runtime::ThreadPool &p = pool ? *pool : runtime::ThreadPool::global();
  assert(reinterpret_cast<uintptr_t>(workspace) % 64 == 0 && "workspace must be 64-byte aligned");
  if (algo_ == ConvAlgo::kDepthwise) {
    runDepthwise(s, x, y, ep, p);
    return;
  }
  switch (orientationFor(s)) {
  case ConvOrientation::kPixelRows:
    runPixelRows(s, x, y, ep, workspace, p);
    break;
  case ConvOrientation::kWinograd:
    runWinograd(s, x, y, ep, workspace, p);
    break;
  default:
    runGemm(s, x, y, ep, workspace, p);
  }
}

namespace {

// One band of output rows of a run (conv_taps.h): its output columns [j0,
// j1), GEMM depth, packed weights, im2col geometry (x is set per task) and
// in-place B row offsets (null: pack every panel).
struct GemmBand {
  int64_t j0 = 0, j1 = 0, depth = 0, nc = 0;
  const std::vector<PackedA> *packs = nullptr;
  detail::Im2colSource src{};
  const int32_t *offsets = nullptr;
};

} // namespace

// Tasks: (image, group) units x column tiles x row splits. Column tiles are
// whole NR panels of output pixels, at most one B block wide, and numerous
// enough for >= 4 tasks per thread when the units alone are too few (batch
// 1, groups 1: a 20x20 output has 13 panels; split 4+3+3+3 over 2 threads,
// one thread would idle a quarter of the time, in 8 tiles of 1-2 panels
// claimed one at a time the threads end within one panel of each other).
// Tiles cost nothing extra: the weights are pre-packed and each tile packs
// only its own columns. Row splits (output-channel blocks) when the
// weights outweigh the pixels (Kg > P, ResNet's 512 channels on a 7x7 map):
// with column tiles every thread would stream all the weights from memory
// (and a 7x7 map's 2 panels give one thread 32 columns, the other 17); a
// row split halves that traffic at the cost of each thread packing every
// column, the same choice the GEMM driver makes (512 3x3 @7 on 2 threads:
// 218 -> 283 GF/s; ResNet-50 2T -10%). Otherwise row splits only when even
// one-panel tiles leave a thread idle. Tasks run row split-major, so a
// thread's contiguous share is one channel block over its columns. A
// task's columns that cross bands of different tap windows run as one GEMM
// per band.
void PackedConv::runGemm(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                         void *workspace, runtime::ThreadPool &pool) const {
  const detail::GemmKernels k = detail::gemmKernelsFor(isa_);
  const detail::GemmKernelInfo &ki = k.info;
  const ConvIsaKernels ck = convKernelsFor(isa_);
  const int64_t G = s.groups, Cg = s.C / G, Kg = s.K / G;
  const int64_t outH = s.outH(), outW = s.outW(), P = outH * outW;
  const int64_t depth = Cg * s.R * s.S;
  const detail::RowPanels rows(Kg, ki.mr);

  const int64_t units = s.N * G;
  const int64_t colPanels = ceilDiv(P, ki.nr);
  int64_t tiles = ceilDiv(colPanels, blockCols(ki, depth) / ki.nr);
  int64_t rowSplits = 1;
  const double flops = 2.0 * double(s.N) * double(s.K) * double(depth) * double(P);
  const int64_t threads = flops < kParallelFlops ? 1 : pool.threads();
  if (threads > 1 && units < threads && Kg > P) { // weights outweigh the pixels
    rowSplits = std::min(rows.count, ceilDiv(threads, units));
  } else {
    if (threads > 1 && units * tiles < 4 * threads)
      tiles = std::min(colPanels, std::max(tiles, ceilDiv(4 * threads, units)));
    if (threads > 1 && units * tiles < threads)
      rowSplits = std::min(rows.count, ceilDiv(threads, units * tiles));
  }
  const int64_t tasks = units * tiles * rowSplits;
  const int64_t slotSize = slotFloats(ki, depth);

  // Without padding every tap reads the input somewhere: one full band.
  const detail::TapWindow full{0, s.R, 0, s.S};
  detail::TapPlan plan;
  plan.count = 1;
  plan.bands[0] = {0, outH, full};
  if (algo_ == ConvAlgo::kGemm && s.padTop + s.padLeft + s.padBottom + s.padRight > 0)
    plan = detail::planTapBands(s);

  // In-place B rows (im2colDirect) need 32-bit offsets of every (c, r, s)
  // from the group's first input value; H and W may change per run.
  // Only for few row panels: each panel re-reads the B rows, which unpacked
  // are scattered over the channel planes (3 cache lines each, and planes a
  // power of two apart share L1 sets); packed once they are one compact
  // block. Measured: 2-3 panels (16-32 output channels) gain 20-70%, 10
  // panels (a 128-channel Conv1d) lose 25%.
  const bool directOk =
      ki.direct[1] && s.strideW == 1 && rows.count <= kMaxDirectPanels &&
      Cg * s.H * s.W < (int64_t(1) << 31) &&
      channelsPerL1Set(s.H * s.W * int64_t(sizeof(float)), Cg) <= kMaxRowsPerL1Set;
  thread_local std::vector<int32_t> tOffsets;
  GemmBand bands[detail::TapPlan::kMaxBands];
  int64_t offsetCount = 0;
  for (int i = 0; i < plan.count; ++i) {
    const detail::TapBand &tb = plan.bands[i];
    const detail::TapWindow &w = tb.window;
    GemmBand &b = bands[i];
    b.j0 = tb.oh0 * outW, b.j1 = tb.oh1 * outW;
    b.depth = Cg * w.rows() * w.cols();
    if (w == full) {
      b.packs = &channelRowWeights();
    } else {
      // A reduced window and no pack yet: only pack() makes windows_, so a
      // default-constructed PackedConv never gets here.
      b.packs = &windows_->get(w, s, channelRowWeights());
    }
    b.src = {nullptr,
             s.H,
             s.W,
             outW,
             w.rows(),
             w.cols(),
             s.strideH,
             s.strideW,
             s.dilationH,
             s.dilationW,
             s.padTop - w.r0 * s.dilationH,
             s.padLeft - w.s0 * s.dilationW};
    // A 1x1 window that reads pixel p for output p (kGemm1x1, or a dilated
    // conv whose only live tap is the centre) reads X as the matrix [C x
    // H*W]: one long row per channel, contiguous loads.
    if (algo_ == ConvAlgo::kGemm1x1 ||
        (w.rows() == 1 && w.cols() == 1 && s.strideH == 1 && s.strideW == 1 && b.src.padTop == 0 &&
         b.src.padLeft == 0 && outH == s.H && outW == s.W))
      b.src.H = 1, b.src.W = P, b.src.outW = P;
    const int64_t kcs = detail::sliceDepth(b.depth, ki.kc);
    b.nc = std::max<int64_t>(ki.nr, slotSize / kcs / ki.nr * ki.nr);
    offsetCount += directOk ? b.depth : 0;
  }
  if (directOk) {
    tOffsets.resize(size_t(offsetCount));
    int32_t *o = tOffsets.data();
    for (int i = 0; i < plan.count; ++i) {
      const detail::Im2colSource &src = bands[i].src;
      bands[i].offsets = o;
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t r = 0; r < src.R; ++r)
          for (int64_t t = 0; t < src.S; ++t)
            *o++ = int32_t(c * src.H * src.W + r * s.dilationH * src.W + t * s.dilationW);
    }
  }

  runTasks(pool, threads, tasks, [&](int slot, int64_t t) {
    const int64_t unit = t / (tiles * rowSplits), n = unit / G, g = unit % G;
    const auto [c0, c1] = span(colPanels, tiles, t % tiles);
    const auto [r0, r1] = span(rows.count, rowSplits, t / tiles % rowSplits);
    const int64_t j0 = c0 * ki.nr, j1 = std::min(c1 * ki.nr, P);
    if (j1 <= j0 || r1 <= r0) return;
    float *bBuf =
        workspace ? static_cast<float *>(workspace) + slot * slotSize : tConvScratch.get(slotSize);
    const ImageEpilogue epi(ep, n, s.K);
    for (int i = 0; i < plan.count; ++i) {
      const GemmBand &b = bands[i];
      const int64_t lo = std::max(j0, b.j0), hi = std::min(j1, b.j1);
      if (lo >= hi) continue;
      detail::Im2colSource src = b.src;
      src.x = x + (n * s.C + g * Cg) * s.H * s.W;
      detail::GemmProblem prob;
      prob.M = Kg, prob.N = P, prob.K = b.depth;
      prob.a.packed = (*b.packs)[size_t(g)].data();
      prob.b.pack = ck.im2col, prob.b.ctx = &src;
      if (b.offsets) {
        prob.b.direct = im2colDirect, prob.b.offsets = b.offsets;
        if (src.R * src.S == 1) prob.b.directStride = src.H * src.W;
      }
      prob.beta = 0.0f;
      prob.c = y + (n * s.K + g * Kg) * P, prob.ldc = P;
      prob.rowBias = bias_.empty() ? nullptr : bias_.data() + g * Kg;
      prob.ops = epi.ops, prob.opCount = epi.count;
      prob.epiRow0 = g * Kg;
      detail::gemmBlock(prob, k, rows, r0, r1, lo, hi - lo, std::min(roundUp(hi - lo, ki.nr), b.nc),
                        nullptr, bBuf);
    }
  });
}

// Tasks: (image, output channel) planes, split into row blocks when there
// are fewer than 4 per thread. Planes narrower than two vectors (7x7,
// 14x14) of a conv with one output per input channel go 16 (AVX-512) or 8
// channels per task to the channel-vectorized kernels (conv_kernels.h),
// when the ISA has them; a last partial group of channels takes the plane
// kernel for what is left under 8.
void PackedConv::runDepthwise(const ConvShape &s, const float *x, float *y, const Epilogue &ep,
                              runtime::ThreadPool &pool) const {
  const ConvIsaKernels ck = convKernelsFor(isa_);
  const detail::EpilogueFn epiFn = detail::epilogueFor(isa_);
  const int64_t outH = s.outH(), outW = s.outW(), P = outH * outW;
  const int64_t planes = s.N * s.K, mult = s.K / s.C, taps = s.R * s.S;
  const double flops = 2.0 * double(planes) * double(taps) * double(P);
  const int64_t threads = flops < kParallelFlops ? 1 : pool.threads();

  auto planeArgs = [&](int64_t n, int64_t k, int64_t oh0, int64_t oh1, const ImageEpilogue &epi) {
    detail::DepthwiseArgs a;
    a.x = x + (n * s.C + k / mult) * s.H * s.W;
    a.y = y + (n * s.K + k) * P;
    a.w = taps_.data() + k * taps;
    a.bias = bias_.empty() ? 0.0f : bias_[size_t(k)];
    a.H = s.H, a.W = s.W, a.outH = outH, a.outW = outW;
    a.R = s.R, a.S = s.S, a.strideH = s.strideH, a.strideW = s.strideW;
    a.dilationH = s.dilationH, a.dilationW = s.dilationW, a.padTop = s.padTop,
    a.padLeft = s.padLeft;
    a.oh0 = oh0, a.oh1 = oh1;
    a.ops = epi.ops, a.opCount = epi.count, a.channel = k, a.epilogue = epiFn;
    return a;
  };

  detail::DepthwiseBlockArgs block{};
  block.H = s.H, block.W = s.W, block.outH = outH, block.outW = outW;
  block.R = s.R, block.S = s.S, block.strideH = s.strideH, block.strideW = s.strideW;
  block.dilationH = s.dilationH, block.dilationW = s.dilationW;
  block.padTop = s.padTop, block.padLeft = s.padLeft, block.epilogue = epiFn;
  // Tasks of `width` channels (16 with the 16-channel kernel); a last
  // group takes the 8-channel kernel for 8 of its channels and the plane
  // kernel for the rest.
  const int64_t width = ck.depthwiseChannels16 ? 16 : 8;
  if (ck.depthwiseChannels && mult == 1 && s.C >= 8 && outW < 16 &&
      taps <= detail::kChannelBlockTaps &&
      detail::channelBlockRows(block) * detail::channelBlockCols(block) * width <=
          detail::kChannelBlockFloats) {
    const int64_t groups = ceilDiv(s.C, width);
    const bool flatEpilogue = epilogueIsElementwise(ep.ops, ep.count);
    runTasks(pool, threads, s.N * groups, [&](int, int64_t t) {
      const int64_t n = t / groups, c1 = std::min(s.C, (t % groups + 1) * width);
      const ImageEpilogue epi(ep, n, s.K);
      for (int64_t c0 = t % groups * width; c0 < c1;) {
        const int64_t count = c1 - c0 >= 16 && ck.depthwiseChannels16 ? 16 : c1 - c0 >= 8 ? 8 : 0;
        if (count == 0) {
          for (int64_t k = c0; k < c1; ++k) ck.depthwise(planeArgs(n, k, 0, outH, epi));
          return;
        }
        detail::DepthwiseBlockArgs b = block;
        b.x = x + (n * s.C + c0) * s.H * s.W;
        b.y = y + (n * s.K + c0) * P;
        b.w = taps_.data() + c0 * taps;
        b.bias = bias_.empty() ? nullptr : bias_.data() + c0;
        b.ops = epi.ops, b.opCount = epi.count, b.channel0 = c0;
        b.epilogueFlat = flatEpilogue;
        (count == 16 ? ck.depthwiseChannels16 : ck.depthwiseChannels)(b);
        c0 += count;
      }
    });
    return;
  }

  int64_t rowBlocks = 1;
  if (threads > 1 && planes < 4 * threads) rowBlocks = std::min(outH, ceilDiv(4 * threads, planes));
  runTasks(pool, threads, planes * rowBlocks, [&](int, int64_t t) {
    const int64_t plane = t / rowBlocks, n = plane / s.K, k = plane % s.K;
    const auto [oh0, oh1] = span(outH, rowBlocks, t % rowBlocks);
    if (oh1 <= oh0) return;
    ck.depthwise(planeArgs(n, k, oh0, oh1, ImageEpilogue(ep, n, s.K)));
  });
}

} // namespace kiln::kernels
