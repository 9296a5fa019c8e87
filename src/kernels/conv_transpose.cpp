// PackedConvTranspose: weight packing, blocking, threading and the col2im
// scatter around the packed GEMM. See conv_transpose.h for the algorithm.
#include "kernels/conv_transpose.h"

#include "kernels/gemm_driver.h"

#include "runtime/thread_pool.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <utility>

namespace kiln::kernels {

namespace {

// The cols block of one task: about 128 KiB, so it is scattered from L2
// right after the GEMM writes it.
constexpr int64_t kColsFloats = int64_t(1) << 15;

// Below this many flops the whole op runs on the calling thread: waking a
// worker costs more than it saves.
constexpr double kParallelFlops = 4e5;

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
// floor(a / b) for b > 0 and any a.
int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Input positions i in [0, n) whose output position i * stride + off lies in
// [0, out): [first, second).
std::pair<int64_t, int64_t> validRange(int64_t n, int64_t stride, int64_t off, int64_t out) {
  const int64_t lo = std::max<int64_t>(0, -floorDiv(off, stride));
  const int64_t hi = std::min(n, floorDiv(out - 1 - off, stride) + 1);
  return {lo, std::max(lo, hi)};
}

thread_local detail::Scratch<float> tColsScratch;

// The geometry every task shares.
struct Plan {
  const ConvTransposeShape *s;
  int64_t Cg, Kg, M; // M = Kg * R * S: rows of cols
  // Every output pixel receives exactly one product (kernel == stride, no
  // padding): the scatter writes instead of adding, and adds the bias.
  bool exact;
  std::vector<std::pair<int64_t, int64_t>> colRange; // per tap s: valid iw
};

// Adds (or, when exact, writes) cols — rows (m, r, s), columns the input
// pixels of rows [h0, h1) — into yg, the group's first output channel.
void scatterBlock(const Plan &p, const float *cols, int64_t h0, int64_t h1, float *yg,
                  const float *bias) {
  const ConvTransposeShape &s = *p.s;
  const int64_t Pb = (h1 - h0) * s.W, outHW = s.outH * s.outW;
  for (int64_t m = 0; m < p.Kg; ++m) {
    float *ym = yg + m * outHW;
    const float b = bias ? bias[m] : 0.0f;
    for (int64_t r = 0; r < s.R; ++r) {
      const int64_t rowOff = r * s.dilationH - s.padTop;
      const auto [ih0, ih1] = validRange(h1, s.strideH, rowOff, s.outH);
      for (int64_t ih = std::max(ih0, h0); ih < ih1; ++ih) {
        float *yrow = ym + (ih * s.strideH + rowOff) * s.outW;
        const float *src = cols + (m * s.R + r) * s.S * Pb + (ih - h0) * s.W;
        const int64_t W = s.W;
        if (p.exact && s.S == 2 && s.strideW == 2) {
          const float *s0 = src, *s1 = src + Pb;
          for (int64_t iw = 0; iw < W; ++iw) {
            yrow[2 * iw] = s0[iw] + b;
            yrow[2 * iw + 1] = s1[iw] + b;
          }
        } else if (p.exact) {
          const int64_t sw = s.strideW;
          for (int64_t t = 0; t < s.S; ++t) {
            const float *st = src + t * Pb;
            float *d = yrow + t;
            for (int64_t iw = 0; iw < W; ++iw) d[iw * sw] = st[iw] + b;
          }
        } else {
          const int64_t sw = s.strideW;
          for (int64_t t = 0; t < s.S; ++t) {
            const float *st = src + t * Pb;
            const int64_t off = t * s.dilationW - s.padLeft;
            const auto [lo, hi] = p.colRange[size_t(t)];
            if (sw == 1)
              for (int64_t iw = lo; iw < hi; ++iw) yrow[iw + off] += st[iw];
            else
              for (int64_t iw = lo; iw < hi; ++iw) yrow[iw * sw + off] += st[iw];
          }
        }
      }
    }
  }
}

} // namespace

int64_t ConvTransposeShape::outSize(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                                    int64_t padBegin, int64_t padEnd, int64_t outputPadding) {
  return stride * (in - 1) + outputPadding + (kernel - 1) * dilation + 1 - padBegin - padEnd;
}

bool ConvTransposeShape::valid() const {
  if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1 || R < 1 || S < 1) return false;
  if (strideH < 1 || strideW < 1 || dilationH < 1 || dilationW < 1) return false;
  if (groups < 1 || C % groups || K % groups) return false;
  return outH >= 1 && outW >= 1;
}

