// The runtime's host ops (see host_ops.h). Data movement copies elements as
// bytes of their dtype's size, so one code path serves every dtype but
// string; the loops mirror the interpreter's kernels so results agree bit for
// bit (ReduceMean sums in the same order).
#include "runtime/cpu/host_ops.h"

#include "runtime/cpu/host_ops_util.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

namespace kiln::runtime::host {

namespace detail {

Expected<Tensor> newTensor(DType dtype, const Shape64 &shape) {
  try {
    return Tensor(dtype, shape);
  } catch (const std::length_error &) {
    return makeError("output shape ", shapeToString(shape), " is too large");
  } catch (const std::bad_alloc &) {
    return makeError("out of memory for output shape ", shapeToString(shape));
  }
}

Expected<std::vector<int64_t>> readInts(const Tensor &t, const char *what) {
  if (t.dtype() != DType::I32 && t.dtype() != DType::I64)
    return makeError(what, " must be i32 or i64, got ", dtypeName(t.dtype()));
  std::vector<int64_t> values(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) values[i] = t.getInt(i);
  return values;
}

Expected<std::vector<int64_t>> readList(const Tensor &t, const char *what) {
  if (t.rank() > 1)
    return makeError(what, " must have rank 0 or 1, got shape ", shapeToString(t.shape()));
  return readInts(t, what);
}

Expected<int64_t> readOneInt(const Tensor &t, const char *what) {
  if (!isInt(t.dtype()) || t.numel() != 1)
    return makeError(what, " must be a one-element integer tensor, got ", dtypeName(t.dtype()),
                     shapeToString(t.shape()));
  return t.getInt(0);
}

Expected<int64_t> resolveAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return makeError("axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

// Elements are copied as bytes, which strings (stored as objects) are not.
Status checkNotString(const Tensor &t, const char *what) {
  if (t.dtype() == DType::String) return makeError(what, " of dtype string is not supported");
  return Status::success();
}

void copyElements(const Tensor &src, int64_t from, Tensor &dst, int64_t to, int64_t count) {
  if (count <= 0) return;
  if (src.dtype() == DType::String) {
    std::copy_n(src.data<std::string>() + from, count, dst.data<std::string>() + to);
    return;
  }
  const size_t size = dtypeSize(src.dtype());
  std::memcpy(static_cast<unsigned char *>(dst.mutableRaw()) + to * size,
              static_cast<const unsigned char *>(src.raw()) + from * size, count * size);
}

std::vector<bool> nonZeroMask(const Tensor &t) {
  std::vector<bool> mask(t.numel());
  visitDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, std::string>)
        mask[i] = !p[i].empty();
      else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        mask[i] = static_cast<float>(p[i]) != 0.0f;
      else
        mask[i] = p[i] != T(0);
    }
  });
  return mask;
}

AxisSplit splitAt(const Shape64 &shape, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    (i < axis ? s.outer : i > axis ? s.inner : s.dim) *= shape[i];
  return s;
}

} // namespace detail

namespace {

using namespace detail;

// The axes from the input when it is given, else from the parameters.
Expected<std::vector<int64_t>> axesFrom(const Tensor &input, const std::vector<int64_t> &param) {
  if (input.defined()) return readList(input, "axes");
  return param;
}

// Marks the axes named by `axes` (negative counts from the back, none twice).
Expected<std::vector<bool>> axisMask(const std::vector<int64_t> &axes, int64_t rank) {
  std::vector<bool> mask(rank, false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(a, rank));
    if (mask[axis]) return makeError("axis ", a, " is repeated");
    mask[axis] = true;
  }
  return mask;
}

// The element offsets of a sub-space with these dims and strides, row-major.
std::vector<int64_t> offsetsOf(const Shape64 &dims, const Shape64 &strides) {
  std::vector<int64_t> offsets(numelOf(dims));
  forEachIndex(dims, [&](int64_t k, const std::vector<int64_t> &index) {
    for (size_t a = 0; a < dims.size(); ++a) offsets[k] += index[a] * strides[a];
  });
  return offsets;
}

