// Interpreter kernels for the ops that cut tensors apart or join them: Concat,
// Split, Slice and Pad. Like the other data-movement kernels they copy
// elements without interpreting them, so every dtype (strings too) works.
// Concat and Split copy contiguous blocks; Slice and Pad compute, for every
// output element, where it comes from.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>

namespace kiln {

namespace {

// Product of dims [from, to).
int64_t dimProduct(const Shape64 &s, int64_t from, int64_t to) {
  int64_t n = 1;
  for (int64_t i = from; i < to; ++i) n *= s[i];
  return n;
}

// Copies `rows` rows of `len` elements between tensors of the same dtype:
// row r goes from src[srcOff + r * srcStride] to dst[dstOff + r * dstStride].
void copyRows(const Tensor &src, int64_t srcOff, int64_t srcStride, Tensor &dst, int64_t dstOff,
              int64_t dstStride, int64_t rows, int64_t len) {
  visitDType(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *from = src.data<T>() + srcOff;
    T *to = dst.data<T>() + dstOff;
    for (int64_t r = 0; r < rows; ++r) std::copy_n(from + r * srcStride, len, to + r * dstStride);
  });
}

Status concatKernel(KernelContext &ctx) {
  // Exporters sometimes pass a 1-d empty tensor as a placeholder next to
  // inputs of higher rank; it contributes nothing, so it is skipped.
  std::vector<const Tensor *> parts;
  int64_t rank = -1;
  for (int i = 0; i < ctx.numInputs(); ++i)
    if (ctx.has(i) && !(ctx.in(i).rank() == 1 && ctx.in(i).numel() == 0))
      rank = std::max(rank, ctx.in(i).rank());
  for (int i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.has(i)) continue;
    const Tensor &t = ctx.in(i);
    if (rank >= 0 && t.rank() == 1 && t.numel() == 0 && rank != 1) continue;
    parts.push_back(&t);
  }
  if (parts.empty()) return ctx.error("has no inputs");
  const Tensor &first = *parts[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), first.rank()));
  Shape64 shape = first.shape();
  shape[axis] = 0;
  for (const Tensor *t : parts) {
    if (t->dtype() != first.dtype())
      return ctx.error("inputs have different dtypes (", dtypeName(first.dtype()), " and ",
                       dtypeName(t->dtype()), ")");
    bool same = t->rank() == first.rank();
    for (int64_t i = 0; same && i < first.rank(); ++i)
      same = i == axis || t->dim(i) == first.dim(i);
    if (!same)
      return ctx.error("cannot concatenate shapes ", shapeToString(first.shape()), " and ",
                       shapeToString(t->shape()), " on axis ", axis);
    shape[axis] += t->dim(axis);
  }
  Tensor out(first.dtype(), shape);
  int64_t outer = dimProduct(shape, 0, axis), inner = dimProduct(shape, axis + 1, first.rank());
  // Each input fills a column band of the [outer, shape[axis] * inner] rows.
  int64_t rowLen = shape[axis] * inner, begin = 0;
  for (const Tensor *t : parts) {
    int64_t chunk = t->dim(axis) * inner;
    copyRows(*t, 0, chunk, out, begin, rowLen, outer, chunk);
    begin += chunk;
  }
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// The sizes of Split's outputs: the split input, or num_outputs (or the
// number of outputs) chunks of ceil(dim / n), the last one smaller.
Expected<std::vector<int64_t>> splitSizes(const KernelContext &ctx, int64_t dim) {
  int64_t outputs = ctx.numOutputs();
  std::vector<int64_t> sizes;
  if (ctx.has(1)) {
    KILN_ASSIGN_OR_RETURN(sizes, readIntsInput(ctx, 1, "split"));
    if (static_cast<int64_t>(sizes.size()) != outputs)
      return ctx.error("split has ", sizes.size(), " entries for ", outputs, " outputs");
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) return ctx.error("split ", shapeToString(sizes), " has a negative entry");
      sum += s;
    }
    if (sum != dim)
      return ctx.error("split ", shapeToString(sizes), " sums to ", sum, ", not to the dim ", dim);
    return sizes;
  }
  int64_t n = ctx.node().hasAttr("num_outputs") ? ctx.node().getInt("num_outputs") : outputs;
  if (n != outputs || n <= 0)
    return ctx.error("num_outputs is ", n, " but the node has ", outputs, " outputs");
  int64_t chunk = (dim + n - 1) / n, left = dim;
  for (int64_t i = 0; i < n; ++i) {
    sizes.push_back(std::min(chunk, left));
    left -= sizes.back();
  }
  return sizes;
}

