// Kernel IR lowerings of resampling: Resize (resize_lowering.cpp),
// GridSample, RoiAlign and MaxUnpool (lower/ops.h). Each follows its
// interpreter kernel's arithmetic step by step (interp/kernels/sampling.cpp,
// detection.cpp, pool.cpp), in the same compute type, so the compiled
// results agree with the oracle to rounding.
#include "lower/kernel_expr.h"
#include "lower/ops.h"
#include "lower/resize_lowering.h"

#include <cmath>

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;
constexpr DType F64 = DType::F64, I64 = DType::I64;

Status lowerGridSample(DispatchBuilder &d);
Status lowerRoiAlign(DispatchBuilder &d);
Status lowerMaxUnpool(DispatchBuilder &d);

} // namespace

LowerFn samplingLowering(OpKind op) {
  switch (op) {
  case OpKind::Resize:
    return lowerResize;
  case OpKind::GridSample:
    return lowerGridSample;
  case OpKind::RoiAlign:
    return lowerRoiAlign;
  case OpKind::MaxUnpool:
    return lowerMaxUnpool;
  default:
    return nullptr;
  }
}

namespace {

// The interpreter computes 32-bit and 16-bit floats in f32, everything
// else in f64.
DType computeTypeOf(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ? DType::F32 : F64;
}

// The element of a buffer of type `from` widened to the compute type `c`
// as the interpreter does (16-bit floats through f32).
int widen(KExpr &e, DType c, DType from, int v) {
  if (from == DType::F16 || from == DType::BF16) v = e.cast(DType::F32, from, v), from = DType::F32;
  return e.cast(c, from, v);
}

// ---- GridSample ---------------------------------------------------------------------

enum class GridMode { Nearest, Linear, Cubic };
enum class Padding { Zeros, Border, Reflection };

struct GridForm {
  GridMode mode = GridMode::Linear;
  Padding padding = Padding::Zeros;
  bool alignCorners = false;
};

Expected<GridForm> readGridForm(const Node &node) {
  GridForm f;
  const std::string mode = node.getString("mode");
  if (mode == "bilinear" || mode == "linear")
    f.mode = GridMode::Linear;
  else if (mode == "nearest")
    f.mode = GridMode::Nearest;
  else if (mode == "bicubic" || mode == "cubic")
    f.mode = GridMode::Cubic;
  else
    return makeError("GridSample mode '", mode, "' is unknown");
  const std::string padding = node.getString("padding_mode");
  if (padding == "zeros")
    f.padding = Padding::Zeros;
  else if (padding == "border")
    f.padding = Padding::Border;
  else if (padding == "reflection")
    f.padding = Padding::Reflection;
  else
    return makeError("GridSample padding_mode '", padding, "' is unknown");
  f.alignCorners = node.getInt("align_corners") != 0;
  return f;
}

// x folded into [lo, hi] (the interpreter's reflect), in type c.
int reflect(KExpr &e, DType c, int x, int lo, int hi) {
  const int range = e.sub(c, hi, lo);
  const int twice = e.mul(c, e.f(c, 2), range);
  const int mBelow = e.mod(c, e.sub(c, lo, x), twice);
  const int below =
      e.sel(c, e.lt(c, mBelow, range), e.add(c, lo, mBelow), e.sub(c, hi, e.sub(c, mBelow, range)));
  const int mAbove = e.mod(c, e.sub(c, x, hi), twice);
  const int above =
      e.sel(c, e.lt(c, mAbove, range), e.sub(c, hi, mAbove), e.add(c, lo, e.sub(c, mAbove, range)));
  const int folded = e.sel(c, e.lt(c, x, lo), below, e.sel(c, e.gt(c, x, hi), above, x));
  return e.sel(c, e.le(c, range, e.f(c, 0)), lo, folded);
}

// One spatial axis of the sampled image, as the interpreter's GridAxis.
struct GridAxisK {
  const GridForm *f = nullptr;
  DType c = DType::F32;
  int len = -1, lenC = -1, lo = -1, hi = -1; // len: i64, the rest in c