// Reshape's target: 0 copies the input dim (unless allowZero), one -1 takes
// what is left.
Expected<Shape64> reshapeTarget(const Shape64 &in, const std::vector<int64_t> &target,
                                bool allowZero) {
  Shape64 out(target.size());
  int64_t inferred = -1, known = 1;
  bool hasZero = false, overflow = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == -1) {
      if (inferred >= 0) return makeError("shape ", shapeToString(target), " has two -1 dims");
      inferred = static_cast<int64_t>(i);
      continue;
    }
    if (d < -1) return makeError("shape ", shapeToString(target), " has an invalid dim ", d);
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return makeError("shape ", shapeToString(target), " copies dim ", i, " of input ",
                         shapeToString(in), " which has no such dim");
      d = in[i];
    }
    out[i] = d;
    if (d == 0)
      hasZero = true;
    else if (!overflow)
      overflow = __builtin_mul_overflow(known, d, &known);
  }
  if (hasZero)
    known = 0;
  else if (overflow)
    return makeError("shape ", shapeToString(target), " has more elements than int64 can count");
  int64_t numel = numelOf(in);
  if (inferred >= 0) {
    if (known == 0 || numel % known != 0)
      return makeError("cannot reshape ", shapeToString(in), " to ", shapeToString(target));
    out[inferred] = numel / known;
  } else if (known != numel) {
    return makeError("cannot reshape ", shapeToString(in), " (", numel, " elements) to ",
                     shapeToString(out));
  }
  return out;
}

// Maps a position p outside [0, n) back into it (n > 0): reflect mirrors
// without repeating the edge, edge clamps, wrap repeats.
int64_t padSource(PadMode mode, int64_t p, int64_t n) {
  if (mode == PadMode::Edge) return std::clamp(p, int64_t(0), n - 1);
  if (mode == PadMode::Wrap || n == 1) return ((p % n) + n) % n;
  int64_t period = 2 * (n - 1);
  int64_t m = ((p % period) + period) % period;
  return m < n ? m : period - m;
}

// Every axis's pads (begins, then ends) from the pads and axes inputs.
Expected<std::vector<int64_t>> padsPerAxis(const Tensor &padsInput, const Tensor &axesInput,
                                           int64_t rank) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, readList(padsInput, "pads"));
  std::vector<int64_t> axes;
  if (axesInput.defined()) {
    KILN_ASSIGN_OR_RETURN(axes, readList(axesInput, "axes"));
    KILN_RETURN_IF_ERROR(axisMask(axes, rank)); // checks range and repeats
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  int64_t n = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads.size()) != 2 * n)
    return makeError("pads has ", pads.size(), " entries, expected ", 2 * n);
  std::vector<int64_t> all(2 * rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    all[a] = pads[i];
    all[a + rank] = pads[i + n];
  }
  return all;
}

// The bytes of Pad's fill value: zeros unless a non-empty constant_value is
// given, which must be one element of data's dtype.
Expected<std::vector<unsigned char>> padFill(const Tensor &value, DType dtype) {
  std::vector<unsigned char> fill(dtypeSize(dtype), 0);
  if (!value.defined() || value.numel() == 0) return fill;
  if (value.numel() != 1)
    return makeError("constant_value must hold one element, got shape ",
                     shapeToString(value.shape()));
  if (value.dtype() != dtype)
    return makeError("constant_value has dtype ", dtypeName(value.dtype()), ", data has ",
                     dtypeName(dtype));
  std::memcpy(fill.data(), value.raw(), fill.size());
  return fill;
}

const char *padModeName(PadMode mode) {
  static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
  return names[static_cast<int>(mode)];
}

// One axis of Pad. Negative pads crop first: the input window [lo, lo + n)
// is kept, then padded by `before` in front (so reflect/edge/wrap see the
// cropped data, as the reference does); the axis ends up `size` long.
struct PadAxis {
  int64_t lo = 0, n = 0, before = 0, size = 0;
};

Expected<PadAxis> padAxis(int64_t dim, int64_t begin, int64_t end, PadMode mode, int64_t axis) {
  PadAxis p;
  if (begin >= -dim && end >= -dim) {
    p.lo = std::max<int64_t>(0, -begin);
    p.n = dim - p.lo - std::max<int64_t>(0, -end);
  }
  if (begin < -dim || end < -dim || p.n < 0)
    return makeError("pads crop more than the ", dim, " elements of axis ", axis);
  p.before = std::max<int64_t>(0, begin);
  if (__builtin_add_overflow(p.before, p.n, &p.size) ||
      __builtin_add_overflow(p.size, std::max<int64_t>(0, end), &p.size))
    return makeError("pads overflow axis ", axis);
  if (mode != PadMode::Constant && p.n == 0 && p.size > 0)
    return makeError("cannot pad empty axis ", axis, " in ", padModeName(mode), " mode");
  return p;
}

