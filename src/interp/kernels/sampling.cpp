// Interpreter kernels: GridSample, DepthToSpace and SpaceToDepth (Resize
// lives in resize.cpp).
//
// GridSample follows PyTorch's grid_sampler as ONNX Runtime does (the ONNX
// reference differs in one corner, see GridAxis::source), for any number of
// spatial dims: the normalized grid coordinates (x, y[, z], i.e. innermost
// axis first) are mapped to pixel coordinates, rounded for nearest, clamped
// (border) or reflected (reflection) when they fall outside the image, and
// then interpolated from 1 (nearest), 2 (linear) or 4 (cubic, Keys
// a = -0.75) taps per axis, each tap again subject to the padding mode. With
// zeros padding a tap outside the image contributes nothing.
//
// DepthToSpace / SpaceToDepth are pure index permutations and work on every
// dtype.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>
#include <utility>

namespace kiln {

namespace {

// ---- GridSample -------------------------------------------------------------

enum class GridMode { Nearest, Linear, Cubic };
enum class Padding { Zeros, Border, Reflection };

struct GridParams {
  GridMode mode = GridMode::Linear;
  Padding padding = Padding::Zeros;
  bool alignCorners = false;
};

Expected<GridParams> readGridParams(const KernelContext &ctx) {
  const Node &node = ctx.node();
  GridParams p;
  std::string mode = node.getString("mode");
  if (mode == "bilinear" || mode == "linear")
    p.mode = GridMode::Linear;
  else if (mode == "nearest")
    p.mode = GridMode::Nearest;
  else if (mode == "bicubic" || mode == "cubic")
    p.mode = GridMode::Cubic;
  else
    return ctx.error("unknown mode '", mode, "'");
  std::string padding = node.getString("padding_mode");
  if (padding == "zeros")
    p.padding = Padding::Zeros;
  else if (padding == "border")
    p.padding = Padding::Border;
  else if (padding == "reflection")
    p.padding = Padding::Reflection;
  else
    return ctx.error("unknown padding_mode '", padding, "'");
  p.alignCorners = node.getInt("align_corners") != 0;
  return p;
}

// Reflects x into [lo, hi] by folding at the borders as often as needed. The
// distance past the border is taken modulo two ranges (one fold there, one
// back), so huge coordinates cannot overflow a fold count.
template <class A> A reflect(A x, A lo, A hi) {
  A range = hi - lo;
  if (range <= A(0)) return lo;
  if (x < lo) {
    A m = std::fmod(lo - x, 2 * range);
    return m < range ? lo + m : hi - (m - range);
  }
  if (x > hi) {
    A m = std::fmod(x - hi, 2 * range);
    return m < range ? hi - m : lo + (m - range);
  }
  return x;
}

// One spatial axis of length `len` under the op's settings.
template <class A> struct GridAxis {
  int64_t len = 0;
  A lo = 0, hi = 0; // the border used by reflection and the outside test
  const GridParams *p = nullptr;

  GridAxis(int64_t length, const GridParams &params) : len(length), p(&params) {
    lo = params.alignCorners ? A(0) : A(-0.5);
    hi = params.alignCorners ? static_cast<A>(len - 1) : static_cast<A>(len) - A(0.5);
  }

  // Normalized [-1, 1] -> pixel coordinate, rounded for nearest (half to
  // even, as ONNX Runtime does for every rank), then clamped (border) or
  // reflected when outside the image. Cubic with border padding is not
  // clamped: like PyTorch and ONNX Runtime it clamps each of its taps
  // instead (the ONNX reference clamps the coordinate; the two differ only
  // there).
  A source(A v) const {
    A x = p->alignCorners ? (v + A(1)) / A(2) * static_cast<A>(len - 1)
                          : ((v + A(1)) * static_cast<A>(len) - A(1)) / A(2);
    if (p->mode == GridMode::Nearest) x = std::nearbyint(x);
    if (x < lo || x > hi) {
      if (p->padding == Padding::Border && p->mode != GridMode::Cubic)
        x = std::clamp(x, A(0), static_cast<A>(len - 1));
      else if (p->padding == Padding::Border) // every tap reads the edge pixel beyond this
        x = std::clamp(x, A(-3), static_cast<A>(len + 2));
      else if (p->padding == Padding::Reflection)
        x = reflect(x, lo, hi);
    }
    return x;
  }

  // The pixel index of tap i after padding, or -1 for a zero (outside) tap.
  int64_t pixel(int64_t i) const {
    if (i >= 0 && i < len) return i;
    if (p->padding == Padding::Zeros) return -1;
    if (p->padding == Padding::Border) return std::clamp<int64_t>(i, 0, len - 1);
    A r = reflect(static_cast<A>(i), lo, hi);
    return std::clamp<int64_t>(static_cast<int64_t>(r), 0, len - 1);
  }

  // Appends the (pixel, weight) taps of coordinate x.
  void taps(A x, std::vector<std::pair<int64_t, A>> &out) const {
    out.clear();
    // NaN, or so far outside that every tap is a zero tap (padding modes
    // other than zeros have already brought x inside).
    if (!(std::abs(x) <= static_cast<A>(len) + A(4))) {
      out.emplace_back(-1, A(0));
      return;
    }
    if (p->mode == GridMode::Nearest) {
      out.emplace_back(pixel(static_cast<int64_t>(x)), A(1));
      return;
    }
    A x0 = std::floor(x), t = x - x0;
    int64_t i0 = static_cast<int64_t>(x0);
    if (p->mode == GridMode::Linear) {
      out.emplace_back(pixel(i0), A(1) - t);
      out.emplace_back(pixel(i0 + 1), t);
      return;
    }
    const A a = A(-0.75); // PyTorch's bicubic constant
    A w[4] = {((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
              ((a + 2) * t - (a + 3)) * t * t + 1,
              ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
              ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a};
    for (int k = 0; k < 4; ++k) out.emplace_back(pixel(i0 - 1 + k), w[k]);
  }
};

// Combines the per-axis taps of one output position into (offset within a
// channel plane, weight) pairs; combinations with a zero tap are dropped.
template <class A>
void combineTaps(const std::vector<std::vector<std::pair<int64_t, A>>> &axisTaps,
                 const Shape64 &planeStrides, std::vector<std::pair<int64_t, A>> &out) {
  out.assign(1, {0, A(1)});
  for (size_t a = 0; a < axisTaps.size(); ++a) {
    std::vector<std::pair<int64_t, A>> next;
    for (const auto &[off, w] : out)
      for (const auto &[pix, tw] : axisTaps[a])
        if (pix >= 0) next.emplace_back(off + pix * planeStrides[a], w * tw);
    out.swap(next);
  }
}

template <class T, class A>
Tensor gridSample(const Tensor &x, const Tensor &grid, const GridParams &p) {
  int64_t batch = x.dim(0), channels = x.dim(1);
  size_t r = static_cast<size_t>(x.rank() - 2);
  Shape64 inSpatial(x.shape().begin() + 2, x.shape().end());
  Shape64 outSpatial(grid.shape().begin() + 1, grid.shape().end() - 1);
  Shape64 outShape{batch, channels};
  outShape.insert(outShape.end(), outSpatial.begin(), outSpatial.end());
  Tensor out(x.dtype(), outShape);
  int64_t inPlane = numelOf(inSpatial), outPlane = numelOf(outSpatial);
  if (out.numel() == 0) return out;

  std::vector<GridAxis<A>> axes;
  for (size_t a = 0; a < r; ++a) axes.emplace_back(inSpatial[a], p);
  Shape64 planeStrides = stridesOf(inSpatial);
  std::vector<double> g = toDoubles(grid);
  const T *src = x.data<T>();
  T *dst = out.data<T>();
  std::vector<std::vector<std::pair<int64_t, A>>> axisTaps(r);
  std::vector<std::pair<int64_t, A>> combos;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t o = 0; o < outPlane; ++o) {
      const double *coords = &g[(n * outPlane + o) * r];
      for (size_t a = 0; a < r; ++a) {
        // The grid lists coordinates innermost axis first.
        A v = static_cast<A>(coords[r - 1 - a]);
        axes[a].taps(axes[a].source(v), axisTaps[a]);
      }
      combineTaps(axisTaps, planeStrides, combos);
      for (int64_t c = 0; c < channels; ++c) {
        const T *plane = src + (n * channels + c) * inPlane;
        A sum = 0;
        for (const auto &[off, w] : combos)
          sum += w * static_cast<A>(static_cast<ComputeType<T>>(plane[off]));
        dst[(n * channels + c) * outPlane + o] = storeComputed<T>(sum);
      }
    }
  return out;
}

Status gridSampleKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0), &grid = ctx.in(1);
  KILN_ASSIGN_OR_RETURN(GridParams p, readGridParams(ctx));
  if (x.rank() < 3) return ctx.error("X must have rank 3 or more, got ", shapeToString(x.shape()));
  int64_t r = x.rank() - 2;
  if (grid.rank() != r + 2 || grid.dim(0) != x.dim(0) || grid.dim(r + 1) != r)
    return ctx.error("grid has shape ", shapeToString(grid.shape()), ", expected [", x.dim(0),
                     ", <", r, " output dims>, ", r, "] for X of shape ", shapeToString(x.shape()));
  if (!isFloat(grid.dtype())) return ctx.error("grid must be a float tensor");
  for (int64_t a = 2; a < x.rank(); ++a)
    if (x.dim(a) == 0 && numelOf(grid.shape()) > 0)
      return ctx.error("cannot sample from an empty spatial axis");
  // Float X computes in float (double for f64 or accumulateF64); integer X in
  // double, the result truncated like the reference's astype.
  bool f64 = ctx.options().accumulateF64 ||
             !(x.dtype() == DType::F32 || x.dtype() == DType::F16 || x.dtype() == DType::BF16);
  Tensor out;
  KILN_RETURN_IF_ERROR(dispatchNumeric(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    out = f64 ? gridSample<T, double>(x, grid, p) : gridSample<T, float>(x, grid, p);
  }));
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// ---- DepthToSpace / SpaceToDepth --------------------------------------------

// Copies whole elements from `src` to `dst` through a map from destination
// to source flat index.
template <class F> Tensor permuteElements(const Tensor &src, Shape64 outShape, F &&sourceOf) {
  Tensor out(src.dtype(), std::move(outShape));
  visitDType(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *s = src.data<T>();
    T *d = out.data<T>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) d[i] = s[sourceOf(i)];
  });
  return out;
}

