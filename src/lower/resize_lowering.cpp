// Resize as Kernel IR, every form the interpreter (interp/kernels/resize.cpp)
// runs, with its arithmetic in the same order so results agree:
//
//   1. The shape program computes each resized axis's output length from
//      the scales or sizes input (keep_aspect_ratio_policy included) exactly
//      as the interpreter does, in double, with its checks; and, for
//      antialiasing, the run-time number of taps per output index.
//   2. A serial "taps" kernel fills, per resized axis, a table of input
//      indices and double weights per output index (and a flag for
//      tf_crop_and_resize positions outside the input). It recomputes the
//      axis's scale from the scales / sizes buffer in the same double
//      arithmetic as the shape program, so the two agree.
//   3. nearest: one gather kernel over output rows; linear / cubic: one
//      separable pass per resized axis, last axis first (the interpreter's
//      order), accumulating in f32 (f32 and 16-bit floats) or f64 (f64 and
//      integers) through scratch buffers; then a cast to the output type
//      when that differs, and for tf_crop_and_resize a kernel that writes
//      extrapolation_value where any axis falls outside the input. The
//      innermost axis's pass gathers per output element (its rows are
//      contiguous); a resized axis whose scale is a compile-time 1 is not
//      resampled when that is an identity (markActiveAxes).
// The kernels never see the scales as doubles (params are integers): they
// read them from the input buffers instead.
#include "lower/resize_lowering.h"

#include "lower/kernel_expr.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;
constexpr DType F64 = DType::F64, I64 = DType::I64;

enum class Mode { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  TfCropAndResize
};
enum class Rounding { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };
enum class Policy { Stretch, NotLarger, NotSmaller };

struct ResizeForm {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  Rounding rounding = Rounding::RoundPreferFloor;
  double cubicA = -0.75, extrapolation = 0;
  bool excludeOutside = false, antialias = false;
};

Expected<ResizeForm> readForm(const Node &node) {
  ResizeForm f;
  const std::string mode = node.getString("mode");
  if (mode == "nearest")
    f.mode = Mode::Nearest;
  else if (mode == "linear" || mode == "bilinear" || mode == "trilinear")
    f.mode = Mode::Linear;
  else if (mode == "cubic" || mode == "bicubic")
    f.mode = Mode::Cubic;
  else
    return makeError("Resize mode '", mode, "' is unknown");
  static const std::pair<const char *, Coord> coords[] = {
      {"half_pixel", Coord::HalfPixel},
      {"half_pixel_symmetric", Coord::HalfPixelSymmetric},
      {"pytorch_half_pixel", Coord::PytorchHalfPixel},
      {"align_corners", Coord::AlignCorners},
      {"asymmetric", Coord::Asymmetric},
      {"tf_half_pixel_for_nn", Coord::TfHalfPixelForNn},
      {"tf_crop_and_resize", Coord::TfCropAndResize}};
  const std::string coord = node.getString("coordinate_transformation_mode");
  auto c = std::find_if(std::begin(coords), std::end(coords),
                        [&](const auto &e) { return coord == e.first; });
  if (c == std::end(coords))
    return makeError("Resize coordinate_transformation_mode '", coord, "' is unknown");
  f.coord = c->second;
  const std::string rounding = node.getString("nearest_mode");
  if (rounding == "round_prefer_floor")
    f.rounding = Rounding::RoundPreferFloor;
  else if (rounding == "round_prefer_ceil")
    f.rounding = Rounding::RoundPreferCeil;
  else if (rounding == "floor")
    f.rounding = Rounding::Floor;
  else if (rounding == "ceil")
    f.rounding = Rounding::Ceil;
  else
    return makeError("Resize nearest_mode '", rounding, "' is unknown");
  f.cubicA = node.getFloat("cubic_coeff_a");
  f.excludeOutside = node.getInt("exclude_outside") != 0;
  f.antialias = node.getInt("antialias") != 0;
  f.extrapolation = node.getFloat("extrapolation_value");
  return f;
}

Expected<Policy> readPolicy(const Node &node) {
  const std::string policy = node.getString("keep_aspect_ratio_policy");
  if (policy == "stretch") return Policy::Stretch;
  if (policy == "not_larger") return Policy::NotLarger;
  if (policy == "not_smaller") return Policy::NotSmaller;
  return makeError("Resize keep_aspect_ratio_policy '", policy, "' is unknown");
}

// The value the interpreter's storeComputed<T> gives for double v, as a
// constant of type t (integers truncate and saturate, NaN is 0).
double storedConstant(DType t, double v) {
  if (t == DType::Bool) return v != 0 ? 1 : 0;
  if (!isInt(t)) return v;
  if (std::isnan(v)) return 0;
  double lo = 0, hi = 0;
  visitDType(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      lo = static_cast<double>(std::numeric_limits<T>::lowest());
      hi = static_cast<double>(std::numeric_limits<T>::max());
    }
  });
  return std::clamp(std::trunc(v), lo, hi);
}

// The lowering's plan: per axis its input and output length, and for a
// resized axis its position in the scales / sizes lists, the tap count and
// the scratch tables.
struct Axis {
  SVal inLen, outLen;
  int pos = -1; // index into scales / sizes / roi; -1: not resized
  // Resampled: resized, and not known at compile time to be an identity.
  bool active = false;
  SVal taps;                                 // taps per output index (linear / cubic)
  int index = -1, weight = -1, outside = -1; // scratch tables
};

struct Plan {
  ResizeForm form;
  DType type = DType::F32; // of X and Y
  DType acc = DType::F32;  // the interpolation's accumulator type
  int rank = 0;
  std::vector<int64_t> axes; // resized axes, in attribute order
  bool scales = false;       // scales given (else sizes)
  Policy policy = Policy::Stretch;
  std::vector<Axis> axis;
};

// ---- output lengths (shape program) ---------------------------------------------