  // Normalized coordinate -> padded pixel coordinate.
  int source(KExpr &e, int v) const {
    const int one = e.f(c, 1), two = e.f(c, 2);
    int x = f->alignCorners ? e.mul(c, e.div(c, e.add(c, v, one), two), e.sub(c, lenC, one))
                            : e.div(c, e.sub(c, e.mul(c, e.add(c, v, one), lenC), one), two);
    if (f->mode == GridMode::Nearest) x = e.un(Opcode::Round, c, x); // half to even
    const int out = e.lor(e.lt(c, x, lo), e.gt(c, x, hi));
    int padded = x;
    if (f->padding == Padding::Border && f->mode != GridMode::Cubic)
      padded = e.clamp(c, x, e.f(c, 0), e.sub(c, lenC, one));
    else if (f->padding == Padding::Border)
      padded = e.clamp(c, x, e.f(c, -3), e.add(c, lenC, e.f(c, 2)));
    else if (f->padding == Padding::Reflection)
      padded = reflect(e, c, x, lo, hi);
    return e.sel(c, out, padded, x);
  }

  // The pixel of integer tap i (i64) after padding, -1 for a zero tap.
  int pixel(KExpr &e, int i) const {
    const int inside = e.land(e.ge(I64, i, e.i64(0)), e.lt(I64, i, len));
    const int last = e.sub(I64, len, e.i64(1));
    int padded = e.i64(-1);
    if (f->padding == Padding::Border) {
      padded = e.clamp(I64, i, e.i64(0), last);
    } else if (f->padding == Padding::Reflection) {
      const int r = reflect(e, c, e.cast(c, I64, i), lo, hi);
      padded = e.clamp(I64, e.cast(I64, c, r), e.i64(0), last);
    }
    return e.sel(I64, inside, i, padded);
  }

