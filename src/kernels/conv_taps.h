// Dead-tap elimination for the GEMM convolutions: taps that read only
// zero padding for every output of a region contribute nothing, so the
// region's GEMM can drop them from its depth. Where it pays: dilated convs
// on small maps (DeepLabV3's ASPP: 3x3 with dilation 12/24/36 on a 16x16
// map, where dilation 24 and 36 leave only the centre tap alive, a 1x1 conv,
// and dilation 12 leaves 1-2 of 3 tap rows per output row) and ordinary
// padded convs on maps not much larger than the window (3x3 on 1x1 or 2x2).
//
// The input size changes per run, so the plan is made on every run
// (O(outH + outW), no allocation) and the weights of a reduced window are
// packed on first use from the full pack and kept (TapWindowPacks).
//
// A region is a band of whole output rows (its output columns are
// contiguous, so it stays one GEMM): each band gets the tap rows alive in
// it, and every band the tap columns alive anywhere. Dropping a tap whose
// input is padding removes only exact-zero products from each sum and keeps
// the order of the others, so results are the same values as with the full
// window (up to the sign of a zero), and deterministic.
#pragma once

#include "kernels/conv.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::kernels::detail {

// Taps rows [r0, r1) x columns [s0, s1) of an R x S window.
struct TapWindow {
  int64_t r0 = 0, r1 = 0, s0 = 0, s1 = 0;
  int64_t rows() const { return r1 - r0; }
  int64_t cols() const { return s1 - s0; }
  bool operator==(const TapWindow &) const = default;
};

// Output rows [oh0, oh1) computed with the taps of `window`.
struct TapBand {
  int64_t oh0 = 0, oh1 = 0;
  TapWindow window;
};

// Bands of one run, covering the output rows in order. One band with the
// full window when no tap is dead.
struct TapPlan {
  static constexpr int kMaxBands = 8;
  int count = 0;
  TapBand bands[kMaxBands];
};

// Live taps [b, e) of one dimension for the output whose window starts at
// input offset i0 (o * stride - pad): the taps t with 0 <= i0 + t * dilation
// < size. b == e when none is.
void liveTaps(int64_t i0, int64_t dilation, int64_t taps, int64_t size, int64_t &b, int64_t &e);

// The plan for shape `s` (N, H, W of this run):
//  1. the column window: the union of the live tap columns of every output
//     column;
//  2. per output row, its live tap rows; runs of rows with the same window
//     become bands, and a row with none (it reads only padding) joins the
//     band before it (or after it, at the top);
//  3. bands only when they save >= 25% of the single window's work (each
//     band is a separate GEMM with its own packed weights) and there are at
//     most kMaxBands; otherwise one band with the union of the rows'
//     windows.
// A window is never empty: an output reading only padding anywhere keeps
// tap (0, 0), whose products are all zero.
TapPlan planTapBands(const ConvShape &s);

// Weights packed for tap windows smaller than the full one, one PackedA per
// group, made on first use from the full packs (element (k, c, r, s) of
// group g read back out of its packed layout). Thread-safe; a returned
// vector lives as long as this object. Windows are few per conv (at most
// one per distinct (band, input size) seen).
class TapWindowPacks {
public:
  const std::vector<PackedA> &get(const TapWindow &window, const ConvShape &s,
                                  const std::vector<PackedA> &full);

private:
  struct Entry {
    TapWindow window;
    std::vector<PackedA> packs;
  };
  std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

} // namespace kiln::kernels::detail