// True when optional input i is given with values; an error when its
// length is only known at run time and the other input does not decide.
Expected<std::optional<bool>> givenStatically(DispatchBuilder &d, int i) {
  if (!d.input(i)) return std::optional<bool>(false);
  if (auto k = d.constant(d.numel(i))) return std::optional<bool>(*k > 0);
  return std::optional<bool>();
}

// A double rounded to float precision (scales are float32 in ONNX and the
// interpreter rounds wider ones): Veltkamp's split keeps the top 24 bits.
SVal roundToFloat(DispatchBuilder &d, SVal v) {
  const SVal scaled = d.fmul(v, d.cf(536870913.0)); // 2^29 + 1
  return d.fsub(scaled, d.fsub(scaled, v));
}

// std::min / std::max on shape-program doubles.
SVal fminSV(DispatchBuilder &d, SVal a, SVal b) {
  return d.select(d.flt(b, a), b, a);
}
SVal fmaxSV(DispatchBuilder &d, SVal a, SVal b) {
  return d.select(d.flt(a, b), b, a);
}

// An integral double in [0, 2^40] (the interpreter's kMaxLength) as an
// integer; NaN and out-of-range values fail the check.
SVal checkedLength(DispatchBuilder &d, SVal len, const std::string &what) {
  const double maxLength = double(int64_t{1} << 40);
  d.check(d.land(d.flt(d.cf(-1), len), d.flt(len, d.cf(maxLength + 1))), what);
  // ToI of a failed length would itself fail first; keep it in range.
  return d.toI(
      d.select(d.land(d.flt(d.cf(-1), len), d.flt(len, d.cf(maxLength + 1))), len, d.cf(0)));
}

// The scale of resized axis `a` as the interpreter reads it from scales.
SVal scaleOf(DispatchBuilder &d, const Plan &p, const Axis &a) {
  const SVal s = d.elemF(2, d.c(a.pos));
  return d.inputType(2) == DType::F64 ? roundToFloat(d, s) : s;
}

// Output lengths from the scales input: floor(inLen * scale).
void lengthsFromScales(DispatchBuilder &d, Plan &p) {
  for (Axis &a : p.axis) {
    if (a.pos < 0) continue;
    const SVal s = scaleOf(d, p, a);
    d.check(d.land(d.flt(d.cf(0), s), d.flt(s, d.cf(std::numeric_limits<double>::infinity()))),
            "scales must be finite and positive");
    a.outLen = checkedLength(d, d.ffloor(d.fmul(d.toF(a.inLen), s)),
                             "a scale makes an axis longer than 2^40");
  }
}

// sizes[i] / inLen (1 for an empty axis), as the interpreter's scale.
SVal sizeScale(DispatchBuilder &d, const Axis &a, SVal size) {
  return d.select(d.eq(a.inLen, d.c(0)), d.cf(1),
                  d.fdiv(d.toF(size), d.toF(d.max(a.inLen, d.c(1)))));
}

// Output lengths from the sizes input, with keep_aspect_ratio_policy.
void lengthsFromSizes(DispatchBuilder &d, Plan &p) {
  const bool notLarger = p.policy == Policy::NotLarger;
  SVal common = d.cf(notLarger ? std::numeric_limits<double>::infinity() : 0.0);
  for (Axis &a : p.axis) {
    if (a.pos < 0) continue;
    const SVal size = d.elem(3, d.c(a.pos));
    d.check(d.le(d.c(0), size), "sizes must not be negative, got {}", {size});
    d.check(d.lor(d.ne(a.inLen, d.c(0)), d.le(size, d.c(0))), "cannot resize an empty axis to {}",
            {size});
    a.outLen = size;
    const SVal s = sizeScale(d, a, size);
    common = notLarger ? fminSV(d, common, s) : fmaxSV(d, common, s);
  }
  if (p.policy == Policy::Stretch) return;
  for (Axis &a : p.axis)
    if (a.pos >= 0)
      a.outLen = checkedLength(d, d.ffloor(d.fadd(d.fmul(common, d.toF(a.inLen)), d.cf(0.5))),
                               "sizes make an axis longer than 2^40");
}

// The double scale of every resized axis in the shape program (used for
// the antialiasing tap counts only).
std::vector<SVal> shapeScales(DispatchBuilder &d, const Plan &p) {
  std::vector<SVal> out(p.axis.size());
  if (p.scales) {
    for (size_t i = 0; i < p.axis.size(); ++i)
      if (p.axis[i].pos >= 0) out[i] = scaleOf(d, p, p.axis[i]);
    return out;
  }
  const bool notLarger = p.policy == Policy::NotLarger;
  SVal common = d.cf(notLarger ? std::numeric_limits<double>::infinity() : 0.0);
  for (size_t i = 0; i < p.axis.size(); ++i) {
    const Axis &a = p.axis[i];
    if (a.pos < 0) continue;
    out[i] = sizeScale(d, a, d.elem(3, d.c(a.pos)));
    common = notLarger ? fminSV(d, common, out[i]) : fmaxSV(d, common, out[i]);
  }
  if (p.policy != Policy::Stretch)
    for (size_t i = 0; i < p.axis.size(); ++i)
      if (p.axis[i].pos >= 0) out[i] = common;
  return out;
}