Status splitKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), x.rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, splitSizes(ctx, x.dim(axis)));
  int64_t outer = dimProduct(x.shape(), 0, axis), inner = dimProduct(x.shape(), axis + 1, x.rank());
  int64_t rowLen = x.dim(axis) * inner, begin = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Shape64 shape = x.shape();
    shape[axis] = sizes[k];
    Tensor out(x.dtype(), shape);
    int64_t chunk = sizes[k] * inner;
    copyRows(x, begin, rowLen, out, 0, chunk, outer, chunk);
    begin += chunk;
    ctx.setOutput(static_cast<int>(k), std::move(out));
  }
  return Status::success();
}

// One axis of a slice: first index, step and number of elements taken.
struct SliceAxis {
  int64_t start = 0, step = 1, count = 0;
};

// Numpy's clamping: negative positions count from the back, then starts and
// ends are clamped into range (which differs for negative steps, where the
// end may be -1, "before the first element").
SliceAxis clampSlice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  SliceAxis s;
  s.step = step;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (dim == 0) return s;
  // The counts are written so that huge steps (INT64_MAX, INT64_MIN) cannot
  // overflow.
  if (step > 0) {
    start = std::clamp(start, int64_t(0), dim);
    end = std::clamp(end, int64_t(0), dim);
    s.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp(start, int64_t(0), dim - 1);
    end = std::clamp(end, int64_t(-1), dim - 1);
    s.count = start > end ? (start - end - 1) / -std::max(step, -INT64_MAX) + 1 : 0;
  }
  s.start = start;
  return s;
}

Status sliceKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  int64_t rank = x.rank();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> starts, readIntsInput(ctx, 1, "starts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ends, readIntsInput(ctx, 2, "ends"));
  std::vector<int64_t> axes, steps(starts.size(), 1);
  if (ctx.has(3)) {
    KILN_ASSIGN_OR_RETURN(axes, readIntsInput(ctx, 3, "axes"));
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (ctx.has(4)) {
    KILN_ASSIGN_OR_RETURN(steps, readIntsInput(ctx, 4, "steps"));
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return ctx.error("starts, ends, axes and steps have different lengths (", starts.size(), ", ",
                     ends.size(), ", ", axes.size(), ", ", steps.size(), ")");
  std::vector<SliceAxis> plan(rank);
  for (int64_t a = 0; a < rank; ++a) plan[a].count = x.dim(a);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t a, resolveAxis(ctx, axes[i], rank));
    if (seen[a]) return ctx.error("axis ", a, " is sliced twice");
    seen[a] = true;
    if (steps[i] == 0) return ctx.error("step on axis ", a, " is 0");
    plan[a] = clampSlice(starts[i], ends[i], steps[i], x.dim(a));
  }
  Shape64 inStrides = stridesOf(x.shape());
  Shape64 shape(rank), strides(rank);
  int64_t base = 0;
  for (int64_t a = 0; a < rank; ++a) {
    shape[a] = plan[a].count;
    // (An axis with one element never moves; its step may be huge.)
    strides[a] = plan[a].count > 1 ? plan[a].step * inStrides[a] : 0;
    base += plan[a].start * inStrides[a];
  }
  ctx.setOutput(0, gatherOffsets(x, shape, stridedOffsets(shape, strides, base)));
  return Status::success();
}

// Maps a position p outside [0, n) back into it the way a pad mode does
// (n > 0): reflect mirrors without repeating the edge, edge clamps, wrap
// repeats periodically.
int64_t padSource(const std::string &mode, int64_t p, int64_t n) {
  if (mode == "edge") return std::clamp(p, int64_t(0), n - 1);
  if (mode == "wrap") return ((p % n) + n) % n;
  if (n == 1) return 0; // reflect of a single element repeats it
  int64_t period = 2 * (n - 1);
  int64_t m = ((p % period) + period) % period;
  return m < n ? m : period - m;
}

// The pads of every axis (begin then end) from the pads and axes inputs.
Expected<std::vector<int64_t>> readPads(const KernelContext &ctx, int64_t rank) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, readIntsInput(ctx, 1, "pads"));
  std::vector<int64_t> axes;
  if (ctx.has(3)) {
    KILN_ASSIGN_OR_RETURN(axes, readIntsInput(ctx, 3, "axes"));
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  int64_t n = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads.size()) != 2 * n)
    return ctx.error("pads has ", pads.size(), " entries, expected ", 2 * n);
  std::vector<int64_t> all(2 * rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t a, resolveAxis(ctx, axes[i], rank));
    all[a] = pads[i];
    all[a + rank] = pads[i + n];
  }
  return all;
}

