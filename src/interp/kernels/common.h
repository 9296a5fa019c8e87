// Helpers shared by interpreter kernels: broadcasting, axis handling, reading
// small integer tensors, dtype dispatch. Kept deliberately plain.
#pragma once

#include "interp/kernel.h"
#include "support/tensor.h"
#include "support/status.h"

#include <cmath>
#include <type_traits>
#include <vector>

namespace kiln {

// Numpy broadcast of concrete shapes.
Expected<Shape64> broadcastShapes64(const Shape64 &a, const Shape64 &b);

// For each element of `out` (row-major), the offset of the element of a tensor
// of shape `in` that broadcasts to it. `in` must broadcast to `out`.
std::vector<int64_t> broadcastOffsets(const Shape64 &in, const Shape64 &out);

// Resolves a possibly negative axis; error naming the node when out of range.
Expected<int64_t> resolveAxis(const KernelContext &ctx, int64_t axis, int64_t rank);

// Integer tensor (any int dtype) to int64 values.
std::vector<int64_t> toInt64s(const Tensor &t);
// Numeric tensor to double values.
std::vector<double> toDoubles(const Tensor &t);

// Converts a tensor to another dtype (numeric and bool; Cast's semantics):
// integers wrap, floats to integers truncate toward zero and saturate (NaN
// gives 0), and every float conversion rounds once, to nearest even.
Tensor convertTensor(const Tensor &t, DType to);

// Iterates a row-major multi-index over `shape`; returns false after the last.
bool nextIndex(std::vector<int64_t> &index, const Shape64 &shape);

template <class T> constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Arithmetic type to compute in for storage type T (float for f16/bf16).
template <class T> using ComputeType = std::conditional_t<kIsHalfLike<T>, float, T>;

// Calls f(T{}) for numeric dtypes (float, half, ints) and bool; returns an
// error naming the node for strings.
template <class F> Status dispatchNumeric(const KernelContext &ctx, DType d, F &&f) {
  if (d == DType::String) return ctx.error("string tensors are not supported by this op");
  visitDType(d, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, std::string>) f(tag);
  });
  return Status::success();
}

// Calls f(T{}) for float dtypes only (f32, f64, f16, bf16).
template <class F> Status dispatchFloat(const KernelContext &ctx, DType d, F &&f) {
  switch (d) {
  case DType::F32: f(float{}); return Status::success();
  case DType::F64: f(double{}); return Status::success();
  case DType::F16: f(Half{}); return Status::success();
  case DType::BF16: f(BFloat16{}); return Status::success();
  default: return ctx.error("expects a float tensor, got ", dtypeName(d));
  }
}

} // namespace kiln

namespace kiln {

// ---- data movement (used by the shape, gather/scatter and index kernels) ----

// A tensor of `shape` whose element i is element offsets[i] of `src`; works for
// every dtype, strings included.
Tensor gatherOffsets(const Tensor &src, Shape64 shape, const std::vector<int64_t> &offsets);

// For each element of `shape` (row-major), the offset base + sum(index[k] *
// strides[k]): the element order of a strided view (transpose, slice, ...).
std::vector<int64_t> stridedOffsets(const Shape64 &shape, const Shape64 &strides, int64_t base);

// Reads an integer input tensor of rank <= 1 (a shape, axes, pads...) as int64
// values; error naming the input when it is not an integer tensor.
Expected<std::vector<int64_t>> readIntsInput(const KernelContext &ctx, int i, const char *what);

} // namespace kiln

namespace kiln {

// ---- whole-block copies (used by the sequence and control-flow kernels) ----

// Concatenates tensors of one dtype along an existing axis; every other dim
// must agree (the caller checks). Works for every dtype, strings included.
Tensor concatAlongAxis(const std::vector<Tensor> &parts, int64_t axis);

// Elements [start, start + length) of `t` along `axis`, the axis kept; the
// caller checks the range. Works for every dtype, strings included.
Tensor sliceAlongAxis(const Tensor &t, int64_t axis, int64_t start, int64_t length);

} // namespace kiln

#include <limits>

namespace kiln {

// ---- storing computed values (used by the resize and sampling kernels) ----

// Converts a value computed in float or double to storage type T: f16/bf16
// round to nearest even, integers truncate toward zero (like numpy's astype)
// but saturate instead of overflowing (NaN gives 0), bool is "not zero".
template <class T, class A> T storeComputed(A v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != A(0);
  } else if constexpr (std::is_integral_v<T>) {
    double d = std::trunc(static_cast<double>(v));
    if (std::isnan(d)) return T(0);
    if (d <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (d >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(d);
  } else if constexpr (kIsHalfLike<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

} // namespace kiln