// Taps per output index: 2 (linear) or 4 (cubic), more when antialiasing
// stretches the filter over a downscaled axis: first = floor(-support / s)
// + 1 and taps = 2 - 2 * first, as the interpreter's filterWeights.
void tapCounts(DispatchBuilder &d, Plan &p) {
  const int64_t plain = p.form.mode == Mode::Linear ? 2 : 4;
  std::vector<SVal> scales;
  if (p.form.antialias) scales = shapeScales(d, p);
  for (size_t i = 0; i < p.axis.size(); ++i) {
    Axis &a = p.axis[i];
    if (!a.active) continue;
    if (!p.form.antialias) {
      a.taps = d.c(plain);
      continue;
    }
    // A scale too small for one output element makes an empty axis; bound
    // it so the tap count stays finite (it changes no non-empty axis).
    const SVal bound = d.fdiv(d.cf(0.25), d.toF(d.add(a.inLen, d.c(1))));
    const SVal s = d.select(d.flt(bound, scales[i]), scales[i], bound); // NaN: bound
    const SVal support = d.cf(p.form.mode == Mode::Linear ? -1.0 : -2.0);
    const SVal first = d.add(d.toI(d.ffloor(d.fdiv(support, s))), d.c(1));
    a.taps = d.select(d.flt(scales[i], d.cf(1)), d.sub(d.c(2), d.mul(d.c(2), first)), d.c(plain));
  }
}

// ---- the taps kernel ---------------------------------------------------------------

// In-kernel values of one resized axis (doubles unless noted).
struct AxisK {
  int inLen = -1, outLen = -1; // i64
  int inLenF = -1, outLenF = -1, scale = -1, resized = -1, roiStart = -1, roiEnd = -1;
};

// The scale and resized length of every resized axis, recomputed from
// the scales / sizes buffer as the interpreter's readScalesOrSizes.
std::vector<AxisK> axisValues(DispatchBuilder &d, const Plan &p, KExpr &e) {
  std::vector<AxisK> out(p.axis.size());
  const size_t n = p.axes.size();
  int common = -1;
  for (size_t i = 0; i < p.axis.size(); ++i) {
    const Axis &a = p.axis[i];
    if (a.pos < 0) continue;
    AxisK &k = out[i];
    k.inLen = d.value(a.inLen);
    k.outLen = d.value(a.outLen);
    k.inLenF = e.cast(F64, I64, k.inLen);
    k.outLenF = e.cast(F64, I64, k.outLen);
    if (p.scales) {
      const DType st = d.inputType(2);
      const int v = e.b.load(d.in(2), kir::Affine::constant(a.pos));
      k.scale = e.cast(F64, DType::F32, e.cast(DType::F32, st, v));
      k.resized = e.mul(F64, k.inLenF, k.scale);
    } else {
      const int size = e.cast(F64, d.inputType(3), e.b.load(d.in(3), kir::Affine::constant(a.pos)));
      const int empty = e.eq(I64, k.inLen, e.i64(0));
      k.scale = e.sel(F64, empty, e.f(F64, 1), e.div(F64, size, k.inLenF));
      k.resized = size;
      if (p.policy == Policy::NotLarger)
        common = common < 0 ? e.min(F64, e.f(F64, INFINITY), k.scale) : e.min(F64, common, k.scale);
      else if (p.policy == Policy::NotSmaller)
        common = common < 0 ? e.max(F64, e.f(F64, 0), k.scale) : e.max(F64, common, k.scale);
    }
    if (p.form.coord == Coord::TfCropAndResize) {
      const DType rt = d.inputType(1);
      k.roiStart = e.cast(F64, rt, e.b.load(d.in(1), kir::Affine::constant(a.pos)));
      k.roiEnd = e.cast(F64, rt, e.b.load(d.in(1), kir::Affine::constant(int64_t(n) + a.pos)));
    }
  }
  if (common >= 0)
    for (AxisK &k : out)
      if (k.inLen >= 0) {
        k.scale = common;
        k.resized = e.mul(F64, common, k.inLenF);
      }
  return out;
}

// The source coordinate of output index x (f64), as the interpreter's
// sourceCoord; `outside` gets a bool value for tf_crop_and_resize (else -1).
int sourceCoord(KExpr &e, Coord coord, const AxisK &k, int x, int &outside) {
  outside = -1;
  const int half = e.f(F64, 0.5), one = e.f(F64, 1);
  auto halfPixel = [&] { return e.sub(F64, e.div(F64, e.add(F64, x, half), k.scale), half); };
  switch (coord) {
  case Coord::HalfPixel:
    return halfPixel();
  case Coord::HalfPixelSymmetric: {
    const int adjustment = e.div(F64, k.outLenF, k.resized);
    const int offset = e.mul(F64, e.div(F64, k.inLenF, e.f(F64, 2)), e.sub(F64, one, adjustment));
    return e.sub(F64, e.add(F64, offset, e.div(F64, e.add(F64, x, half), k.scale)), half);
  }
  case Coord::PytorchHalfPixel:
    return e.sel(F64, e.gt(F64, k.resized, one), halfPixel(), e.f(F64, 0));
  case Coord::AlignCorners: {
    const int v = e.div(F64, e.mul(F64, x, e.sub(F64, k.inLenF, one)), e.sub(F64, k.resized, one));
    return e.sel(F64, e.eq(F64, k.resized, one), e.f(F64, 0), v);
  }
  case Coord::Asymmetric:
    return e.div(F64, x, k.scale);
  case Coord::TfHalfPixelForNn:
    return e.div(F64, e.add(F64, x, half), k.scale);
  case Coord::TfCropAndResize: {
    const int last = e.sub(F64, k.inLenF, one);
    const int span = e.mul(F64, e.sub(F64, k.roiEnd, k.roiStart), last);
    const int start = e.mul(F64, k.roiStart, last);
    const int many = e.add(F64, start, e.div(F64, e.mul(F64, x, span), e.sub(F64, k.resized, one)));
    const int single = e.add(F64, start, e.div(F64, span, e.f(F64, 2)));
    const int v = e.sel(F64, e.gt(F64, k.resized, one), many, single);
    outside = e.lnot(e.land(e.ge(F64, v, e.f(F64, 0)), e.le(F64, v, last)));
    return v;
  }
  }
  return x;
}