// The constant value of Pad as a 1-element tensor of the data's dtype.
Expected<Tensor> padValue(const KernelContext &ctx, DType dtype) {
  Tensor v(dtype, {});
  if (!ctx.has(2) || ctx.in(2).numel() == 0) return v;
  const Tensor &c = ctx.in(2);
  if (c.numel() != 1) return ctx.error("constant_value must hold one element");
  if (c.dtype() == DType::String || dtype == DType::String) {
    if (c.dtype() != dtype) return ctx.error("constant_value has dtype ", dtypeName(c.dtype()));
    return c.reshaped({});
  }
  return convertTensor(c.reshaped({}), dtype);
}

Status padKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  int64_t rank = x.rank();
  std::string mode = ctx.node().getString("mode");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return ctx.error("unknown mode '", mode, "'");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, readPads(ctx, rank));
  KILN_ASSIGN_OR_RETURN(Tensor value, padValue(ctx, x.dtype()));
  // Negative pads crop first; the remaining window [lo, lo + n) is then
  // padded, so reflect/edge/wrap see the cropped data (as the reference does).
  Shape64 shape(rank), inStrides = stridesOf(x.shape());
  std::vector<std::vector<int64_t>> source(rank); // input index per output index, -1 = pad value
  // First the output shape, overflow-checked and bounded before anything is
  // allocated; then the source index of every output index along each axis.
  for (int64_t a = 0; a < rank; ++a) {
    int64_t begin = pads[a], end = pads[a + rank];
    if (begin < -x.dim(a) || end < -x.dim(a))
      return ctx.error("pads crop more than the ", x.dim(a), " elements of axis ", a);
    int64_t lo = std::max<int64_t>(0, -begin);
    int64_t n = x.dim(a) - lo - std::max<int64_t>(0, -end);
    if (n < 0) return ctx.error("pads crop more than the ", x.dim(a), " elements of axis ", a);
    int64_t before = std::max<int64_t>(0, begin), after = std::max<int64_t>(0, end);
    if (__builtin_add_overflow(before, n, &shape[a]) ||
        __builtin_add_overflow(shape[a], after, &shape[a]))
      return ctx.error("pads ", shapeToString(pads), " overflow axis ", a);
    if (mode != "constant" && n == 0 && shape[a] > 0)
      return ctx.error("cannot pad empty axis ", a, " in ", mode, " mode");
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    ctx.setOutput(0, Tensor(x.dtype(), shape)); // empty: no element to fill
    return Status::success();
  }
  int64_t bytes = static_cast<int64_t>(dtypeSize(x.dtype()));
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, d, &bytes) || bytes > (int64_t{1} << 40))
      return ctx.error("output shape ", shapeToString(shape), " needs more than 2^40 bytes");
  for (int64_t a = 0; a < rank; ++a) {
    int64_t begin = pads[a], end = pads[a + rank];
    int64_t lo = std::max<int64_t>(0, -begin);
    int64_t n = x.dim(a) - lo - std::max<int64_t>(0, -end);
    int64_t before = std::max<int64_t>(0, begin);
    for (int64_t o = 0; o < shape[a]; ++o) {
      int64_t p = o - before;
      if (p < 0 || p >= n) p = mode == "constant" ? -1 : padSource(mode, p, n);
      source[a].push_back(p < 0 ? -1 : lo + p);
    }
  }
  Tensor out(x.dtype(), shape);
  int64_t total = numelOf(shape);
  std::vector<int64_t> index(rank, 0);
  visitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *in = x.data<T>();
    T *dst = out.data<T>();
    const T fill = value.data<T>()[0];
    for (int64_t k = 0; k < total; ++k) {
      int64_t off = 0;
      for (int64_t a = 0; a < rank && off >= 0; ++a) {
        int64_t s = source[a][index[a]];
        off = s < 0 ? -1 : off + s * inStrides[a];
      }
      dst[k] = off < 0 ? fill : in[off];
      nextIndex(index, shape);
    }
  });
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

} // namespace

void registerSlicePadKernels(KernelTable &t) {
  t.add(OpKind::Concat, concatKernel);
  t.add(OpKind::Split, splitKernel);
  t.add(OpKind::Slice, sliceKernel);
  t.add(OpKind::Pad, padKernel);
}

} // namespace kiln