Expected<int64_t> readBlockSize(const KernelContext &ctx, const Tensor &x) {
  int64_t b = ctx.node().getInt("blocksize");
  if (b <= 0) return ctx.error("blocksize must be positive, got ", b);
  if (x.rank() != 4) return ctx.error("input must have rank 4, got ", shapeToString(x.shape()));
  return b;
}

// y[n, c, h*b + i, w*b + j] = x[n, (i*b + j)*C' + c, h, w] (DCR) or
// x[n, c*b*b + i*b + j, h, w] (CRD), C' = C / b^2.
Status depthToSpaceKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t b, readBlockSize(ctx, x));
  std::string mode = ctx.node().getString("mode");
  if (mode != "DCR" && mode != "CRD") return ctx.error("unknown mode '", mode, "'");
  bool crd = mode == "CRD";
  int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  // Division, not b * b: a huge blocksize must not overflow.
  if (C % b != 0 || (C / b) % b != 0)
    return ctx.error("channels ", C, " are not divisible by blocksize^2 (blocksize ", b, ")");
  int64_t oc = C / b / b, oh = 0, ow = 0, plane = 0, total = 0;
  if (__builtin_mul_overflow(H, b, &oh) || __builtin_mul_overflow(W, b, &ow) ||
      __builtin_mul_overflow(oh, ow, &plane) || __builtin_mul_overflow(plane, oc, &total) ||
      __builtin_mul_overflow(total, N, &total))
    return ctx.error("blocksize ", b, " makes the output too large");
  Tensor out = permuteElements(x, {N, oc, oh, ow}, [&](int64_t k) {
    int64_t w2 = k % ow, h2 = (k / ow) % oh, c = (k / (ow * oh)) % oc, n = k / (ow * oh * oc);
    int64_t i = h2 % b, j = w2 % b, h = h2 / b, w = w2 / b;
    int64_t ic = crd ? c * b * b + i * b + j : (i * b + j) * oc + c;
    return ((n * C + ic) * H + h) * W + w;
  });
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// y[n, (i*b + j)*C + c, h, w] = x[n, c, h*b + i, w*b + j].
Status spaceToDepthKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t b, readBlockSize(ctx, x));
  int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  if (H % b != 0 || W % b != 0)
    return ctx.error("spatial dims ", H, "x", W, " are not divisible by blocksize ", b);
  int64_t oc = 0, oh = H / b, ow = W / b;
  if (__builtin_mul_overflow(C, b, &oc) || __builtin_mul_overflow(oc, b, &oc))
    return ctx.error("blocksize ", b, " makes the output channel count overflow");
  Tensor out = permuteElements(x, {N, oc, oh, ow}, [&](int64_t k) {
    int64_t w = k % ow, h = (k / ow) % oh, c2 = (k / (ow * oh)) % oc, n = k / (ow * oh * oc);
    int64_t c = c2 % C, blk = c2 / C, i = blk / b, j = blk % b;
    return ((n * C + c) * H + h * b + i) * W + w * b + j;
  });
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

} // namespace

void registerSamplingKernels(KernelTable &t) {
  t.add(OpKind::GridSample, gridSampleKernel);
  t.add(OpKind::DepthToSpace, depthToSpaceKernel);
  t.add(OpKind::SpaceToDepth, spaceToDepthKernel);
}

} // namespace kiln
