// kiln's PackedConv vs oneDNN's convolution on representative layers of the
// corpus (YOLOv8n at 640x640, MobileNetV3-style depthwise and pointwise
// layers of PP-OCR, a Conv1d of silero VAD; of the generated corpus,
// DeepLabV3's dilated ASPP, ConvNeXt's 7x7 depthwise and patchify stem,
// SqueezeNet's fire modules and ResNet-50's layers), 1 and 2 threads. GFLOP/s =
// 2 * N * K * (C/groups) * R * S * outH * outW / time.
//
// Columns: kiln (bias only), kiln+act (bias + the model's activation fused:
// SiLU for YOLOv8 layers, HardSwish for MobileNetV3 ones, ReLU for Conv1d),
// oneDNN with NCHW activations (kiln's layout; weights in oneDNN's preferred
// layout, reordered once outside the timing), and oneDNN with its preferred
// blocked activation layout (nChw16c; activations reordered outside the
// timing too: the peer's best case, as ONNX Runtime's NCHWc graph gets it).
// Libraries are interleaved and the best of several repeats is kept, so a
// noisy shared machine penalizes all alike.
//
// Usage: conv_bench [--threads 1,2] [--repeats 5] [--filter substring]
//                   [--isa portable|avx2|avx512] (kiln's; oneDNN's ISA can be
//                   capped with DNNL_MAX_CPU_ISA=AVX2 for a like-for-like run)
#include "kernels/conv.h"
#include "runtime/thread_pool.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using kiln::kernels::ConvShape;

// The activation fused in the "+act" column: what the model applies after
// this layer (SiLU in YOLOv8, HardSwish in MobileNetV3 / PP-OCR, ReLU in
// silero's encoder).
enum class Act { kSilu, kHardSwish, kRelu };

struct Layer {
  const char *name;
  ConvShape s;
  Act act;
};

ConvShape conv(int64_t C, int64_t HW, int64_t K, int64_t k, int64_t stride, int64_t groups = 1) {
  ConvShape s;
  s.N = 1, s.C = C, s.H = s.W = HW, s.K = K, s.R = s.S = k;
  s.strideH = s.strideW = stride;
  s.padTop = s.padLeft = s.padBottom = s.padRight = k / 2;
  s.groups = groups;
  return s;
}

// A dilated "same" conv (DeepLabV3's ASPP: pad = dilation).
ConvShape dilated(int64_t C, int64_t HW, int64_t K, int64_t dilation) {
  ConvShape s = conv(C, HW, K, 3, 1);
  s.dilationH = s.dilationW = dilation;
  s.padTop = s.padLeft = s.padBottom = s.padRight = dilation;
  return s;
}

// An unpadded conv (SqueezeNet's stem).
ConvShape valid(int64_t C, int64_t HW, int64_t K, int64_t k, int64_t stride) {
  ConvShape s = conv(C, HW, K, k, stride);
  s.padTop = s.padLeft = s.padBottom = s.padRight = 0;
  return s;
}

ConvShape conv1d(int64_t C, int64_t L, int64_t K, int64_t k, int64_t stride) {
  ConvShape s = conv(C, 1, K, 1, stride);
  s.W = L, s.S = k, s.strideH = 1, s.padLeft = s.padRight = k / 2;
  return s;
}

