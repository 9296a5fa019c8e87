// Helpers shared by the host-op files (host_ops*.cpp), not part of the
// host-op interface: result allocation that fails as an error, reading small
// integer inputs, axis checks, and element copies that work for every dtype
// (strings are objects, every other dtype is copied as bytes).
#pragma once

#include "support/status.h"
#include "support/tensor.h"

#include <vector>

namespace kiln::runtime::host::detail {

// A result tensor; a shape too large to allocate is an error, not a throw.
Expected<Tensor> newTensor(DType dtype, const Shape64 &shape);

// Integer values of an i32/i64 tensor of any shape.
Expected<std::vector<int64_t>> readInts(const Tensor &t, const char *what);
// A list input (shape, axes, pads): integers of rank 0 or 1.
Expected<std::vector<int64_t>> readList(const Tensor &t, const char *what);
// One integer of any integer dtype, from a one-element tensor (TopK's k,
// a sequence position).
Expected<int64_t> readOneInt(const Tensor &t, const char *what);

Expected<int64_t> resolveAxis(int64_t axis, int64_t rank);

Status checkNotString(const Tensor &t, const char *what);

// Copies `count` elements from src[from] to dst[to].
void copyElements(const Tensor &src, int64_t from, Tensor &dst, int64_t to, int64_t count);

// Whether each element is non-zero (non-empty for strings; NaN is non-zero,
// -0 is zero).
std::vector<bool> nonZeroMask(const Tensor &t);

// A tensor viewed as [outer, dim, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};
AxisSplit splitAt(const Shape64 &shape, int64_t axis);

// Calls f(k, index) for every element of `shape`, k counting in row-major
// order and index its multi-index.
template <class F> void forEachIndex(const Shape64 &shape, F &&f) {
  int64_t n = numelOf(shape);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(k, index);
    for (int64_t a = static_cast<int64_t>(shape.size()) - 1; a >= 0 && ++index[a] == shape[a]; --a)
      index[a] = 0;
  }
}

} // namespace kiln::runtime::host::detail