// The nearest input index of coordinate v (i64, before clamping).
int roundNearest(KExpr &e, Rounding r, int v) {
  int rounded = -1;
  switch (r) {
  case Rounding::RoundPreferFloor:
    rounded = e.un(Opcode::Ceil, F64, e.sub(F64, v, e.f(F64, 0.5)));
    break;
  case Rounding::RoundPreferCeil:
    rounded = e.un(Opcode::Floor, F64, e.add(F64, v, e.f(F64, 0.5)));
    break;
  case Rounding::Floor:
    rounded = e.un(Opcode::Floor, F64, v);
    break;
  case Rounding::Ceil:
    rounded = e.un(Opcode::Ceil, F64, v);
    break;
  }
  return e.cast(I64, F64, rounded);
}

// Keys' cubic convolution kernel with parameter a at x (f64).
int cubicKernel(KExpr &e, double a, int x) {
  x = e.un(Opcode::Abs, F64, x);
  auto c = [&](double v) { return e.f(F64, v); };
  // ((a + 2) * x - (a + 3)) * x * x + 1
  const int near =
      e.add(F64, e.mul(F64, e.mul(F64, e.sub(F64, e.mul(F64, c(a + 2), x), c(a + 3)), x), x), c(1));
  // ((a * x - 5a) * x + 8a) * x - 4a
  const int far = e.sub(
      F64,
      e.mul(F64, e.add(F64, e.mul(F64, e.sub(F64, e.mul(F64, c(a), x), c(5 * a)), x), c(8 * a)), x),
      c(4 * a));
  return e.sel(F64, e.le(F64, x, c(1)), near, e.sel(F64, e.lt(F64, x, c(2)), far, c(0)));
}

// The index table (and outside flags) of one axis in nearest mode.
void nearestTaps(DispatchBuilder &d, const Plan &p, const Axis &a, const AxisK &k, KExpr &e) {
  kir::KernelBuilder &b = e.b;
  const int o = d.loop(a.outLen);
  int outside = -1;
  const int x = sourceCoord(e, p.form.coord, k, e.cast(F64, I64, e.var(o)), outside);
  const int hi = e.sub(I64, k.inLen, e.i64(1));
  int index = e.clamp(I64, roundNearest(e, p.form.rounding, x), e.i64(0), hi);
  const kir::Affine at = kir::Affine{}.add(1, -1, o);
  if (outside >= 0) {
    index = e.sel(I64, outside, e.i64(0), index);
    b.store(d.scratch(a.outside), at, e.cast(I64, DType::Bool, outside));
  }
  b.store(d.scratch(a.index), at, index);
  b.endLoop();
}

// The index and weight tables of one axis in linear / cubic mode: per
// output index, `taps` consecutive entries, as the interpreter's axisTaps
// (weights of excluded or outside taps are 0, which the passes skip).
void interpolationTaps(DispatchBuilder &d, const Plan &p, const Axis &a, const AxisK &k, KExpr &e,
                       int sumVar, int keptVar) {
  kir::KernelBuilder &b = e.b;
  const ResizeForm &f = p.form;
  const bool linear = f.mode == Mode::Linear;
  const int taps = d.value(a.taps);
  // first = (2 - taps) / 2: the shape program's tap count decides it.
  const int first = e.div(I64, e.sub(I64, e.i64(2), taps), e.i64(2));
  const int firstF = e.cast(F64, I64, first);
  const int stretch = f.antialias ? e.lt(F64, k.scale, e.f(F64, 1)) : e.boolean(false);
  const int sEff = f.antialias ? e.sel(F64, stretch, k.scale, e.f(F64, 1)) : e.f(F64, 1);
  const int zero = e.f(F64, 0), one = e.f(F64, 1);

  const int o = d.loop(a.outLen);
  int outside = -1;
  const int x = sourceCoord(e, f.coord, k, e.cast(F64, I64, e.var(o)), outside);
  // The reference prefers the left neighbour: an integral x is base + 1.
  const int base = e.sub(F64, e.un(Opcode::Ceil, F64, x), one);
  const int ratio = e.sub(F64, x, base);
  const int firstIndex = e.add(I64, e.cast(I64, F64, base), first);
  const int row = e.mul(I64, e.var(o), taps); // the row's first entry
  if (outside >= 0)
    b.store(d.scratch(a.outside), kir::Affine{}.add(1, -1, o), e.cast(I64, DType::Bool, outside));

  // 1. raw weights, and their sum (antialiasing normalizes by it)
  b.varWrite(sumVar, zero);
  int tap = d.loop(a.taps);
  {
    const int i = e.add(F64, firstF, e.cast(F64, I64, e.var(tap))); // tap offset from base
    const int t = e.sub(F64, i, ratio);
    int w;
    if (linear) {
      const int plain = e.sel(F64, e.eq(F64, i, zero), e.sub(F64, one, ratio), ratio);
      w = plain;
      if (f.antialias) {
        const int stretched = e.clamp(
            F64, e.sub(F64, one, e.un(Opcode::Abs, F64, e.mul(F64, t, k.scale))), zero, one);
        w = e.sel(F64, stretch, stretched, plain);
      }
    } else {
      w = cubicKernel(e, f.cubicA, e.mul(F64, sEff, t));
    }
    b.store(d.scratch(a.weight), kir::Affine{}.add(1, -1, tap), w, row);
    b.varWrite(sumVar, e.add(F64, b.varRead(sumVar), w));
  }
  b.endLoop();

  // 2. normalized (antialias), excluded (exclude_outside), indices clamped
  const int sum = b.varRead(sumVar);
  if (f.excludeOutside) b.varWrite(keptVar, zero);
  tap = d.loop(a.taps);
  {
    const kir::Affine at = kir::Affine{}.add(1, -1, tap);
    int w = b.load(d.scratch(a.weight), at, row);
    if (f.antialias) w = e.sel(F64, stretch, e.div(F64, w, sum), w);
    const int index = e.add(I64, firstIndex, e.var(tap));
    const int inside = e.land(e.ge(I64, index, e.i64(0)), e.lt(I64, index, k.inLen));
    if (f.excludeOutside) {
      w = e.sel(F64, inside, w, zero);
      b.varWrite(keptVar, e.add(F64, b.varRead(keptVar), w));
    } else if (outside >= 0) {
      w = e.sel(F64, outside, zero, w);
    }
    b.store(d.scratch(a.weight), at, w, row);
    b.store(d.scratch(a.index), at, e.clamp(I64, index, e.i64(0), e.sub(I64, k.inLen, e.i64(1))),
            row);
  }
  b.endLoop();

  // 3. exclude_outside renormalizes the kept weights
  if (f.excludeOutside) {
    const int kept = b.varRead(keptVar);
    const int keptNonZero = e.ne(F64, kept, zero);
    tap = d.loop(a.taps);
    const kir::Affine at = kir::Affine{}.add(1, -1, tap);
    int w = b.load(d.scratch(a.weight), at, row);
    w = e.sel(F64, keptNonZero, e.div(F64, w, kept), w);
    if (outside >= 0) w = e.sel(F64, outside, zero, w);
    b.store(d.scratch(a.weight), at, w, row);
    b.endLoop();
  }
  b.endLoop(); // o
}