std::vector<Layer> layers() {
  return {
      {"yolo 3->16 3x3 s2 @640", conv(3, 640, 16, 3, 2), Act::kSilu},
      {"yolo 16->32 3x3 s2 @320", conv(16, 320, 32, 3, 2), Act::kSilu},
      {"yolo 32->32 1x1 @160", conv(32, 160, 32, 1, 1), Act::kSilu},
      {"yolo 16->16 3x3 @160", conv(16, 160, 16, 3, 1), Act::kSilu},
      {"yolo 64->64 3x3 @80", conv(64, 80, 64, 3, 1), Act::kSilu},
      {"yolo 64->128 3x3 s2 @80", conv(64, 80, 128, 3, 2), Act::kSilu},
      {"yolo 128->128 3x3 @40", conv(128, 40, 128, 3, 1), Act::kSilu},
      {"yolo 256->256 1x1 @20", conv(256, 20, 256, 1, 1), Act::kSilu},
      {"yolo 256->256 3x3 @20", conv(256, 20, 256, 3, 1), Act::kSilu},
      {"mbv3 16->64 1x1 @80", conv(16, 80, 64, 1, 1), Act::kHardSwish},
      {"mbv3 96->24 1x1 @40", conv(96, 40, 24, 1, 1), Act::kHardSwish},
      {"mbv3 16->64 1x1 @112", conv(16, 112, 64, 1, 1), Act::kRelu},
      {"dw 16 3x3 s1 @80", conv(16, 80, 16, 3, 1, 16), Act::kHardSwish},
      {"dw 64 3x3 s2 @80", conv(64, 80, 64, 3, 2, 64), Act::kHardSwish},
      {"dw 72 5x5 s2 @80", conv(72, 80, 72, 5, 2, 72), Act::kHardSwish},
      {"dw 48 3x3 s1 @40", conv(48, 40, 48, 3, 1, 48), Act::kHardSwish},
      {"dw 96 5x5 s1 @40", conv(96, 40, 96, 5, 1, 96), Act::kHardSwish},
      {"conv1d 128->128 k3 L=512", conv1d(128, 512, 128, 3, 1), Act::kRelu},
      // The generated corpus (torchvision at 224x224; DeepLabV3 at 256x256).
      {"aspp 960->256 d12 @16", dilated(960, 16, 256, 12), Act::kRelu},
      {"aspp 960->256 d24 @16", dilated(960, 16, 256, 24), Act::kRelu},
      {"aspp 960->256 d36 @16", dilated(960, 16, 256, 36), Act::kRelu},
      {"mbv3 dw 960 5x5 @7", conv(960, 7, 960, 5, 1, 960), Act::kHardSwish},
      {"mbv3 dw 672 5x5 s2 @14", conv(672, 14, 672, 5, 2, 672), Act::kHardSwish},
      {"cnxt dw 96 7x7 @56", conv(96, 56, 96, 7, 1, 96), Act::kRelu},
      {"cnxt dw 192 7x7 @28", conv(192, 28, 192, 7, 1, 192), Act::kRelu},
      {"cnxt dw 384 7x7 @14", conv(384, 14, 384, 7, 1, 384), Act::kRelu},
      {"cnxt dw 768 7x7 @7", conv(768, 7, 768, 7, 1, 768), Act::kRelu},
      {"cnxt 3->96 4x4 s4 @224", valid(3, 224, 96, 4, 4), Act::kRelu},
      {"sqz 3->64 3x3 s2 @224", valid(3, 224, 64, 3, 2), Act::kRelu},
      {"sqz 64->16 1x1 @55", conv(64, 55, 16, 1, 1), Act::kRelu},
      {"sqz 16->64 1x1 @55", conv(16, 55, 64, 1, 1), Act::kRelu},
      {"sqz 16->64 3x3 @55", conv(16, 55, 64, 3, 1), Act::kRelu},
      {"sqz 32->128 3x3 @27", conv(32, 27, 128, 3, 1), Act::kRelu},
      {"sqz 64->256 3x3 @13", conv(64, 13, 256, 3, 1), Act::kRelu},
      {"sqz 48->192 3x3 @13", conv(48, 13, 192, 3, 1), Act::kRelu},
      {"sqz 512->64 1x1 @13", conv(512, 13, 64, 1, 1), Act::kRelu},
      {"sqz 512->1000 1x1 @13", conv(512, 13, 1000, 1, 1), Act::kRelu},
      {"ssdlite 3->16 3x3 s2 @320", conv(3, 320, 16, 3, 2), Act::kHardSwish},
      {"ssdlite 16->64 1x1 @160", conv(16, 160, 64, 1, 1), Act::kRelu},
      {"ssdlite 64->24 1x1 @80", conv(64, 80, 24, 1, 1), Act::kRelu},
      {"ssdlite 672->546 1x1 @20", conv(672, 20, 546, 1, 1), Act::kRelu},
      {"regnet 3->32 3x3 s2 @224", conv(3, 224, 32, 3, 2), Act::kRelu},
      {"regnet 32->48 1x1 @112", conv(32, 112, 48, 1, 1), Act::kRelu},
      {"regnet g6 48 3x3 s2 @112", conv(48, 112, 48, 3, 2, 6), Act::kRelu},
      {"regnet g13 104 3x3 @28", conv(104, 28, 104, 3, 1, 13), Act::kRelu},
      {"regnet 440->440 1x1 @7", conv(440, 7, 440, 1, 1), Act::kRelu},
      {"regnet g55 440 3x3 @7", conv(440, 7, 440, 3, 1, 55), Act::kRelu},
      {"r50 3->64 7x7 s2 @224", conv(3, 224, 64, 7, 2), Act::kRelu},
      {"r50 64->64 1x1 @56", conv(64, 56, 64, 1, 1), Act::kRelu},
      {"r50 64->64 3x3 @56", conv(64, 56, 64, 3, 1), Act::kRelu},
      {"r50 64->256 1x1 @56", conv(64, 56, 256, 1, 1), Act::kRelu},
      {"r50 256->128 1x1 @56", conv(256, 56, 128, 1, 1), Act::kRelu},
      {"r50 128->128 3x3 s2 @56", conv(128, 56, 128, 3, 2), Act::kRelu},
      {"r50 128->128 3x3 @28", conv(128, 28, 128, 3, 1), Act::kRelu},
      {"r50 512->128 1x1 @28", conv(512, 28, 128, 1, 1), Act::kRelu},
      {"r50 256->256 3x3 @14", conv(256, 14, 256, 3, 1), Act::kRelu},
      {"r50 1024->256 1x1 @14", conv(1024, 14, 256, 1, 1), Act::kRelu},
      {"r50 256->1024 1x1 @14", conv(256, 14, 1024, 1, 1), Act::kRelu},
      {"r50 512->512 3x3 @7", conv(512, 7, 512, 3, 1), Act::kRelu},
      {"r50 2048->512 1x1 @7", conv(2048, 7, 512, 1, 1), Act::kRelu},
  };
}