// The input index that each output index of the axis reads, -1 for the fill.
std::vector<int64_t> padSources(const PadAxis &p, PadMode mode) {
  std::vector<int64_t> sources(p.size);
  for (int64_t o = 0; o < p.size; ++o) {
    int64_t i = o - p.before;
    if (i < 0 || i >= p.n) i = mode == PadMode::Constant ? -1 : padSource(mode, i, p.n);
    sources[o] = i < 0 ? -1 : p.lo + i;
  }
  return sources;
}

} // namespace

// ---- views --------------------------------------------------------------------

Expected<Tensor> reshape(const Tensor &data, const Tensor &shape, const ReshapeParams &params) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> target, readList(shape, "shape"));
  KILN_ASSIGN_OR_RETURN(Shape64 out, reshapeTarget(data.shape(), target, params.allowZero));
  return data.reshaped(std::move(out));
}

Expected<Tensor> flatten(const Tensor &data, const FlattenParams &params) {
  int64_t rank = data.rank(), axis = params.axis;
  // The axis may equal the rank: everything goes to the first dim.
  if (axis < -rank || axis > rank)
    return makeError("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= data.dim(i);
  return data.reshaped({outer, inner});
}

Expected<Tensor> squeeze(const Tensor &data, const Tensor &axes, const SqueezeParams &params) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> list, axesFrom(axes, params.axes));
  KILN_ASSIGN_OR_RETURN(std::vector<bool> drop, axisMask(list, data.rank()));
  bool all = !axes.defined() && list.empty();
  Shape64 shape;
  for (int64_t i = 0; i < data.rank(); ++i) {
    if (drop[i] && data.dim(i) != 1)
      return makeError("cannot squeeze axis ", i, " of shape ", shapeToString(data.shape()),
                       ": its size is not 1");
    if (!drop[i] && !(all && data.dim(i) == 1)) shape.push_back(data.dim(i));
  }
  return data.reshaped(std::move(shape));
}

Expected<Tensor> unsqueeze(const Tensor &data, const Tensor &axes, const UnsqueezeParams &params) {
  if (!axes.defined() && params.axes.empty()) return makeError("no axes to unsqueeze");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> list, axesFrom(axes, params.axes));
  int64_t outRank = data.rank() + static_cast<int64_t>(list.size());
  KILN_ASSIGN_OR_RETURN(std::vector<bool> inserted, axisMask(list, outRank));
  Shape64 shape(outRank);
  for (int64_t i = 0, k = 0; i < outRank; ++i) shape[i] = inserted[i] ? 1 : data.dim(k++);
  return data.reshaped(std::move(shape));
}

Expected<Tensor> identity(const Tensor &data) {
  return data;
}

// ---- shape queries -------------------------------------------------------------

Expected<Tensor> shapeOf(const Tensor &data, const ShapeParams &params) {
  int64_t rank = data.rank();
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  int64_t start = clampAxis(params.start);
  int64_t end = params.end ? clampAxis(*params.end) : rank;
  Tensor out(DType::I64, {std::max<int64_t>(0, end - start)});
  for (int64_t i = start; i < end; ++i) out.data<int64_t>()[i - start] = data.dim(i);
  return out;
}

Expected<Tensor> sizeOf(const Tensor &data) {
  return Tensor::scalar<int64_t>(data.numel());
}

// ---- data movement --------------------------------------------------------------

Expected<Tensor> gather(const Tensor &data, const Tensor &indices, const GatherParams &params) {
  KILN_RETURN_IF_ERROR(checkNotString(data, "data"));
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(params.axis, data.rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> picks, readInts(indices, "indices"));
  int64_t dim = data.dim(axis);
  for (int64_t &i : picks) {
    if (i < -dim || i >= dim)
      return makeError("index ", i, " is out of range for axis ", axis, " of size ", dim);
    if (i < 0) i += dim;
  }
  // Output: data dims before axis, then the indices' dims, then the rest.
  const Shape64 &ds = data.shape();
  Shape64 shape(ds.begin(), ds.begin() + axis);
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), ds.begin() + axis + 1, ds.end());
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(data.dtype(), shape));
  int64_t outer = numelOf(Shape64(ds.begin(), ds.begin() + axis));
  size_t block = numelOf(Shape64(ds.begin() + axis + 1, ds.end())) * dtypeSize(data.dtype());
  int64_t n = static_cast<int64_t>(picks.size());
  const auto *src = static_cast<const unsigned char *>(data.raw());
  auto *dst = static_cast<unsigned char *>(out.mutableRaw());
  if (block > 0)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(dst + (o * n + j) * block, src + (o * dim + picks[j]) * block, block);
  return out;
}