void tapsKernel(DispatchBuilder &d, const Plan &p) {
  kir::KernelBuilder &b = d.beginKernel();
  KExpr e{b};
  const std::vector<AxisK> k = axisValues(d, p, e);
  const int sumVar = b.addVar("sum", F64), keptVar = b.addVar("kept", F64);
  for (size_t i = 0; i < p.axis.size(); ++i) {
    if (!p.axis[i].active) continue;
    if (p.form.mode == Mode::Nearest)
      nearestTaps(d, p, p.axis[i], k[i], e);
    else
      interpolationTaps(d, p, p.axis[i], k[i], e, sumVar, keptVar);
  }
  d.endKernel();
}

// ---- gather, passes, cast and extrapolation kernels ------------------------------------

// Splits the parallel row index (every output dim but the last) into the
// indices of those dims, innermost first, for the axes `wanted` marks.
std::vector<int> rowIndices(DispatchBuilder &d, KExpr &e, const std::vector<SVal> &dims, int row,
                            const std::vector<bool> &wanted) {
  const int rank = int(dims.size());
  std::vector<int> idx(size_t(rank), -1);
  int rest = e.var(row);
  int outermost = rank; // the outermost wanted dim: dims inside it are split first
  for (int a = rank - 2; a >= 0; --a)
    if (wanted[size_t(a)]) outermost = a;
  for (int a = rank - 2; a >= outermost; --a) {
    if (a == 0) {
      idx[0] = rest;
      break;
    }
    const int len = d.value(dims[size_t(a)]);
    idx[size_t(a)] = e.mod(I64, rest, len);
    rest = e.div(I64, rest, len);
  }
  return idx;
}

// Nearest mode: y[o] = x[index_0[o_0], ..., index_last[o_last]], or the
// extrapolation value where an axis is outside (tf_crop_and_resize).
void gatherKernel(DispatchBuilder &d, const Plan &p, const std::vector<SVal> &outDims,
                  const std::vector<SVal> &inStrides) {
  const int rank = p.rank;
  const SVal rows = d.product(std::vector<SVal>(outDims.begin(), outDims.end() - 1));
  const SVal last = outDims.back();
  kir::KernelBuilder &b = d.beginKernel(rows, last);
  KExpr e{b};
  const int row = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const std::vector<int> idx =
      rowIndices(d, e, outDims, row, std::vector<bool>(size_t(rank), true));
  int base = e.i64(0), rowOutside = -1;
  for (int a = 0; a + 1 < rank; ++a) {
    const Axis &ax = p.axis[size_t(a)];
    int src = idx[size_t(a)];
    if (ax.active) {
      if (ax.outside >= 0) {
        const int flag = e.ne(I64, b.load(d.scratch(ax.outside), {}, src), e.i64(0));
        rowOutside = rowOutside < 0 ? flag : e.lor(rowOutside, flag);
      }
      src = b.load(d.scratch(ax.index), {}, src);
    }
    base = e.add(I64, base, e.mul(I64, src, d.value(inStrides[size_t(a)])));
  }
  const Axis &lastAxis = p.axis.back();
  const int j = d.loop(last, {Schedule::Kind::Vector, 8});
  const kir::Affine at = kir::Affine{}.add(1, -1, j);
  int src = e.var(j), outside = rowOutside;
  if (lastAxis.active) {
    if (lastAxis.outside >= 0) {
      const int flag = e.ne(I64, b.load(d.scratch(lastAxis.outside), at), e.i64(0));
      outside = outside < 0 ? flag : e.lor(outside, flag);
    }
    src = b.load(d.scratch(lastAxis.index), at);
  }
  int v = b.load(d.in(0), {}, e.add(I64, base, src));
  if (outside >= 0)
    v = e.sel(p.type, outside, e.f(p.type, storedConstant(p.type, p.form.extrapolation)), v);
  kir::Affine dst = d.term(last, row);
  dst.add(1, -1, j);
  b.store(d.out(0), dst, v);
  b.endLoop();
  b.endLoop();
  d.endKernel();
}

// An element of the pass's source widened to the accumulator type as the
// interpreter's ComputeType (16-bit floats via f32).
int widen(KExpr &e, DType acc, DType srcType, int x) {
  if (srcType == DType::F16 || srcType == DType::BF16)
    return e.cast(acc, DType::F32, e.cast(DType::F32, srcType, x));
  return e.cast(acc, srcType, x);
}

