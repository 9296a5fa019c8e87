// A dense host tensor: dtype, concrete shape and a reference-counted buffer.
// Copies share the buffer (copy-on-nothing: kernels always write into fresh
// tensors, so sharing is safe). Used for weights in the IR, for constant
// folding, and as the interpreter's run-time values. Strings are stored as
// std::string objects in a separate vector.
#pragma once

#include "support/dtype.h"

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln {

using Shape64 = std::vector<int64_t>;

// The largest tensor kiln allocates: far above real models, low enough that
// a corrupt shape fails at once instead of swapping the machine to death.
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 38; // 256 GiB

// Product of dims; INT64_MAX when it overflows or a dim is negative.
int64_t numelOf(const Shape64 &shape);
std::string shapeToString(const Shape64 &shape); // "[2,3,4]"
// Row-major strides in elements.
Shape64 stridesOf(const Shape64 &shape);

class Tensor {
public:
  Tensor() = default;
  // Zero-initialized tensor (empty strings for String). Throws
  // std::length_error for a shape over kMaxTensorBytes (or one whose element
  // count overflows) and std::bad_alloc when memory runs out: callers that
  // size tensors from untrusted data turn these into errors at their layer's
  // boundary (the interpreter does, per kernel).
  Tensor(DType dtype, Shape64 shape);
  // Like the constructor, but numeric contents are left undefined: for a
  // kernel that writes every element (the CPU runtime's outputs).
  static Tensor uninitialized(DType dtype, Shape64 shape);
  // Wraps external memory (e.g. an mmapped file); `owner` keeps it alive.
  static Tensor view(DType dtype, Shape64 shape, std::shared_ptr<const void> owner,
                     const void *data);

  template <class T> static Tensor scalar(T v) {
    Tensor t(DTypeOf<T>::value, {});
    t.data<T>()[0] = v;
    return t;
  }
  template <class T> static Tensor fromVector(const std::vector<T> &v, Shape64 shape) {
    Tensor t(DTypeOf<T>::value, std::move(shape));
    for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = v[i];
    return t;
  }

  bool defined() const { return defined_; }
  DType dtype() const { return dtype_; }
  const Shape64 &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t numel() const { return numelOf(shape_); }
  size_t byteSize() const { return static_cast<size_t>(numel()) * dtypeSize(dtype_); }

  template <class T> T *data() { return static_cast<T *>(mutableRaw()); }
  template <class T> const T *data() const { return static_cast<const T *>(raw()); }
  template <class T> std::span<T> span() { return {data<T>(), static_cast<size_t>(numel())}; }
  template <class T> std::span<const T> span() const {
    return {data<T>(), static_cast<size_t>(numel())};
  }
  const void *raw() const;
  void *mutableRaw();

  // Same data, new shape (numel must match).
  Tensor reshaped(Shape64 shape) const;
  // A deep copy with its own buffer.
  Tensor clone() const;

  // Element i converted to double / int64 (numeric and bool dtypes).
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  void setDouble(int64_t i, double v);
  void setInt(int64_t i, int64_t v);

  // Exact comparison of dtype, shape and bytes (NaNs compare by bit pattern).
  bool identical(const Tensor &other) const;

private:
  // zeroed: numeric contents set to 0, else left undefined.
  Tensor(DType dtype, Shape64 shape, bool zeroed);

  DType dtype_ = DType::F32;
  Shape64 shape_;
  bool defined_ = false;
  std::shared_ptr<void> owner_; // keeps the bytes alive
  void *data_ = nullptr;
  std::shared_ptr<std::vector<std::string>> strings_;
};

} // namespace kiln