  // The (pixel, weight) taps of coordinate x; a coordinate so far outside
  // that every tap is a zero tap (or NaN) gives pixels of -1.
  void taps(KExpr &e, int x, std::vector<int> &pix, std::vector<int> &w) const {
    pix.clear();
    w.clear();
    const int near = e.le(c, e.un(Opcode::Abs, c, x), e.add(c, lenC, e.f(c, 4)));
    // Taps of a far coordinate are computed from 0 and then dropped.
    x = e.sel(c, near, x, e.f(c, 0));
    auto add = [&](int i, int weight) {
      pix.push_back(e.sel(I64, near, pixel(e, i), e.i64(-1)));
      w.push_back(weight);
    };
    if (f->mode == GridMode::Nearest) {
      add(e.cast(I64, c, x), e.f(c, 1));
      return;
    }
    const int x0 = e.un(Opcode::Floor, c, x), t = e.sub(c, x, x0);
    const int i0 = e.cast(I64, c, x0);
    const int one = e.f(c, 1);
    if (f->mode == GridMode::Linear) {
      add(i0, e.sub(c, one, t));
      add(e.add(I64, i0, e.i64(1)), t);
      return;
    }
    const double a = -0.75; // PyTorch's bicubic constant
    auto k = [&](double v) { return e.f(c, v); };
    // Far taps (distance 1..2): ((a*s - 5a)*s + 8a)*s - 4a; near taps
    // (distance 0..1): ((a+2)*s - (a+3))*s*s + 1.
    auto far = [&](int s) {
      return e.sub(c,
                   e.mul(c,
                         e.add(c, e.mul(c, e.sub(c, e.mul(c, k(a), s), e.mul(c, k(5), k(a))), s),
                               e.mul(c, k(8), k(a))),
                         s),
                   e.mul(c, k(4), k(a)));
    };
    auto nearW = [&](int s) {
      return e.add(
          c,
          e.mul(c, e.mul(c, e.sub(c, e.mul(c, e.add(c, k(a), k(2)), s), e.add(c, k(a), k(3))), s),
                s),
          one);
    };
    const int oneMinusT = e.sub(c, one, t);
    const int w4[4] = {far(e.add(c, t, one)), nearW(t), nearW(oneMinusT), far(e.sub(c, k(2), t))};
    for (int q = 0; q < 4; ++q) add(e.add(I64, i0, e.i64(q - 1)), w4[q]);
  }
};

// One combination of taps, one per spatial axis: valid when no tap is a
// zero tap; its offset in the channel plane and its weight.
struct Combo {
  int valid, offset, weight;
};

// The combinations of the per-axis taps, axis 0 outermost (the
// interpreter's combineTaps order, weights multiplied in that order).
std::vector<Combo> combineTaps(KExpr &e, DType c, const std::vector<std::vector<int>> &pix,
                               const std::vector<std::vector<int>> &wt,
                               const std::vector<int> &planeStride) {
  std::vector<Combo> list = {{e.boolean(true), e.i64(0), e.f(c, 1)}};
  for (size_t a = 0; a < pix.size(); ++a) {
    std::vector<Combo> next;
    for (const Combo &cb : list)
      for (size_t k = 0; k < pix[a].size(); ++k) {
        const int p = pix[a][k];
        const int at = e.mul(I64, e.max(I64, p, e.i64(0)), planeStride[a]);
        next.push_back({e.land(cb.valid, e.ge(I64, p, e.i64(0))), e.add(I64, cb.offset, at),
                        e.mul(c, cb.weight, wt[a][k])});
      }
    list.swap(next);
  }
  return list;
}

// y[n, c, o...] = sum over the tap combinations of the spatial axes of
// weight * x[n, c, pixel...] (combinations with a zero tap dropped). Rows
// of output positions (every output dim but the last) run in parallel;
// each position computes its taps once for all channels.
Status lowerGridSample(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(GridForm f, readGridForm(d.node()));
  const int rank = d.inputRank(0);
  if (rank < 3) return makeError("GridSample needs an X of known rank 3 or more");
  const int r = rank - 2;
  if (d.inputRank(1) != rank)
    return makeError("GridSample grid must have rank ", rank, " for X of rank ", rank);
  const DType xt = d.inputType(0), gt = d.inputType(1);
  if (!isFloat(gt)) return makeError("GridSample grid must be a float tensor");
  if (xt == DType::String) return makeError("GridSample of a string tensor");
  const int64_t perAxis = f.mode == GridMode::Nearest ? 1 : f.mode == GridMode::Linear ? 2 : 4;
  int64_t combos = 1;
  for (int a = 0; a < r; ++a) combos *= perAxis;
  if (combos > 256)
    return makeError("GridSample with ", combos, " taps per output (", r,
                     " spatial dims) is not lowered");
  const DType c = computeTypeOf(xt);

  const SVal n = d.dim(0, 0), channels = d.dim(0, 1);
  d.check(d.eq(d.dim(1, 0), n), "grid batch {} differs from X batch {}", {d.dim(1, 0), n});
  d.check(d.eq(d.dim(1, rank - 1), d.c(r)), "grid's last dim is {}, expected {}",
          {d.dim(1, rank - 1), d.c(r)});
  std::vector<SVal> outDims = {n, channels}, inSpatial, outSpatial;
  for (int a = 0; a < r; ++a) {
    inSpatial.push_back(d.dim(0, a + 2));
    outSpatial.push_back(d.dim(1, a + 1));
    outDims.push_back(outSpatial.back());
  }
  const SVal outPlane = d.product(outSpatial), inPlane = d.product(inSpatial);
  for (int a = 0; a < r; ++a)
    d.check(d.lor(d.ne(inSpatial[size_t(a)], d.c(0)), d.eq(d.numel(1), d.c(0))),
            "cannot sample from an empty spatial axis");
  d.setOutput(0, outDims);

  const SVal lastLen = outSpatial.back();
  const SVal rowsPerBatch = d.product(std::vector<SVal>(outSpatial.begin(), outSpatial.end() - 1));
  const SVal rows = d.mul(n, rowsPerBatch);
  kir::KernelBuilder &b = d.beginKernel(rows, d.mul(lastLen, d.mul(channels, d.c(combos))));
  KExpr e{b};
  std::vector<GridAxisK> axes(static_cast<size_t>(r));
  std::vector<int> planeStride(static_cast<size_t>(r));
  SVal stride = d.c(1);
  for (int a = r - 1; a >= 0; --a) {
    planeStride[size_t(a)] = d.value(stride);
    stride = d.mul(stride, inSpatial[size_t(a)]);
  }
  for (int a = 0; a < r; ++a) {
    GridAxisK &ax = axes[size_t(a)];
    ax.f = &f;
    ax.c = c;
    ax.len = d.value(inSpatial[size_t(a)]);
    ax.lenC = e.cast(c, I64, ax.len);
    ax.lo = f.alignCorners ? e.f(c, 0) : e.f(c, -0.5);
    ax.hi = f.alignCorners ? e.sub(c, ax.lenC, e.f(c, 1)) : e.sub(c, ax.lenC, e.f(c, 0.5));
  }
  const int row = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int batch =
      d.constant(rowsPerBatch) == 1 ? e.var(row) : e.div(I64, e.var(row), d.value(rowsPerBatch));
  const int inRow = e.sub(I64, e.var(row), e.mul(I64, batch, d.value(rowsPerBatch)));
  const int nc = e.mul(I64, batch, d.value(channels));
  const int outBase =
      e.add(I64, e.mul(I64, nc, d.value(outPlane)), e.mul(I64, inRow, d.value(lastLen)));
  const int inBase = e.mul(I64, nc, d.value(inPlane));
  const int w = d.loop(lastLen);
  // The grid lists coordinates innermost axis first.
  kir::Affine gridAt = d.term(d.mul(lastLen, d.c(r)), row);
  gridAt.add(r, -1, w);
  std::vector<std::vector<int>> pix(static_cast<size_t>(r)), wt(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a) {
    const int v = widen(e, c, gt, b.load(d.in(1), kir::Affine(gridAt).add(r - 1 - a, -1, -1)));
    axes[size_t(a)].taps(e, axes[size_t(a)].source(e, v), pix[size_t(a)], wt[size_t(a)]);
  }
  const std::vector<Combo> list = combineTaps(e, c, pix, wt, planeStride);
  const int ch = d.loop(channels);
  kir::Affine planeAt = d.term(inPlane, ch);
  int sum = e.f(c, 0);
  for (const Combo &cb : list) {
    const int x = widen(e, c, xt, b.load(d.in(0), planeAt, e.add(I64, inBase, cb.offset)));
    sum = e.sel(c, cb.valid, e.add(c, sum, e.mul(c, cb.weight, x)), sum);
  }
  kir::Affine outAt = d.term(outPlane, ch);
  outAt.add(1, -1, w);
  b.store(d.out(0), outAt, e.cast(xt, c, sum), outBase);
  b.endLoop(); // channel
  b.endLoop(); // w
  b.endLoop(); // row
  d.endKernel();
  return Status::success();
}

// ---- RoiAlign -----------------------------------------------------------------------

// Sampling grids larger than this per bin side, and more samples or
// outputs than kMaxRoiElements, are errors (the interpreter's limits).
constexpr int64_t kMaxGrid = int64_t{1} << 16;
constexpr double kMaxRoiElements = double(int64_t{1} << 31);

// Opens a loop over [0, count) for an i64 `count` known only in the
// kernel, at most kMaxGrid: four nested loops of 16 guarded by ifs, so a
// short count costs a few dozen comparisons. Returns the index; close
// with closeCountedLoop.
int openCountedLoop(KExpr &e, int count) {
  int base = e.i64(0);
  int index = -1;
  for (int level = 3; level >= 0; --level) {
    const int64_t step = int64_t{1} << (4 * level);
    const int v = e.b.beginLoop(kir::Affine::constant(16));
    index = e.add(I64, base, e.mul(I64, e.var(v), e.i64(step)));
    e.b.beginIf(e.lt(I64, index, count));
    base = index;
  }
  return index;
}
void closeCountedLoop(KExpr &e) {
  for (int level = 0; level < 4; ++level) {
    e.b.endIf();
    e.b.endLoop();
  }
}

struct RoiForm {
  int64_t outH = 1, outW = 1, samplingRatio = 0;
  float spatialScale = 1;
  bool halfPixel = true, maxMode = false;
};

Expected<RoiForm> readRoiForm(const Node &node) {
  RoiForm p;
  p.outH = node.getInt("output_height");
  p.outW = node.getInt("output_width");
  p.samplingRatio = node.getInt("sampling_ratio");
  p.spatialScale = node.getFloat("spatial_scale");
  if (p.outH <= 0 || p.outW <= 0)
    return makeError("RoiAlign output_height and output_width must be positive");
  if (p.samplingRatio < 0) return makeError("RoiAlign sampling_ratio must not be negative");
  if (p.samplingRatio > kMaxGrid) return makeError("RoiAlign sampling_ratio is too large");
  const std::string mode = node.getString("mode");
  if (mode != "avg" && mode != "max") return makeError("RoiAlign mode '", mode, "' is unknown");
  p.maxMode = mode == "max";
  const std::string ctm = node.getString("coordinate_transformation_mode");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return makeError("RoiAlign coordinate_transformation_mode '", ctm, "' is unknown");
  p.halfPixel = ctm == "half_pixel";
  return p;
}

// The grid side of a bin of `len` pixels (c): sampling_ratio, or
// ceil(len) (0 when not positive, -1 when not finite or above kMaxGrid).
int gridSide(KExpr &e, const RoiForm &p, DType c, int len) {
  if (p.samplingRatio > 0) return e.i64(p.samplingRatio);
  const int side = e.un(Opcode::Ceil, F64, e.cast(F64, c, len));
  const int ok = e.le(F64, side, e.f(F64, double(kMaxGrid)));
  const int positive = e.gt(F64, side, e.f(F64, 0));
  return e.sel(I64, ok, e.sel(I64, positive, e.cast(I64, F64, side), e.i64(0)), e.i64(-1));
}

// One bilinear sample at (y, x) of a height x width plane (the
// interpreter's bilinearSample): four plane offsets and weights, all 0 for a
// sample outside the feature map.
struct Sample {
  int pos[4], w[4];
};
Sample bilinear(KExpr &e, DType c, int y, int x, int height, int width) {
  const int hC = e.cast(c, I64, height), wC = e.cast(c, I64, width);
  const int zero = e.f(c, 0), one = e.f(c, 1), minusOne = e.f(c, -1);
  const int inside = e.land(e.land(e.ge(c, y, minusOne), e.le(c, y, hC)),
                            e.land(e.ge(c, x, minusOne), e.le(c, x, wC)));
  y = e.max(c, y, zero);
  x = e.max(c, x, zero);
  auto axis = [&](int &v, int len, int &low, int &high) {
    const int last = e.sub(I64, len, e.i64(1));
    low = e.cast(I64, c, v);
    const int clamped = e.ge(I64, low, last);
    low = e.sel(I64, clamped, last, low);
    high = e.sel(I64, clamped, last, e.add(I64, low, e.i64(1)));
    v = e.sel(c, clamped, e.cast(c, I64, last), v);
  };
  int yLow, yHigh, xLow, xHigh;
  axis(y, height, yLow, yHigh);
  axis(x, width, xLow, xHigh);
  const int ly = e.sub(c, y, e.cast(c, I64, yLow)), lx = e.sub(c, x, e.cast(c, I64, xLow));
  const int hy = e.sub(c, one, ly), hx = e.sub(c, one, lx);
  auto at = [&](int yy, int xx) {
    return e.sel(I64, inside, e.add(I64, e.mul(I64, yy, width), xx), e.i64(0));
  };
  auto weight = [&](int a, int b2) { return e.sel(c, inside, e.mul(c, a, b2), zero); };
  return Sample{{at(yLow, xLow), at(yLow, xHigh), at(yHigh, xLow), at(yHigh, xHigh)},
                {weight(hy, hx), weight(hy, lx), weight(ly, hx), weight(ly, lx)}};
}

// One roi's sampling geometry in the compute type (the interpreter's
// roiSamples): where its bins start, their size and sampling grid.
struct RoiGeometry {
  int startH, startW, binH, binW; // c
  int gridH, gridW;               // i64
  int ok;                         // bool: a valid batch index, finite, a grid within limits
};

RoiGeometry roiGeometry(DispatchBuilder &d, KExpr &e, const RoiForm &p, DType c, int roi, int bi,
                        int badBatch, int badRoi, int badGrid) {
  kir::KernelBuilder &b = e.b;
  const int batchOk = e.land(e.ge(I64, bi, e.i64(0)), e.lt(I64, bi, d.value(d.dim(0, 0))));
  d.raise(e.lnot(batchOk), badBatch);
  int v[4];
  int finite = e.boolean(true);
  for (int k = 0; k < 4; ++k) {
    v[k] = widen(e, c, d.inputType(1),
                 b.load(d.in(1), kir::Affine::constant(k), e.mul(I64, roi, e.i64(4))));
    finite = e.land(finite, e.lt(c, e.un(Opcode::Abs, c, v[k]), e.f(c, INFINITY)));
  }
  d.raise(e.lnot(finite), badRoi);
  RoiGeometry g;
  const int scale = e.f(c, p.spatialScale), offset = e.f(c, p.halfPixel ? 0.5 : 0.0);
  g.startW = e.sub(c, e.mul(c, v[0], scale), offset);
  g.startH = e.sub(c, e.mul(c, v[1], scale), offset);
  int roiW = e.sub(c, e.sub(c, e.mul(c, v[2], scale), offset), g.startW);
  int roiH = e.sub(c, e.sub(c, e.mul(c, v[3], scale), offset), g.startH);
  if (!p.halfPixel) { // the legacy mode forces malformed rois to 1x1
    roiW = e.max(c, roiW, e.f(c, 1));
    roiH = e.max(c, roiH, e.f(c, 1));
  }
  g.binH = e.div(c, roiH, e.f(c, double(p.outH)));
  g.binW = e.div(c, roiW, e.f(c, double(p.outW)));
  g.gridH = gridSide(e, p, c, g.binH);
  g.gridW = gridSide(e, p, c, g.binW);
  const int samples = e.mul(F64, e.f(F64, double(p.outH * p.outW)),
                            e.mul(F64, e.cast(F64, I64, g.gridH), e.cast(F64, I64, g.gridW)));
  const int gridOk = e.land(e.land(e.ge(I64, g.gridH, e.i64(0)), e.ge(I64, g.gridW, e.i64(0))),
                            e.le(F64, samples, e.f(F64, kMaxRoiElements)));
  d.raise(e.lnot(gridOk), badGrid);
  g.ok = e.land(e.land(batchOk, finite), gridOk);
  return g;
}

// Rows of bins, (roi, ph), in parallel: each computes its roi's geometry,
// then per bin the samples of its sampling grid, each sample once for all
// channels (the innermost loop), pooled by average or max per channel in
// scratch in the interpreter's sample order (poolBin), then stored.
Status lowerRoiAlign(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(RoiForm p, readRoiForm(d.node()));
  if (d.inputRank(0) != 4) return makeError("RoiAlign needs an X of rank 4");
  if (d.inputRank(1) != 2) return makeError("RoiAlign rois must have rank 2");
  const DType xt = d.inputType(0), it = d.inputType(2);
  if (!isFloat(xt) || !isFloat(d.inputType(1)))
    return makeError("RoiAlign X and rois must be float tensors");
  if (!isInt(it)) return makeError("RoiAlign batch_indices must be an integer tensor");
  const DType c = xt == DType::F64 ? F64 : DType::F32;

  const SVal numRois = d.dim(1, 0), channels = d.dim(0, 1);
  const SVal height = d.dim(0, 2), width = d.dim(0, 3);
  d.check(d.eq(d.dim(1, 1), d.c(4)), "rois must have shape [num_rois, 4]");
  if (d.inputRank(2) != 1) return makeError("RoiAlign batch_indices must have rank 1");
  d.check(d.eq(d.dim(2, 0), numRois), "batch_indices must have shape [{}]", {numRois});
  d.check(d.land(d.lt(d.c(0), height), d.lt(d.c(0), width)),
          "X must have a non-empty spatial plane");
  const SVal bins = d.c(p.outH * p.outW);
  const SVal outSize = d.mul(d.mul(numRois, channels), bins);
  d.check(d.le(outSize, d.c(int64_t{1} << 31)), "output of {} elements is too large", {outSize});
  d.setOutput(0, {numRois, channels, d.c(p.outH), d.c(p.outW)});
  const int pooled = d.addScratch(c, outSize); // per output element, in the compute type
  const int badBatch = d.statusCode("a batch index is outside [0, batch)");
  const int badRoi = d.statusCode("a roi is not finite");
  const int badGrid = d.statusCode("the sampling grid of a roi is too large (more than " +
                                   std::to_string(kMaxGrid) + " per side or 2^31 samples)");

  const SVal rows = d.mul(numRois, d.c(p.outH));
  kir::KernelBuilder &b = d.beginKernel(rows, d.mul(channels, d.c(p.outW)));
  KExpr e{b};
  const int pr = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int cs = d.value(channels);
  const int roi = e.div(I64, e.var(pr), e.i64(p.outH));
  const int ph = e.sub(I64, e.var(pr), e.mul(I64, roi, e.i64(p.outH)));
  const int bi = castToIndex(b, it, b.load(d.in(2), {}, roi));
  const RoiGeometry g = roiGeometry(d, e, p, c, roi, bi, badBatch, badRoi, badGrid);
  const int startH = g.startH, startW = g.startW, binH = g.binH, binW = g.binW;
  const int gridH = g.gridH, gridW = g.gridW;
  b.beginIf(g.ok);
  {
    const int hw = e.mul(I64, d.value(height), d.value(width));
    const int planes = e.mul(I64, e.mul(I64, bi, cs), hw); // x[bi, 0]
    const int gridHC = e.cast(c, I64, gridH), gridWC = e.cast(c, I64, gridW);
    const int count = e.mul(I64, gridH, gridW);
    const int half = e.f(c, 0.5);
    // y[roi, ch, ph, pw] at ((roi * C + ch) * outH + ph) * outW + pw
    const int outRow =
        e.mul(I64, e.add(I64, e.mul(I64, e.mul(I64, roi, cs), e.i64(p.outH)), ph), e.i64(p.outW));
    const int pw = b.beginLoop(kir::Affine::constant(p.outW));
    const int binAt = e.add(I64, outRow, e.var(pw)); // channel 0's output element
    auto chLoop = [&] { return d.loop(channels, {Schedule::Kind::Vector, 8}); };
    auto outAt = [&](int ch) { return kir::Affine{}.add(p.outH * p.outW, -1, ch); };
    // y0 = startH + ph * binH, x0 = startW + pw * binW
    const int y0 = e.add(c, startH, e.mul(c, e.cast(c, I64, ph), binH));
    const int x0 = e.add(c, startW, e.mul(c, e.cast(c, I64, e.var(pw)), binW));
    auto coordLoop = [&](int grid) {
      if (p.samplingRatio > 0) return e.var(b.beginLoop(kir::Affine::constant(p.samplingRatio)));
      return openCountedLoop(e, grid);
    };
    auto closeLoop = [&] {
      if (p.samplingRatio > 0)
        b.endLoop();
      else
        closeCountedLoop(e);
    };
    int ch = chLoop();
    b.store(d.scratch(pooled), outAt(ch), e.f(c, 0), binAt);
    b.endLoop();
    const int iy = coordLoop(gridH);
    // y = y0 + (iy + 0.5) * binH / gridH (x likewise)
    const int y =
        e.add(c, y0, e.div(c, e.mul(c, e.add(c, e.cast(c, I64, iy), half), binH), gridHC));
    const int ix = coordLoop(gridW);
    const int x =
        e.add(c, x0, e.div(c, e.mul(c, e.add(c, e.cast(c, I64, ix), half), binW), gridWC));
    const Sample s = bilinear(e, c, y, x, d.value(height), d.value(width));
    const int first = e.land(e.eq(I64, iy, e.i64(0)), e.eq(I64, ix, e.i64(0)));
    ch = chLoop();
    {
      const kir::Affine plane = d.term(d.mul(height, width), ch);
      int terms[4];
      for (int q = 0; q < 4; ++q)
        terms[q] =
            e.mul(c, s.w[q], widen(e, c, xt, b.load(d.in(0), plane, e.add(I64, planes, s.pos[q]))));
      const int acc = b.load(d.scratch(pooled), outAt(ch), binAt);
      int next;
      if (!p.maxMode) {
        next = e.add(c, acc, e.add(c, e.add(c, e.add(c, terms[0], terms[1]), terms[2]), terms[3]));
      } else {
        // The largest weighted corner of each sample, as the interpreter.
        int m = terms[0];
        for (int q = 1; q < 4; ++q) m = e.max(c, m, terms[q]);
        next = e.sel(c, first, m, e.max(c, acc, m));
      }
      b.store(d.scratch(pooled), outAt(ch), next, binAt);
    }
    b.endLoop(); // ch
    closeLoop(); // ix
    closeLoop(); // iy
    const int divisor = e.cast(c, I64, e.max(I64, count, e.i64(1)));
    ch = chLoop();
    int result = b.load(d.scratch(pooled), outAt(ch), binAt);
    if (!p.maxMode) result = e.div(c, result, divisor);
    b.store(d.out(0), outAt(ch), e.cast(xt, c, result), binAt);
    b.endLoop(); // ch
    b.endLoop(); // pw
  }
  b.endIf();
  b.endLoop(); // pr
  d.endKernel();
  return Status::success();
}

// ---- MaxUnpool ----------------------------------------------------------------------

// Y = zeros of the unpooled shape (or output_shape), then Y[I[i]] = X[i]
// in order (a later duplicate index wins, as in the interpreter), each
// flat index re-addressed by its coordinates when output_shape differs.
Status lowerMaxUnpool(DispatchBuilder &d) {
  const int rank = d.inputRank(0);
  if (rank < 3) return makeError("MaxUnpool needs an X of known rank 3 or more");
  const size_t n = size_t(rank - 2);
  const Node &node = d.node();
  const std::vector<int64_t> kernel = node.getInts("kernel_shape");
  if (kernel.size() != n)
    return makeError("MaxUnpool kernel_shape has ", kernel.size(), " values, expected ", n);
  std::vector<int64_t> strides = node.getInts("strides"), pads = node.getInts("pads");
  if (!node.hasAttr("strides")) strides.assign(n, 1);
  if (!node.hasAttr("pads")) pads.assign(2 * n, 0);
  if (strides.size() != n || pads.size() != 2 * n)
    return makeError("MaxUnpool strides or pads have the wrong length");
  if (!isInt(d.inputType(1))) return makeError("MaxUnpool indices must be an integer tensor");
  const DType xt = d.inputType(0);

  std::vector<SVal> from = {d.dim(0, 0), d.dim(0, 1)};
  for (size_t a = 0; a < n; ++a) {
    const SVal len = d.add(d.mul(d.sub(d.dim(0, int(a) + 2), d.c(1)), d.c(strides[a])),
                           d.c(kernel[a] - pads[a] - pads[a + n]));
    d.check(d.le(d.c(0), len), "the unpooled shape is negative");
    from.push_back(len);
  }
  if (d.inputRank(1) != rank) return makeError("MaxUnpool indices must have the rank of X");
  for (int a = 0; a < rank; ++a)
    d.check(d.eq(d.dim(1, a), d.dim(0, a)), "indices differ from X in dim {}", {d.c(a)});
  std::vector<SVal> shape = from;
  if (d.input(2)) {
    d.check(d.eq(d.numel(2), d.c(rank)), "output_shape has {} values, expected {}",
            {d.numel(2), d.c(rank)});
    for (int a = 0; a < rank; ++a) {
      shape[size_t(a)] = d.elem(2, a);
      d.check(d.le(d.c(0), shape[size_t(a)]), "output_shape has a negative dim");
    }
  }
  d.setOutput(0, shape);
  const int badIndex = d.statusCode("an index is out of range for the unpooled shape");
  const int outsideShape = d.statusCode("an index falls outside output_shape");

  // 1. zeros
  const SVal rows = d.product(std::vector<SVal>(shape.begin(), shape.end() - 1));
  const SVal last = shape.back();
  {
    kir::KernelBuilder &b = d.beginKernel(rows, last);
    const int r = d.loop(rows, {Schedule::Kind::Parallel, 1});
    const int j = d.loop(last, {Schedule::Kind::Vector, 8});
    kir::Affine at = d.term(last, r);
    at.add(1, -1, j);
    b.store(d.out(0), at, b.constant(xt, 0));
    b.endLoop();
    b.endLoop();
    d.endKernel();
  }
  // 2. the scatter, serial so duplicates resolve in order
  kir::KernelBuilder &b = d.beginKernel();
  KExpr e{b};
  const int i = d.loop(d.numel(0));
  const kir::Affine at = kir::Affine{}.add(1, -1, i);
  const int index = castToIndex(b, d.inputType(1), b.load(d.in(1), at));
  const int inRange =
      e.land(e.ge(I64, index, e.i64(0)), e.lt(I64, index, d.value(d.product(from))));
  d.raise(e.lnot(inRange), badIndex);
  int rest = index, flat = e.i64(0), fits = e.boolean(true);
  SVal stride = d.c(1);
  for (int a = rank - 1; a >= 0; --a) {
    const int len = d.value(from[size_t(a)]);
    const int coord = e.mod(I64, rest, len);
    rest = e.div(I64, rest, len);
    fits = e.land(fits, e.lt(I64, coord, d.value(shape[size_t(a)])));
    flat = e.add(I64, flat, e.mul(I64, coord, d.value(stride)));
    stride = d.mul(stride, shape[size_t(a)]);
  }
  d.raise(e.land(inRange, e.lnot(fits)), outsideShape);
  b.beginIf(e.land(inRange, fits));
  b.store(d.out(0), {}, b.load(d.in(0), at), flat);
  b.endIf();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

} // namespace
} // namespace kiln::lower