// The pass over the innermost axis (inner = 1): each output element sums
// its taps' gathered inputs, w * x in tap order skipping zero weights as
// the interpreter; rows of the [outer, inLen] view run in parallel and the
// output index is the vectorized loop when the tap count is a constant.
void lastAxisPassKernel(DispatchBuilder &d, const Plan &p, const Axis &a, SVal outer, int src,
                        DType srcType, int dst) {
  const DType acc = p.acc;
  kir::KernelBuilder &b = d.beginKernel(outer, d.mul(a.outLen, a.taps));
  KExpr e{b};
  const int sum = b.addVar("acc", acc);
  const std::optional<int64_t> taps = d.constant(a.taps);
  // Integers keep the exact order of operations (see passKernel).
  const Schedule outer8 =
      taps && isFloat(p.type) ? Schedule{Schedule::Kind::Vector, 8} : Schedule{};
  const int r = d.loop(outer, {Schedule::Kind::Parallel, 1});
  const int o = d.loop(a.outLen, outer8);
  auto addTap = [&](kir::Affine tapAt, int total) {
    const int wd = b.load(d.scratch(a.weight), tapAt);
    const int index = b.load(d.scratch(a.index), tapAt);
    const int x = widen(e, acc, srcType, b.load(src, d.term(a.inLen, r), index));
    const int added = e.add(acc, total, e.mul(acc, e.cast(acc, F64, wd), x));
    return e.sel(acc, e.ne(F64, wd, e.f(F64, 0)), added, total);
  };
  int total = e.f(acc, 0);
  if (taps) {
    for (int64_t k = 0; k < *taps; ++k)
      total = addTap(kir::Affine{}.add(*taps, -1, o).add(k, -1, -1), total);
  } else {
    b.varWrite(sum, total);
    const int k = d.loop(a.taps);
    kir::Affine tapAt = d.term(a.taps, o);
    tapAt.add(1, -1, k);
    b.varWrite(sum, addTap(tapAt, b.varRead(sum)));
    b.endLoop();
    total = b.varRead(sum);
  }
  kir::Affine at = d.term(a.outLen, r);
  at.add(1, -1, o);
  b.store(dst, at, total);
  b.endLoop();
  b.endLoop();
  d.endKernel();
}

// One separable pass over axis `a` of a [outer, inLen, inner] view of src
// into [outer, outLen, inner] of dst (of the accumulator type): each row
// starts at 0 and adds w * src for the taps whose weight is not 0.
void passKernel(DispatchBuilder &d, const Plan &p, const Axis &a, SVal outer, SVal inner, int src,
                DType srcType, int dst) {
  const DType acc = p.acc;
  const SVal rows = d.mul(outer, a.outLen);
  kir::KernelBuilder &b = d.beginKernel(rows, d.mul(inner, a.taps));
  KExpr e{b};
  // Integer results truncate, so their passes keep the interpreter's exact
  // order of operations (a vector loop may contract into fused multiply-adds).
  const Schedule inside =
      isFloat(p.type) ? Schedule{Schedule::Kind::Vector, 8} : Schedule{Schedule::Kind::Unroll, 4};
  const int r = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int outLen = d.value(a.outLen);
  const int n = d.constant(outer) == 1 ? e.i64(0) : e.div(I64, e.var(r), outLen);
  const int o = e.sub(I64, e.var(r), e.mul(I64, n, outLen));
  kir::Affine rowAt = d.term(inner, r);
  const int row = e.mul(I64, o, d.value(a.taps));
  const int nBase = e.mul(I64, n, d.value(a.inLen));
  if (const std::optional<int64_t> taps = d.constant(a.taps)) {
    // A constant tap count (linear: 2, cubic: 4): each tap's weight and
    // source row once per row, then one pass over the row summing the taps
    // in registers and storing once. (The general form below reads and
    // writes the output row once per tap: 3-5x the memory traffic, which
    // kept a segmentation head's 21x256x256 upsample from scaling past one
    // thread.)
    std::vector<int> weights, wide, bases;
    for (int64_t k = 0; k < *taps; ++k) {
      const kir::Affine tapAt = kir::Affine{}.add(k, -1, -1);
      weights.push_back(b.load(d.scratch(a.weight), tapAt, row));
      wide.push_back(e.cast(acc, F64, weights.back()));
      const int index = b.load(d.scratch(a.index), tapAt, row);
      bases.push_back(e.mul(I64, e.add(I64, nBase, index), d.value(inner)));
    }
    const int i = d.loop(inner, inside);
    int total = e.f(acc, 0);
    for (int64_t k = 0; k < *taps; ++k) {
      const int x = widen(e, acc, srcType, b.load(src, kir::Affine{}.add(1, -1, i), bases[k]));
      total = e.sel(acc, e.ne(F64, weights[k], e.f(F64, 0)),
                    e.add(acc, total, e.mul(acc, wide[k], x)), total);
    }
    b.store(dst, kir::Affine(rowAt).add(1, -1, i), total);
    b.endLoop(); // i
    b.endLoop(); // r
    d.endKernel();
    return;
  }
  int i = d.loop(inner, inside);
  b.store(dst, kir::Affine(rowAt).add(1, -1, i), e.f(acc, 0));
  b.endLoop();
  const int tap = d.loop(a.taps);
  const kir::Affine tapAt = kir::Affine{}.add(1, -1, tap);
  const int wd = b.load(d.scratch(a.weight), tapAt, row);
  b.beginIf(e.ne(F64, wd, e.f(F64, 0)));
  {
    const int w = e.cast(acc, F64, wd);
    const int index = b.load(d.scratch(a.index), tapAt, row);
    const int srcBase = e.mul(I64, e.add(I64, nBase, index), d.value(inner));
    i = d.loop(inner, inside);
    const kir::Affine at = kir::Affine(rowAt).add(1, -1, i);
    const int x = widen(e, acc, srcType, b.load(src, kir::Affine{}.add(1, -1, i), srcBase));
    b.store(dst, at, e.add(acc, b.load(dst, at), e.mul(acc, w, x)));
    b.endLoop();
  }
  b.endIf();
  b.endLoop(); // tap
  b.endLoop(); // r
  d.endKernel();
}