std::vector<int> parseList(const char *s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

// oneDNN runs on OpenMP; its thread count is set through libgomp, which
// libdnnl already loaded.
void setOmpThreads(int n) {
  using Fn = void (*)(int);
  if (auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) fn(n);
}

// Best seconds per call: each repeat times enough calls to last >= 30 ms.
double bestSeconds(const std::function<void()> &call, int repeats) {
  call();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    int iters = 0;
    auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      call();
      ++iters;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 0.03);
    best = std::min(best, elapsed / iters);
  }
  return best;
}

// A oneDNN convolution with bias; src/dst in `actTag` (nchw or any).
struct DnnlConv {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::convolution_forward prim;
  std::unordered_map<int, dnnl::memory> args;

  DnnlConv(const ConvShape &s, const std::vector<float> &x, const std::vector<float> &w,
           const std::vector<float> &b, bool blocked) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const int64_t G = s.groups;
    dnnl::memory::dims src{s.N, s.C, s.H, s.W}, dst{s.N, s.K, s.outH(), s.outW()};
    dnnl::memory::dims wei = G == 1 ? dnnl::memory::dims{s.K, s.C, s.R, s.S}
                                    : dnnl::memory::dims{G, s.K / G, s.C / G, s.R, s.S};
    auto act = blocked ? tag::any : tag::nchw;
    dnnl::memory::desc srcMd(src, dt::f32, act), dstMd(dst, dt::f32, act),
        weiMd(wei, dt::f32, tag::any), biasMd({s.K}, dt::f32, tag::x);
    // oneDNN 2.x API (Debian 12 ships 2.6): an op desc, then the primitive desc.
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, srcMd, weiMd,
        biasMd, dstMd, {s.strideH, s.strideW}, {s.dilationH - 1, s.dilationW - 1},
        {s.padTop, s.padLeft}, {s.padBottom, s.padRight});
    auto pd = dnnl::convolution_forward::primitive_desc(desc, eng);
    prim = dnnl::convolution_forward(pd);
    auto reorderIn = [&](const std::vector<float> &data, dnnl::memory::desc plain,
                         dnnl::memory::desc want) {
      dnnl::memory user(plain, eng, const_cast<float *>(data.data()));
      dnnl::memory m(want, eng);
      dnnl::reorder(user, m).execute(strm, user, m);
      return m;
    };
    args[DNNL_ARG_SRC] = reorderIn(x, {src, dt::f32, tag::nchw}, pd.src_desc());
    args[DNNL_ARG_WEIGHTS] =
        reorderIn(w, {wei, dt::f32, G == 1 ? tag::oihw : tag::goihw}, pd.weights_desc());
    args[DNNL_ARG_BIAS] = reorderIn(b, biasMd, biasMd);
    args[DNNL_ARG_DST] = dnnl::memory(pd.dst_desc(), eng);
    strm.wait();
  }
  void run() {
    prim.execute(strm, args);
    strm.wait();
  }
};

} // namespace

