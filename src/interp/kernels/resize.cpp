// Interpreter kernel: Resize (also Upsample and Resize-10, which the ONNX
// importer rewrites into Resize with asymmetric coordinates and floor
// rounding).
//
// The work is split per axis. For each resized axis and each output index the
// kernel computes the source coordinate (coordinate_transformation_mode) and
// from it a short list of taps: input indices with weights (one tap for
// nearest, two for linear, four for cubic, more for antialiased downsampling).
// Indices past the edges are clamped (edge padding, as the reference does);
// exclude_outside zeroes and renormalizes their weights instead.
//   - nearest: a pure gather, so every dtype is copied exactly;
//   - linear / cubic: separable passes, one axis at a time from the last axis
//     to the first (the order in which the ONNX reference nests its 1-d
//     interpolations), the innermost loop running over contiguous elements.
// tf_crop_and_resize writes extrapolation_value wherever the source
// coordinate of any axis falls outside the input.
//
// The output length of an axis is floor(length * scale) when scales are given
// (like ONNX Runtime and the ONNX reference, the roi does not enter it), or
// the requested size, adjusted by keep_aspect_ratio_policy. The coordinate
// transforms use length_resized = length * scale as a real number, as the
// ONNX reference (and the conformance data made with it) does. ONNX Runtime
// differs in two corners: it uses the integral output length there (visible
// when length * scale is not an integer: align_corners, pytorch_half_pixel,
// tf_crop_and_resize), and it skips a tf_crop_and_resize whose scales are
// all 1 even when the roi crops.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>
#include <limits>