PackedConvTranspose PackedConvTranspose::pack(const ConvTransposeShape &s, const float *weights,
                                              const float *bias, GemmIsa isa) {
  assert(s.C >= 1 && s.K >= 1 && s.R >= 1 && s.S >= 1 && s.groups >= 1);
  PackedConvTranspose pc;
  pc.shape_ = s;
  pc.isa_ = resolveGemmIsa(isa);
  const int64_t G = s.groups, Cg = s.C / G, M = s.K / G * s.R * s.S;
  if (bias) pc.bias_.assign(bias, bias + s.K);
  // Group g's weights are the rows [g*Cg, (g+1)*Cg) of a [C x M] matrix;
  // the GEMM wants their transpose.
  pc.groupWeights_.reserve(size_t(G));
  for (int64_t g = 0; g < G; ++g)
    pc.groupWeights_.push_back(PackedA::pack(true, M, Cg, weights + g * Cg * M, M, pc.isa_));
  return pc;
}

void PackedConvTranspose::run(const ConvTransposeShape &s, const float *x, float *y,
                              runtime::ThreadPool *pool) const {
  assert(s.valid() && s.C == shape_.C && s.K == shape_.K && s.R == shape_.R && s.S == shape_.S &&
         s.groups == shape_.groups);
  runtime::ThreadPool &tp = pool ? *pool : runtime::ThreadPool::global();
  Plan p;
  p.s = &s;
  const int64_t G = s.groups;
  p.Cg = s.C / G, p.Kg = s.K / G, p.M = p.Kg * s.R * s.S;
  const int64_t spanH = (s.R - 1) * s.dilationH + 1;
  p.exact = s.R == s.strideH && s.S == s.strideW && (s.R == 1 || s.dilationH == 1) &&
            (s.S == 1 || s.dilationW == 1) && s.padTop == 0 && s.padLeft == 0 &&
            s.outH == s.H * s.strideH && s.outW == s.W * s.strideW;
  for (int64_t t = 0; t < s.S; ++t)
    p.colRange.push_back(validRange(s.W, s.strideW, t * s.dilationW - s.padLeft, s.outW));

  const int64_t outHW = s.outH * s.outW;
  const double flops =
      2.0 * double(s.N) * double(s.K) * double(p.Cg) * double(s.R * s.S) * double(s.H * s.W);
  const int64_t threads = flops < kParallelFlops ? 1 : tp.threads();
  // Blocks of bh input rows. When taps of neighbouring rows overlap, blocks
  // two apart must not: (bh + 1) * strideH >= spanH.
  const bool overlap = spanH > s.strideH;
  const int64_t minRows = overlap ? std::max<int64_t>(1, ceilDiv(spanH, s.strideH) - 1) : 1;
  const int64_t units = s.N * G, phases = overlap ? 2 : 1;
  int64_t bh = std::max<int64_t>(1, kColsFloats / std::max<int64_t>(1, p.M * s.W));
  if (threads > 1) // >= 2 tasks per thread in each phase when the rows allow
    bh = std::min(bh, ceilDiv(s.H, ceilDiv(2 * threads * phases, units)));
  bh = std::min(std::max(bh, minRows), s.H);
  const int64_t blocks = ceilDiv(s.H, bh);

  if (!p.exact) {
    auto fill = [&](int64_t b, int64_t e) {
      for (int64_t plane = b; plane < e; ++plane) {
        const float v = bias_.empty() ? 0.0f : bias_[size_t(plane % s.K)];
        std::fill_n(y + plane * outHW, outHW, v);
      }
    };
    if (threads == 1)
      fill(0, s.N * s.K);
    else
      tp.parallelFor(s.N * s.K, fill);
  }

  GemmOptions opts;
  opts.pool = &tp;
  for (int64_t phase = 0; phase < phases; ++phase) {
    // Blocks phase, phase + phases, ...
    const int64_t perUnit = (blocks - phase + phases - 1) / phases;
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t unit = t / perUnit, n = unit / G, g = unit % G;
        const int64_t h0 = (phase + phases * (t % perUnit)) * bh, h1 = std::min(s.H, h0 + bh);
        const int64_t Pb = (h1 - h0) * s.W;
        float *cols = tColsScratch.get(p.M * Pb);
        const float *xg = x + (n * s.C + g * p.Cg) * s.H * s.W + h0 * s.W;
        sgemmPacked(groupWeights_[size_t(g)], false, Pb, xg, s.H * s.W, 0.0f, cols, Pb, opts);
        const float *bias = p.exact && !bias_.empty() ? bias_.data() + g * p.Kg : nullptr;
        scatterBlock(p, cols, h0, h1, y + (n * s.K + g * p.Kg) * outHW, bias);
      }
    };
    if (perUnit <= 0) continue;
    if (threads == 1)
      body(0, units * perUnit);
    else
      tp.parallelFor(units * perUnit, body);
  }
}

} // namespace kiln::kernels