int main(int argc, char **argv) {
  std::vector<int> threadCounts{1, 2};
  int repeats = 5;
  std::string filter;
  kiln::kernels::GemmIsa isa = kiln::kernels::GemmIsa::kAuto;
  // --orientation channels|pixels|winograd forces kiln's GEMM orientation
  // (conv.h).
  auto orientation = kiln::kernels::ConvOrientation::kAuto;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--orientation"))
      orientation =
          !std::strcmp(argv[i + 1], "pixels")     ? kiln::kernels::ConvOrientation::kPixelRows
          : !std::strcmp(argv[i + 1], "channels") ? kiln::kernels::ConvOrientation::kChannelRows
          : !std::strcmp(argv[i + 1], "winograd") ? kiln::kernels::ConvOrientation::kWinograd
                                                  : kiln::kernels::ConvOrientation::kAuto;
    if (!std::strcmp(argv[i], "--isa"))
      for (auto candidate : {kiln::kernels::GemmIsa::kPortable, kiln::kernels::GemmIsa::kAvx2,
                             kiln::kernels::GemmIsa::kAvx512})
        if (!std::strcmp(argv[i + 1], kiln::kernels::gemmIsaName(candidate))) isa = candidate;
    if (!std::strcmp(argv[i], "--threads"))
      threadCounts = parseList(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats"))
      repeats = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--filter"))
      filter = argv[i + 1];
  }
  using namespace kiln::kernels;
  std::printf("kiln isa: %s\n", gemmIsaName(resolveGemmIsa(isa)));
  std::printf("%-27s %3s %12s %8s %9s %9s %9s %8s %8s\n", "layer", "thr", "algo", "kiln",
              "kiln+act", "dnnl-nchw", "dnnl-blk", "vs nchw", "vs blk");
  for (int threads : threadCounts) {
    kiln::runtime::ThreadPool pool(threads);
    setOmpThreads(threads);
    for (const Layer &layer : layers()) {
      if (!filter.empty() && std::string(layer.name).find(filter) == std::string::npos) continue;
      const ConvShape &s = layer.s;
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      auto fill = [&](size_t n) {
        std::vector<float> v(n);
        for (float &f : v) f = dist(rng);
        return v;
      };
      const int64_t P = s.outH() * s.outW();
      auto x = fill(size_t(s.N * s.C * s.H * s.W));
      auto w = fill(size_t(s.K * (s.C / s.groups) * s.R * s.S));
      auto b = fill(size_t(s.K));
      std::vector<float> y(size_t(s.N * s.K * P));
      PackedConv pc = PackedConv::pack(s, w.data(), b.data(), isa);
      pc.forceOrientation(orientation);
      const ConvOrientation o = pc.orientationFor(s);
      const std::string algo =
          std::string(convAlgoName(pc.algo())) + (o == ConvOrientation::kPixelRows  ? "/px"
                                                  : o == ConvOrientation::kWinograd ? "/wino"
                                                                                    : "");
      // The workspace must be 64-byte aligned.
      const size_t wsBytes = (pc.workspaceBytes(s, threads) + 127) / 64 * 64;
      std::unique_ptr<void, decltype(&std::free)> ws(std::aligned_alloc(64, wsBytes), &std::free);
      Epilogue none, act;
      if (layer.act == Act::kSilu) act.push({EpilogueKind::kSilu});
      if (layer.act == Act::kHardSwish) act.push({EpilogueKind::kHardSwish, 1.0f / 6, 0.5f});
      if (layer.act == Act::kRelu) act.push({EpilogueKind::kRelu});
      auto kiln = [&] { pc.run(s, x.data(), y.data(), none, ws.get(), &pool); };
      auto kilnSilu = [&] { pc.run(s, x.data(), y.data(), act, ws.get(), &pool); };
      DnnlConv dnnlPlain(s, x, w, b, false), dnnlBlocked(s, x, w, b, true);
      double tk = 1e30, ts = 1e30, tp = 1e30, tb = 1e30;
      for (int round = 0; round < 2; ++round) { // interleave
        tk = std::min(tk, bestSeconds(kiln, repeats));
        ts = std::min(ts, bestSeconds(kilnSilu, repeats));
        tp = std::min(tp, bestSeconds([&] { dnnlPlain.run(); }, repeats));
        tb = std::min(tb, bestSeconds([&] { dnnlBlocked.run(); }, repeats));
      }
      const double flops =
          2.0 * double(s.N * s.K * (s.C / s.groups) * s.R * s.S) * double(P) * 1e-9;
      std::printf("%-27s %3d %12s %8.1f %9.1f %9.1f %9.1f %7.0f%% %7.0f%%\n", layer.name, threads,
                  algo.c_str(), flops / tk, flops / ts, flops / tp, flops / tb, 100 * tp / tk,
                  100 * tb / tk);
      std::fflush(stdout);
    }
  }
  return 0;
}