namespace kiln {

namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn, // opset 11-12 only
  TfCropAndResize
};
enum class Rounding { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeParams {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  Rounding rounding = Rounding::RoundPreferFloor;
  double cubicA = -0.75;
  bool excludeOutside = false, antialias = false;
  double extrapolation = 0;
};

// One axis: input and output lengths, the scale, the real-valued resized
// length the coordinate transforms use (inLen * scale; exactly outLen when
// sizes are given without keep_aspect_ratio_policy) and the roi (used by
// tf_crop_and_resize only).
struct AxisSpec {
  int64_t inLen = 0, outLen = 0;
  double scale = 1, resized = 0;
  double roiStart = 0, roiEnd = 1;
};

// The taps of one output index on one axis. `outside`: the source
// coordinate is outside the input (tf_crop_and_resize extrapolates).
struct Taps {
  std::vector<int64_t> index;
  std::vector<double> weight;
  bool outside = false;
};

Expected<ResizeParams> readParams(const KernelContext &ctx) {
  const Node &node = ctx.node();
  ResizeParams p;
  std::string mode = node.getString("mode");
  if (mode == "nearest")
    p.mode = Mode::Nearest;
  else if (mode == "linear" || mode == "bilinear" || mode == "trilinear")
    p.mode = Mode::Linear;
  else if (mode == "cubic" || mode == "bicubic")
    p.mode = Mode::Cubic;
  else
    return ctx.error("unknown mode '", mode, "'");

  static const std::pair<const char *, Coord> coords[] = {
      {"half_pixel", Coord::HalfPixel},
      {"half_pixel_symmetric", Coord::HalfPixelSymmetric},
      {"pytorch_half_pixel", Coord::PytorchHalfPixel},
      {"align_corners", Coord::AlignCorners},
      {"asymmetric", Coord::Asymmetric},
      {"tf_half_pixel_for_nn", Coord::TfHalfPixelForNn},
      {"tf_crop_and_resize", Coord::TfCropAndResize}};
  std::string coord = node.getString("coordinate_transformation_mode");
  auto c = std::find_if(std::begin(coords), std::end(coords),
                        [&](const auto &e) { return coord == e.first; });
  if (c == std::end(coords))
    return ctx.error("unknown coordinate_transformation_mode '", coord, "'");
  p.coord = c->second;

  std::string rounding = node.getString("nearest_mode");
  if (rounding == "round_prefer_floor")
    p.rounding = Rounding::RoundPreferFloor;
  else if (rounding == "round_prefer_ceil")
    p.rounding = Rounding::RoundPreferCeil;
  else if (rounding == "floor")
    p.rounding = Rounding::Floor;
  else if (rounding == "ceil")
    p.rounding = Rounding::Ceil;
  else
    return ctx.error("unknown nearest_mode '", rounding, "'");

  p.cubicA = node.getFloat("cubic_coeff_a");
  p.excludeOutside = node.getInt("exclude_outside") != 0;
  p.antialias = node.getInt("antialias") != 0;
  p.extrapolation = node.getFloat("extrapolation_value");
  return p;
}

// ---- output sizes -----------------------------------------------------------

// Longest output axis accepted: anything longer is a corrupt scale, not an
// image.
constexpr double kMaxLength = 1LL << 40;

// True when optional input `slot` is given and not empty.
bool given(const KernelContext &ctx, int slot) {
  return ctx.has(slot) && ctx.in(slot).numel() > 0;
}

// The resized axes (the axes attribute, or all of them).
Expected<std::vector<int64_t>> readAxes(const KernelContext &ctx, int64_t rank) {
  std::vector<int64_t> axes = ctx.node().getInts("axes");
  if (!ctx.node().hasAttr("axes")) {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    return axes;
  }
  std::vector<bool> seen(rank, false);
  for (int64_t &a : axes) {
    KILN_ASSIGN_OR_RETURN(a, resolveAxis(ctx, a, rank));
    if (seen[a]) return ctx.error("axis ", a, " appears twice in axes");
    seen[a] = true;
  }
  return axes;
}

// Fills scale and outLen of the resized axes from the scales or sizes input.
Status readScalesOrSizes(const KernelContext &ctx, const std::vector<int64_t> &axes,
                         std::vector<AxisSpec> &spec) {
  bool hasScales = given(ctx, 2), hasSizes = given(ctx, 3);
  if (hasScales == hasSizes) return ctx.error("exactly one of scales and sizes must be given");
  size_t n = axes.size();
  const Tensor &t = ctx.in(hasScales ? 2 : 3);
  if (static_cast<size_t>(t.numel()) != n)
    return ctx.error(hasScales ? "scales" : "sizes", " has ", t.numel(), " values, expected ", n);
  if (hasScales) {
    if (!isFloat(t.dtype())) return ctx.error("scales must be a float tensor");
    for (size_t i = 0; i < n; ++i) {
      AxisSpec &s = spec[axes[i]];
      // Scales are float32 in ONNX; the product is taken in double.
      s.scale = static_cast<double>(static_cast<float>(t.getDouble(i)));
      if (!(s.scale > 0) || !std::isfinite(s.scale))
        return ctx.error("scales must be finite and positive, got ", s.scale);
      double len = std::floor(static_cast<double>(s.inLen) * s.scale);
      // Checked before the cast: a NaN or out-of-range double to int64 is UB.
      if (!(len >= 0 && len <= static_cast<double>(kMaxLength)))
        return ctx.error("scale ", s.scale, " makes axis ", axes[i], " too long");
      s.outLen = static_cast<int64_t>(len);
      s.resized = static_cast<double>(s.inLen) * s.scale;
    }
    return Status::success();
  }
  if (!isInt(t.dtype())) return ctx.error("sizes must be an integer tensor");
  std::vector<int64_t> sizes = toInt64s(t);
  for (size_t i = 0; i < n; ++i) {
    const AxisSpec &s = spec[axes[i]];
    if (sizes[i] < 0) return ctx.error("sizes must not be negative, got ", sizes[i]);
    if (s.inLen == 0 && sizes[i] > 0)
      return ctx.error("cannot resize empty axis ", axes[i], " to ", sizes[i]);
  }
  std::string policy = ctx.node().getString("keep_aspect_ratio_policy");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return ctx.error("unknown keep_aspect_ratio_policy '", policy, "'");
  double common = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
  for (size_t i = 0; i < n; ++i) {
    AxisSpec &s = spec[axes[i]];
    s.scale = s.inLen == 0 ? 1.0 : static_cast<double>(sizes[i]) / static_cast<double>(s.inLen);
    s.outLen = sizes[i];
    s.resized = static_cast<double>(sizes[i]);
    common = policy == "not_larger" ? std::min(common, s.scale) : std::max(common, s.scale);
  }
  if (policy == "stretch") return Status::success();
  // One scale for every resized axis; lengths round half up.
  for (int64_t a : axes) {
    AxisSpec &s = spec[a];
    s.scale = common;
    double len = std::floor(common * static_cast<double>(s.inLen) + 0.5);
    if (!(len >= 0 && len <= static_cast<double>(kMaxLength)))
      return ctx.error("sizes make axis ", a, " too long");
    s.outLen = static_cast<int64_t>(len);
    s.resized = common * static_cast<double>(s.inLen);
  }
  return Status::success();
}

// The roi of each resized axis (tf_crop_and_resize only).
Status readRoi(const KernelContext &ctx, const std::vector<int64_t> &axes,
               std::vector<AxisSpec> &spec) {
  if (!given(ctx, 1)) return ctx.error("tf_crop_and_resize needs the roi input");
  const Tensor &roi = ctx.in(1);
  size_t n = axes.size();
  if (static_cast<size_t>(roi.numel()) != 2 * n)
    return ctx.error("roi has ", roi.numel(), " values, expected ", 2 * n);
  for (size_t i = 0; i < n; ++i) {
    spec[axes[i]].roiStart = roi.getDouble(i);
    spec[axes[i]].roiEnd = roi.getDouble(n + i);
  }
  return Status::success();
}

// ---- taps -------------------------------------------------------------------

// The source coordinate of output index x; sets `outside` for
// tf_crop_and_resize coordinates outside the input.
double sourceCoord(Coord coord, const AxisSpec &s, double x, bool &outside) {
  double inLen = static_cast<double>(s.inLen), resized = s.resized;
  outside = false;
  switch (coord) {
  case Coord::HalfPixel:
    return (x + 0.5) / s.scale - 0.5;
  case Coord::HalfPixelSymmetric: {
    // Centers the (possibly truncated) output canvas on the input.
    double adjustment = static_cast<double>(s.outLen) / resized;
    double offset = inLen / 2 * (1 - adjustment);
    return offset + (x + 0.5) / s.scale - 0.5;
  }
  case Coord::PytorchHalfPixel:
    return resized > 1 ? (x + 0.5) / s.scale - 0.5 : 0.0;
  case Coord::AlignCorners:
    return resized == 1 ? 0.0 : x * (inLen - 1) / (resized - 1);
  case Coord::Asymmetric:
    return x / s.scale;
  case Coord::TfHalfPixelForNn:
    return (x + 0.5) / s.scale;
  case Coord::TfCropAndResize: {
    double span = (s.roiEnd - s.roiStart) * (inLen - 1);
    double v = resized > 1 ? s.roiStart * (inLen - 1) + x * span / (resized - 1)
                           : s.roiStart * (inLen - 1) + span / 2;
    outside = !(v >= 0 && v <= inLen - 1); // NaN (a NaN roi) is outside too
    return v;
  }
  }
  return x;
}

int64_t roundNearest(Rounding r, double v) {
  switch (r) {
  case Rounding::RoundPreferFloor:
    return static_cast<int64_t>(std::ceil(v - 0.5));
  case Rounding::RoundPreferCeil:
    return static_cast<int64_t>(std::floor(v + 0.5));
  case Rounding::Floor:
    return static_cast<int64_t>(std::floor(v));
  case Rounding::Ceil:
    return static_cast<int64_t>(std::ceil(v));
  }
  return 0;
}

// Keys' cubic convolution kernel with parameter a.
double cubicKernel(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// Interpolation weights of the input indices base + first, base + first + 1,
// ... around a coordinate base + ratio, ratio in (0, 1]. Antialiasing
// stretches the kernel by 1 / scale when downsampling (and normalizes).
int64_t filterWeights(const ResizeParams &p, double ratio, double scale, std::vector<double> &w) {
  w.clear();
  bool stretch = p.antialias && scale < 1;
  double s = stretch ? scale : 1.0;
  if (p.mode == Mode::Linear) {
    int64_t first = stretch ? static_cast<int64_t>(std::floor(-1 / s)) + 1 : 0;
    for (int64_t i = first; i <= 1 - first; ++i)
      w.push_back(stretch ? std::clamp(1 - std::abs((i - ratio) * s), 0.0, 1.0)
                          : (i == 0 ? 1 - ratio : ratio));
    if (stretch) {
      double sum = 0;
      for (double v : w) sum += v;
      for (double &v : w) v /= sum;
    }
    return first;
  }
  int64_t first = stretch ? static_cast<int64_t>(std::floor(-2 / s)) + 1 : -1;
  for (int64_t i = first; i <= 1 - first; ++i)
    w.push_back(cubicKernel(s * (static_cast<double>(i) - ratio), p.cubicA));
  if (stretch) {
    double sum = 0;
    for (double v : w) sum += v;
    for (double &v : w) v /= sum;
  }
  return first;
}

// The taps of every output index of one axis.
std::vector<Taps> axisTaps(const ResizeParams &p, const AxisSpec &s) {
  std::vector<Taps> taps(s.outLen);
  std::vector<double> w;
  for (int64_t o = 0; o < s.outLen; ++o) {
    Taps &t = taps[o];
    double x = sourceCoord(p.coord, s, static_cast<double>(o), t.outside);
    if (t.outside) continue;
    if (p.mode == Mode::Nearest) {
      t.index.push_back(std::clamp<int64_t>(roundNearest(p.rounding, x), 0, s.inLen - 1));
      t.weight.push_back(1.0);
      continue;
    }
    // The reference prefers the left neighbour: an integral x is base + 1.
    double base = std::ceil(x) - 1, ratio = x - base;
    int64_t first = filterWeights(p, ratio, s.scale, w);
    double kept = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      int64_t idx = static_cast<int64_t>(base) + first + static_cast<int64_t>(k);
      bool inside = idx >= 0 && idx < s.inLen;
      if (p.excludeOutside && !inside) continue;
      t.index.push_back(std::clamp<int64_t>(idx, 0, s.inLen - 1));
      t.weight.push_back(w[k]);
      kept += w[k];
    }
    if (p.excludeOutside && kept != 0)
      for (double &v : t.weight) v /= kept;
  }
  return taps;
}

// True when the taps copy the input unchanged (a scale-1 axis).
bool isIdentity(const std::vector<Taps> &taps, int64_t inLen) {
  if (static_cast<int64_t>(taps.size()) != inLen) return false;
  for (int64_t o = 0; o < inLen; ++o) {
    const Taps &t = taps[o];
    if (t.outside) return false;
    for (size_t k = 0; k < t.index.size(); ++k)
      if (t.weight[k] != (t.index[k] == o ? 1.0 : 0.0)) return false;
  }
  return true;
}

// ---- the passes -------------------------------------------------------------

// Resamples axis `axis` of a [outer, inLen, inner] view of src into
// [outer, outLen, inner].
template <class A>
std::vector<A> resampleAxis(const std::vector<A> &src, const Shape64 &shape, size_t axis,
                            const std::vector<Taps> &taps) {
  int64_t outer = 1, inner = 1, inLen = shape[axis], outLen = static_cast<int64_t>(taps.size());
  for (size_t a = 0; a < axis; ++a) outer *= shape[a];
  for (size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
  std::vector<A> dst(outer * outLen * inner, A(0));
  for (int64_t n = 0; n < outer; ++n)
    for (int64_t o = 0; o < outLen; ++o) {
      A *d = &dst[(n * outLen + o) * inner];
      const Taps &t = taps[o];
      for (size_t k = 0; k < t.index.size(); ++k) {
        if (t.weight[k] == 0) continue;
        const A *s = &src[(n * inLen + t.index[k]) * inner];
        A w = static_cast<A>(t.weight[k]);
        for (int64_t i = 0; i < inner; ++i) d[i] += w * s[i];
      }
    }
  return dst;
}

// Visits every output element whose source lies outside the input on some
// axis (tf_crop_and_resize) and calls f(flat index).
template <class F>
void forEachOutside(const std::vector<std::vector<Taps>> &taps, const Shape64 &out, F &&f) {
  bool any = false;
  for (const auto &axis : taps)
    for (const Taps &t : axis) any |= t.outside;
  if (!any || numelOf(out) == 0) return;
  std::vector<int64_t> idx(out.size(), 0);
  int64_t flat = 0;
  do {
    bool outside = false;
    for (size_t a = 0; a < out.size(); ++a) outside |= taps[a][idx[a]].outside;
    if (outside) f(flat);
    ++flat;
  } while (nextIndex(idx, out));
}

// Linear and cubic modes: separable passes in accumulator type A.
template <class T, class A>
Tensor interpolate(const Tensor &x, const std::vector<std::vector<Taps>> &taps,
                   const Shape64 &outShape, double extrapolation) {
  std::vector<A> cur(x.numel());
  const T *src = x.data<T>();
  for (int64_t i = 0; i < x.numel(); ++i)
    cur[i] = static_cast<A>(static_cast<ComputeType<T>>(src[i]));
  Shape64 shape = x.shape();
  for (size_t a = shape.size(); a-- > 0;) {
    if (isIdentity(taps[a], shape[a])) continue;
    cur = resampleAxis(cur, shape, a, taps[a]);
    shape[a] = outShape[a];
  }
  forEachOutside(taps, outShape, [&](int64_t i) { cur[i] = static_cast<A>(extrapolation); });
  Tensor out(x.dtype(), outShape);
  T *dst = out.data<T>();
  for (size_t i = 0; i < cur.size(); ++i) dst[i] = storeComputed<T>(cur[i]);
  return out;
}

// Nearest mode: a gather of whole elements (exact for every dtype).
template <class T>
Tensor gatherNearest(const Tensor &x, const std::vector<std::vector<Taps>> &taps,
                     const Shape64 &outShape, double extrapolation) {
  Tensor out(x.dtype(), outShape);
  int64_t n = out.numel();
  if (n == 0) return out;
  Shape64 strides = stridesOf(x.shape());
  const T *src = x.data<T>();
  T *dst = out.data<T>();
  size_t last = outShape.size() - 1;
  int64_t rowLen = outShape[last];
  std::vector<int64_t> idx(outShape.size(), 0);
  for (int64_t row = 0; row < n; row += rowLen) {
    // Outside taps have no index; forEachOutside overwrites their elements.
    int64_t base = 0;
    for (size_t a = 0; a < last; ++a)
      if (!taps[a][idx[a]].outside) base += taps[a][idx[a]].index[0] * strides[a];
    for (int64_t o = 0; o < rowLen; ++o) {
      const Taps &t = taps[last][o];
      dst[row + o] = t.outside ? T{} : src[base + t.index[0] * strides[last]];
    }
    idx[last] = rowLen - 1;
    nextIndex(idx, outShape);
  }
  forEachOutside(taps, outShape, [&](int64_t i) { dst[i] = storeComputed<T>(extrapolation); });
  return out;
}

Status resizeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(ResizeParams p, readParams(ctx));
  int64_t rank = x.rank();
  if (rank == 0) {
    ctx.setOutput(0, x);
    return Status::success();
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, readAxes(ctx, rank));
  std::vector<AxisSpec> spec(rank);
  for (int64_t a = 0; a < rank; ++a) {
    spec[a].inLen = spec[a].outLen = x.dim(a);
    spec[a].resized = static_cast<double>(x.dim(a));
  }
  KILN_RETURN_IF_ERROR(readScalesOrSizes(ctx, axes, spec));
  if (p.coord == Coord::TfCropAndResize) KILN_RETURN_IF_ERROR(readRoi(ctx, axes, spec));

  Shape64 outShape(rank);
  std::vector<std::vector<Taps>> taps(rank);
  for (int64_t a = 0; a < rank; ++a) {
    outShape[a] = spec[a].outLen;
    taps[a] = axisTaps(p, spec[a]);
  }
  bool f64 = ctx.options().accumulateF64;
  Tensor out;
  Status st = dispatchNumeric(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (p.mode == Mode::Nearest)
      out = gatherNearest<T>(x, taps, outShape, p.extrapolation);
    else if (f64 || !(std::is_same_v<T, float> || kIsHalfLike<T>))
      out = interpolate<T, double>(x, taps, outShape, p.extrapolation);
    else
      out = interpolate<T, float>(x, taps, outShape, p.extrapolation);
  });
  KILN_RETURN_IF_ERROR(st);
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

} // namespace

void registerResizeKernels(KernelTable &t) {
  t.add(OpKind::Resize, resizeKernel);
}

} // namespace kiln