Expected<Tensor> constantOfShape(const Tensor &shape, const ConstantOfShapeParams &params) {
  KILN_ASSIGN_OR_RETURN(Shape64 dims, readList(shape, "shape"));
  for (int64_t d : dims)
    if (d < 0) return makeError("shape ", shapeToString(dims), " has a negative dim");
  Tensor value = params.value.defined() ? params.value : Tensor::scalar<float>(0.0f);
  KILN_RETURN_IF_ERROR(checkNotString(value, "value"));
  if (value.numel() != 1)
    return makeError("value must hold one element, got shape ", shapeToString(value.shape()));
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(value.dtype(), dims));
  size_t size = dtypeSize(value.dtype());
  auto *dst = static_cast<unsigned char *>(out.mutableRaw());
  for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(dst + i * size, value.raw(), size);
  return out;
}

Expected<Tensor> pad(const Tensor &data, const Tensor &pads, const Tensor &constantValue,
                     const Tensor &axes, const PadParams &params) {
  KILN_RETURN_IF_ERROR(checkNotString(data, "data"));
  int64_t rank = data.rank();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> all, padsPerAxis(pads, axes, rank));
  KILN_ASSIGN_OR_RETURN(std::vector<unsigned char> fill, padFill(constantValue, data.dtype()));
  std::vector<PadAxis> plan(rank);
  Shape64 shape(rank);
  for (int64_t a = 0; a < rank; ++a) {
    KILN_ASSIGN_OR_RETURN(plan[a], padAxis(data.dim(a), all[a], all[a + rank], params.mode, a));
    shape[a] = plan[a].size;
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(data.dtype(), shape));
  if (out.numel() == 0) return out; // (an axis may still be huge: build no tables)
  std::vector<std::vector<int64_t>> sources(rank);
  for (int64_t a = 0; a < rank; ++a) sources[a] = padSources(plan[a], params.mode);
  Shape64 strides = stridesOf(data.shape());
  size_t size = dtypeSize(data.dtype());
  const auto *src = static_cast<const unsigned char *>(data.raw());
  auto *dst = static_cast<unsigned char *>(out.mutableRaw());
  forEachIndex(shape, [&](int64_t k, const std::vector<int64_t> &index) {
    const unsigned char *from = src;
    for (int64_t a = 0; a < rank && from; ++a) {
      int64_t s = sources[a][index[a]];
      from = s < 0 ? nullptr : from + s * strides[a] * size;
    }
    std::memcpy(dst + k * size, from ? from : fill.data(), size);
  });
  return out;
}

// ---- f32 math -------------------------------------------------------------------

Expected<Tensor> reduceMean(const Tensor &data, const Tensor &axes,
                            const ReduceMeanParams &params) {
  if (data.dtype() != DType::F32)
    return makeError("data must be f32, got ", dtypeName(data.dtype()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> list, axesFrom(axes, params.axes));
  if (list.empty() && params.noopWithEmptyAxes) return data;
  std::vector<bool> reduced(data.rank(), list.empty());
  if (!list.empty()) {
    KILN_ASSIGN_OR_RETURN(reduced, axisMask(list, data.rank()));
  }
  // Each output element sums the reduced sub-space starting at its base.
  Shape64 strides = stridesOf(data.shape());
  Shape64 outShape, keptDims, keptStrides, redDims, redStrides;
  for (int64_t i = 0; i < data.rank(); ++i) {
    (reduced[i] ? redDims : keptDims).push_back(data.dim(i));
    (reduced[i] ? redStrides : keptStrides).push_back(strides[i]);
    if (!reduced[i] || params.keepDims) outShape.push_back(reduced[i] ? 1 : data.dim(i));
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(DType::F32, outShape));
  std::vector<int64_t> bases = offsetsOf(keptDims, keptStrides);
  std::vector<int64_t> offsets = offsetsOf(redDims, redStrides);
  const float *in = data.data<float>();
  float *o = out.data<float>();
  float count = static_cast<float>(offsets.size());
  for (size_t k = 0; k < bases.size(); ++k) {
    float acc = 0.0f;
    for (int64_t r : offsets) acc += in[bases[k] + r];
    o[k] = acc / count; // NaN for an empty set, as numpy
  }
  return out;
}

Expected<Tensor> relu(const Tensor &x) {
  if (x.dtype() != DType::F32) return makeError("input must be f32, got ", dtypeName(x.dtype()));
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(DType::F32, x.shape()));
  const float *in = x.data<float>();
  float *o = out.data<float>();
  // NaN and -0 pass through unchanged, as in the interpreter.
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] < 0.0f ? 0.0f : in[i];
  return out;
}

} // namespace kiln::runtime::host