// y = (T) src, row by row.
void castKernel(DispatchBuilder &d, const Plan &p, const std::vector<SVal> &outDims, int src,
                DType srcType) {
  const SVal rows = d.product(std::vector<SVal>(outDims.begin(), outDims.end() - 1));
  const SVal last = outDims.back();
  kir::KernelBuilder &b = d.beginKernel(rows, last);
  KExpr e{b};
  const int r = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int j = d.loop(last, {Schedule::Kind::Vector, 8});
  kir::Affine at = d.term(last, r);
  at.add(1, -1, j);
  b.store(d.out(0), at, e.cast(p.type, srcType, b.load(src, at)));
  b.endLoop();
  b.endLoop();
  d.endKernel();
}

// tf_crop_and_resize: y = extrapolation_value wherever some axis's source
// coordinate lies outside the input.
void extrapolationKernel(DispatchBuilder &d, const Plan &p, const std::vector<SVal> &outDims) {
  const int rank = p.rank;
  const SVal rows = d.product(std::vector<SVal>(outDims.begin(), outDims.end() - 1));
  const SVal last = outDims.back();
  kir::KernelBuilder &b = d.beginKernel(rows, last);
  KExpr e{b};
  const int row = d.loop(rows, {Schedule::Kind::Parallel, 1});
  std::vector<bool> wanted(size_t(rank), false);
  for (int a = 0; a + 1 < rank; ++a) wanted[size_t(a)] = p.axis[size_t(a)].outside >= 0;
  const std::vector<int> idx = rowIndices(d, e, outDims, row, wanted);
  int rowOutside = e.boolean(false);
  for (int a = 0; a + 1 < rank; ++a)
    if (wanted[size_t(a)])
      rowOutside = e.lor(
          rowOutside,
          e.ne(I64, b.load(d.scratch(p.axis[size_t(a)].outside), {}, idx[size_t(a)]), e.i64(0)));
  const int j = d.loop(last);
  int outside = rowOutside;
  if (p.axis.back().outside >= 0)
    outside = e.lor(
        outside,
        e.ne(I64, b.load(d.scratch(p.axis.back().outside), kir::Affine{}.add(1, -1, j)), e.i64(0)));
  b.beginIf(outside);
  kir::Affine at = d.term(last, row);
  at.add(1, -1, j);
  b.store(d.out(0), at, e.f(p.type, storedConstant(p.type, p.form.extrapolation)));
  b.endIf();
  b.endLoop();
  b.endLoop();
  d.endKernel();
}

// Linear / cubic: the separable passes, last resized axis first.
void interpolate(DispatchBuilder &d, Plan &p, const std::vector<SVal> &outDims, int bufA,
                 int bufB) {
  std::vector<SVal> cur = d.dims(0);
  std::vector<int> order;
  for (int a = p.rank - 1; a >= 0; --a)
    if (p.axis[size_t(a)].active) order.push_back(a);
  int src = d.in(0);
  DType srcType = p.type;
  const bool direct = p.type == p.acc; // the last pass may write y itself
  for (size_t k = 0; k < order.size(); ++k) {
    const int a = order[k];
    const SVal outer = d.product(std::vector<SVal>(cur.begin(), cur.begin() + a));
    const SVal inner = d.product(std::vector<SVal>(cur.begin() + a + 1, cur.end()));
    const bool lastPass = k + 1 == order.size();
    const int dst = lastPass && direct ? d.out(0) : d.scratch(k % 2 == 0 ? bufA : bufB);
    if (a == p.rank - 1)
      lastAxisPassKernel(d, p, p.axis[size_t(a)], outer, src, srcType, dst);
    else
      passKernel(d, p, p.axis[size_t(a)], outer, inner, src, srcType, dst);
    cur[size_t(a)] = p.axis[size_t(a)].outLen;
    src = dst;
    srcType = p.acc;
  }
  // No axis to resample (every scale 1): a copy, as the interpreter's
  // round trip through the accumulator type is exact.
  if (order.empty())
    castKernel(d, p, outDims, d.in(0), p.type);
  else if (!direct)
    castKernel(d, p, outDims, src, p.acc);
  if (p.form.coord == Coord::TfCropAndResize) extrapolationKernel(d, p, outDims);
}

// Resolves the axes attribute (all axes when absent).
Expected<std::vector<int64_t>> readAxes(const Node &node, int rank) {
  std::vector<int64_t> axes;
  if (!node.hasAttr("axes")) {
    for (int a = 0; a < rank; ++a) axes.push_back(a);
    return axes;
  }
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t a : node.getInts("axes")) {
    const int64_t r = a < 0 ? a + rank : a;
    if (r < 0 || r >= rank) return makeError("Resize axis ", a, " is out of range for rank ", rank);
    if (seen[size_t(r)]) return makeError("Resize axis ", r, " appears twice in axes");
    seen[size_t(r)] = true;
    axes.push_back(r);
  }
  return axes;
}

// Marks the axes to resample: the resized ones, less those whose scale is
// a compile-time 1 under a coordinate transformation that maps every
// output index to itself at scale 1 (all but tf_crop_and_resize, which may
// crop, and tf_half_pixel_for_nn, which shifts by half a pixel). The
// interpreter resamples every axis with scale 1 too, so
// tf_half_pixel_for_nn (opsets 11-12) with a partial axes list (opset 18+)
// is refused.
Status markActiveAxes(DispatchBuilder &d, Plan &p) {
  const bool shifts = p.form.coord == Coord::TfHalfPixelForNn;
  if (shifts && p.axes.size() != size_t(p.rank))
    return makeError("Resize tf_half_pixel_for_nn with an axes list that omits axes");
  const bool scaleOneIsIdentity = !shifts && p.form.coord != Coord::TfCropAndResize;
  for (Axis &a : p.axis) {
    if (a.pos < 0) continue;
    a.active = true;
    if (!scaleOneIsIdentity) continue;
    if (p.scales) {
      a.active = d.constantF(scaleOf(d, p, a)) != std::optional<double>(1.0);
    } else if (p.policy == Policy::Stretch) {
      auto in = d.constant(a.inLen), out = d.constant(a.outLen);
      a.active = !(in && out && *in == *out);
    }
  }
  return Status::success();
}

