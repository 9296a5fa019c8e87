// Dead-tap planning and the packed weights of reduced tap windows (see
// conv_taps.h).
#include "kernels/conv_taps.h"

#include "kernels/gemm_driver.h"

#include <algorithm>

namespace kiln::kernels::detail {

void liveTaps(int64_t i0, int64_t dilation, int64_t taps, int64_t size, int64_t &b, int64_t &e) {
  const int64_t last = size - 1 - i0; // t * dilation <= last
  b = i0 >= 0 ? 0 : (-i0 + dilation - 1) / dilation;
  e = last < 0 ? 0 : std::min(taps, last / dilation + 1);
  if (b > e) b = e;
}

TapPlan planTapBands(const ConvShape &s) {
  const int64_t outH = s.outH(), outW = s.outW();
  int64_t s0 = s.S, s1 = 0;
  for (int64_t ow = 0; ow < outW; ++ow) {
    int64_t b, e;
    liveTaps(ow * s.strideW - s.padLeft, s.dilationW, s.S, s.W, b, e);
    if (b < e) s0 = std::min(s0, b), s1 = std::max(s1, e);
  }
  if (s0 >= s1) s0 = 0, s1 = 1;

  TapPlan plan;
  int64_t r0 = s.R, r1 = 0; // the union of the rows' windows
  bool overflow = false;
  for (int64_t oh = 0; oh < outH; ++oh) {
    int64_t b, e;
    liveTaps(oh * s.strideH - s.padTop, s.dilationH, s.R, s.H, b, e);
    if (b >= e) continue; // joins a neighbouring band
    r0 = std::min(r0, b), r1 = std::max(r1, e);
    if (overflow) continue;
    TapBand *last = plan.count ? &plan.bands[plan.count - 1] : nullptr;
    if (last && last->window.r0 == b && last->window.r1 == e) continue;
    if (plan.count == TapPlan::kMaxBands) {
      overflow = true;
      continue;
    }
    if (last) last->oh1 = oh;
    plan.bands[plan.count++] = {last ? oh : 0, outH, {b, e, s0, s1}};
  }
  if (r0 >= r1) r0 = 0, r1 = 1;

  int64_t banded = 0;
  for (int i = 0; i < plan.count; ++i)
    banded += (plan.bands[i].oh1 - plan.bands[i].oh0) * plan.bands[i].window.rows();
  if (overflow || plan.count == 0 || 4 * banded > 3 * outH * (r1 - r0)) {
    plan.count = 1;
    plan.bands[0] = {0, outH, {r0, r1, s0, s1}};
  }
  return plan;
}

namespace {

// Group g's weights [Kg][Cg][R][S] restricted to `w`.
std::vector<float> unpackWindow(const PackedA &full, const ConvShape &s, const TapWindow &w) {
  const int64_t M = full.rows(), K = full.depth(), taps = s.R * s.S;
  const int64_t Cg = K / taps, depth = Cg * w.rows() * w.cols();
  std::vector<float> all(size_t(M * K)), out(size_t(M * depth));
  full.unpack(all.data());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t c = k / taps, r = k / s.S % s.R, t = k % s.S;
      if (r < w.r0 || r >= w.r1 || t < w.s0 || t >= w.s1) continue;
      const int64_t col = (c * w.rows() + (r - w.r0)) * w.cols() + (t - w.s0);
      out[size_t(i * depth + col)] = all[size_t(i * K + k)];
    }
  return out;
}

} // namespace

const std::vector<PackedA> &TapWindowPacks::get(const TapWindow &window, const ConvShape &s,
                                                const std::vector<PackedA> &full) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto &e : entries_)
    if (e->window == window) return e->packs;
  auto entry = std::make_unique<Entry>();
  entry->window = window;
  for (const PackedA &g : full) {
    const std::vector<float> w = unpackWindow(g, s, window);
    const int64_t depth = int64_t(w.size()) / std::max<int64_t>(g.rows(), 1);
    entry->packs.push_back(PackedA::pack(false, g.rows(), depth, w.data(), depth, g.isa()));
  }
  entries_.push_back(std::move(entry));
  return entries_.back()->packs;
}

} // namespace kiln::kernels::detail
