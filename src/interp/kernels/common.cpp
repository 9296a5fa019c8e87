#include "interp/kernels/common.h"

#include "interp/kernels/elementwise_helpers.h"

namespace kiln {

Expected<Shape64> broadcastShapes64(const Shape64 &a, const Shape64 &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape64 out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return makeError("shapes ", shapeToString(a), " and ", shapeToString(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcastOffsets(const Shape64 &in, const Shape64 &out) {
  int64_t n = numelOf(out);
  std::vector<int64_t> offsets(n);
  if (in == out) {
    for (int64_t i = 0; i < n; ++i) offsets[i] = i;
    return offsets;
  }
  size_t rank = out.size();
  // Stride of each output axis in the input (0 where broadcast).
  Shape64 inStrides = stridesOf(in);
  Shape64 strides(rank, 0);
  for (size_t i = 0; i < in.size(); ++i) {
    size_t o = i + rank - in.size();
    strides[o] = in[i] == 1 ? 0 : inStrides[i];
  }
  std::vector<int64_t> index(rank, 0);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    offsets[k] = off;
    for (int64_t ax = static_cast<int64_t>(rank) - 1; ax >= 0; --ax) {
      if (++index[ax] < out[ax]) {
        off += strides[ax];
        break;
      }
      off -= strides[ax] * (out[ax] - 1);
      index[ax] = 0;
    }
  }
  return offsets;
}

Expected<int64_t> resolveAxis(const KernelContext &ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return ctx.error("axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> toInt64s(const Tensor &t) {
  std::vector<int64_t> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.getInt(i);
  return v;
}

std::vector<double> toDoubles(const Tensor &t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.getDouble(i);
  return v;
}

namespace {

using ew::fromDouble;
using ew::kIsIntType;
using ew::toDouble;

// One element from S to D: ints wrap, floats to ints truncate and saturate
// (NaN -> 0; ONNX leaves both undefined), every float rounding happens once.
template <class S, class D> D convertElement(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return static_cast<ComputeType<S>>(v) != ComputeType<S>(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    return static_cast<D>(static_cast<ComputeType<D>>(v ? 1 : 0));
  } else if constexpr (kIsIntType<S> && kIsIntType<D>) {
    return static_cast<D>(v); // modular since C++20
  } else if constexpr (std::is_same_v<D, float> || std::is_same_v<D, double>) {
    return static_cast<D>(static_cast<ComputeType<S>>(v)); // one correct rounding
  } else if constexpr (kIsHalfLike<D> && (kIsHalfLike<S> || std::is_same_v<S, float>)) {
    return D(static_cast<float>(v)); // float holds the value exactly
  } else {
    return fromDouble<D>(toDouble(v)); // to f16/bf16 from wider types, or float -> int
  }
}

} // namespace

Tensor convertTensor(const Tensor &x, DType to) {
  if (x.dtype() == to) return x;
  Tensor out(to, x.shape());
  visitDType(x.dtype(), [&](auto srcTag) {
    using S = decltype(srcTag);
    if constexpr (!std::is_same_v<S, std::string>) {
      visitDType(to, [&](auto dstTag) {
        using D = decltype(dstTag);
        if constexpr (!std::is_same_v<D, std::string>) {
          const S *src = x.data<S>();
          D *dst = out.data<D>();
          for (int64_t i = 0; i < x.numel(); ++i) dst[i] = convertElement<S, D>(src[i]);
        }
      });
    }
  });
  return out;
}

bool nextIndex(std::vector<int64_t> &index, const Shape64 &shape) {
  for (int64_t ax = static_cast<int64_t>(shape.size()) - 1; ax >= 0; --ax) {
    if (++index[ax] < shape[ax]) return true;
    index[ax] = 0;
  }
  return false;
}

} // namespace kiln

namespace kiln {

Tensor gatherOffsets(const Tensor &src, Shape64 shape, const std::vector<int64_t> &offsets) {
  Tensor out(src.dtype(), std::move(shape));
  visitDType(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *in = src.data<T>();
    T *dst = out.data<T>();
    for (size_t i = 0; i < offsets.size(); ++i) dst[i] = in[offsets[i]];
  });
  return out;
}

std::vector<int64_t> stridedOffsets(const Shape64 &shape, const Shape64 &strides, int64_t base) {
  int64_t n = numelOf(shape);
  std::vector<int64_t> offsets(n);
  if (n == 0) return offsets;
  std::vector<int64_t> index(shape.size(), 0);
  int64_t off = base;
  for (int64_t k = 0; k < n; ++k) {
    offsets[k] = off;
    // Advance the multi-index and keep `off` in step with it.
    for (int64_t ax = static_cast<int64_t>(shape.size()) - 1; ax >= 0; --ax) {
      if (++index[ax] < shape[ax]) {
        off += strides[ax];
        break;
      }
      off -= strides[ax] * (shape[ax] - 1);
      index[ax] = 0;
    }
  }
  return offsets;
}

Expected<std::vector<int64_t>> readIntsInput(const KernelContext &ctx, int i, const char *what) {
  const Tensor &t = ctx.in(i);
  if (!isInt(t.dtype()))
    return ctx.error(what, " (input ", i, ") must be an integer tensor, got ",
                     dtypeName(t.dtype()));
  if (t.rank() > 1)
    return ctx.error(what, " (input ", i, ") must have rank 0 or 1, got ",
                     shapeToString(t.shape()));
  return toInt64s(t);
}

} // namespace kiln

#include <cstring>

namespace kiln {

namespace {
// Copies n consecutive elements; strings are assigned, everything else is
// plain bytes.
void copyElementRun(const Tensor &src, int64_t srcOffset, Tensor &dst, int64_t dstOffset,
                    int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DType::String) {
    const std::string *from = src.data<std::string>() + srcOffset;
    std::string *to = dst.data<std::string>() + dstOffset;
    for (int64_t i = 0; i < n; ++i) to[i] = from[i];
    return;
  }
  size_t size = dtypeSize(src.dtype());
  std::memcpy(static_cast<char *>(dst.mutableRaw()) + dstOffset * size,
              static_cast<const char *>(src.raw()) + srcOffset * size, n * size);
}

int64_t dimProduct(const Shape64 &shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= shape[i];
  return p;
}
} // namespace

Tensor concatAlongAxis(const std::vector<Tensor> &parts, int64_t axis) {
  Shape64 shape = parts.at(0).shape();
  shape[axis] = 0;
  for (const Tensor &p : parts) shape[axis] += p.dim(axis);
  Tensor out(parts[0].dtype(), shape);
  int64_t outer = dimProduct(shape, 0, axis);
  int64_t rowLength = dimProduct(shape, axis, shape.size()); // one outer step of `out`
  int64_t offset = 0;
  for (const Tensor &p : parts) {
    int64_t block = dimProduct(p.shape(), axis, p.shape().size());
    for (int64_t o = 0; o < outer; ++o)
      copyElementRun(p, o * block, out, o * rowLength + offset, block);
    offset += block;
  }
  return out;
}

Tensor sliceAlongAxis(const Tensor &t, int64_t axis, int64_t start, int64_t length) {
  Shape64 shape = t.shape();
  int64_t inner = dimProduct(shape, axis + 1, shape.size());
  int64_t outer = dimProduct(shape, 0, axis);
  int64_t dim = shape[axis];
  shape[axis] = length;
  Tensor out(t.dtype(), shape);
  for (int64_t o = 0; o < outer; ++o)
    copyElementRun(t, (o * dim + start) * inner, out, o * length * inner, length * inner);
  return out;
}

} // namespace kiln