// Which of scales and sizes drives the resize, with their length checks.
Status chooseScalesOrSizes(DispatchBuilder &d, Plan &p) {
  const SVal n = d.c(int64_t(p.axes.size()));
  KILN_ASSIGN_OR_RETURN(std::optional<bool> scales, givenStatically(d, 2));
  KILN_ASSIGN_OR_RETURN(std::optional<bool> sizes, givenStatically(d, 3));
  if (!scales && !sizes)
    return makeError("Resize whose scales and sizes lengths are both only known at run time");
  // An input whose length is unknown must then be empty at run time.
  if (!scales) {
    scales = !*sizes;
    if (!*scales) d.check(d.eq(d.numel(2), d.c(0)), "scales and sizes are both given");
  }
  if (!sizes) {
    sizes = !*scales;
    if (!*sizes) d.check(d.eq(d.numel(3), d.c(0)), "scales and sizes are both given");
  }
  if (*scales == *sizes) return makeError("Resize needs exactly one of scales and sizes");
  p.scales = *scales;
  const int in = p.scales ? 2 : 3;
  if (p.scales ? !isFloat(d.inputType(2)) : !isInt(d.inputType(3)))
    return makeError(p.scales ? "Resize scales must be a float tensor"
                              : "Resize sizes must be an integer tensor");
  d.check(d.eq(d.numel(in), n),
          std::string(p.scales ? "scales" : "sizes") + " has {} values, expected {}",
          {d.numel(in), n});
  if (!p.scales) {
    KILN_ASSIGN_OR_RETURN(p.policy, readPolicy(d.node()));
  }
  return Status::success();
}

} // namespace

Status lowerResize(DispatchBuilder &d) {
  Plan p;
  KILN_ASSIGN_OR_RETURN(p.form, readForm(d.node()));
  p.rank = d.inputRank(0);
  p.type = d.inputType(0);
  if (p.rank < 0) return makeError("Resize needs an input of known rank");
  if (p.type == DType::String) return makeError("Resize of a string tensor");
  p.acc = p.type == DType::F32 || p.type == DType::F16 || p.type == DType::BF16 ? DType::F32
                                                                                : DType::F64;
  if (p.rank == 0) { // nothing to resize: a copy
    d.setOutput(0, {});
    kir::KernelBuilder &b = d.beginKernel();
    b.store(d.out(0), {}, b.load(d.in(0), {}));
    d.endKernel();
    return Status::success();
  }
  KILN_ASSIGN_OR_RETURN(p.axes, readAxes(d.node(), p.rank));
  KILN_RETURN_IF_ERROR(chooseScalesOrSizes(d, p));

  p.axis.resize(size_t(p.rank));
  for (int a = 0; a < p.rank; ++a) p.axis[size_t(a)].inLen = p.axis[size_t(a)].outLen = d.dim(0, a);
  for (size_t i = 0; i < p.axes.size(); ++i) p.axis[size_t(p.axes[i])].pos = int(i);
  if (p.scales)
    lengthsFromScales(d, p);
  else
    lengthsFromSizes(d, p);
  KILN_RETURN_IF_ERROR(markActiveAxes(d, p));
  if (p.form.coord == Coord::TfCropAndResize) {
    if (!d.input(1)) return makeError("Resize tf_crop_and_resize needs the roi input");
    if (!isFloat(d.inputType(1)) && !isInt(d.inputType(1)))
      return makeError("Resize roi must be numeric");
    const SVal want = d.c(2 * int64_t(p.axes.size()));
    d.check(d.eq(d.numel(1), want), "roi has {} values, expected {}", {d.numel(1), want});
  }
  if (p.form.mode != Mode::Nearest) tapCounts(d, p);

  std::vector<SVal> outDims, inStrides(size_t(p.rank));
  for (const Axis &a : p.axis) outDims.push_back(a.outLen);
  SVal stride = d.c(1);
  for (int a = p.rank - 1; a >= 0; --a) {
    inStrides[size_t(a)] = stride;
    stride = d.mul(stride, p.axis[size_t(a)].inLen);
  }
  d.setOutput(0, outDims);

  // Scratch: the tables of every resized axis, then the pass buffers.
  for (Axis &a : p.axis) {
    if (!a.active) continue;
    const SVal entries = p.form.mode == Mode::Nearest ? a.outLen : d.mul(a.outLen, a.taps);
    a.index = d.addScratch(I64, entries);
    if (p.form.mode != Mode::Nearest) a.weight = d.addScratch(F64, entries);
    if (p.form.coord == Coord::TfCropAndResize) a.outside = d.addScratch(I64, a.outLen);
  }
  int bufA = -1, bufB = -1;
  if (p.form.mode != Mode::Nearest) {
    // Pass k writes buffer k % 2; its size is the product of the dims so far.
    std::vector<SVal> cur = d.dims(0);
    SVal sizeA = d.c(0), sizeB = d.c(0);
    int k = 0;
    for (int a = p.rank - 1; a >= 0; --a) {
      if (!p.axis[size_t(a)].active) continue;
      cur[size_t(a)] = p.axis[size_t(a)].outLen;
      SVal &size = k++ % 2 == 0 ? sizeA : sizeB;
      size = d.max(size, d.product(cur));
    }
    bufA = d.addScratch(p.acc, sizeA);
    bufB = d.addScratch(p.acc, sizeB);
  }

  tapsKernel(d, p);
  if (p.form.mode == Mode::Nearest)
    gatherKernel(d, p, outDims, inStrides);
  else
    interpolate(d, p, outDims, bufA, bufB);
  return Status::success();
}

} // namespace kiln::lower
