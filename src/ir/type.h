// The static type of an IR value: a tensor (dtype + possibly symbolic shape),
// a sequence of tensors, or an optional. A dimension is a number, a named
// symbol ("batch") or unknown ("?"); a shape may have unknown rank ("*").
//
// Text form (used by the printer and parser):
//   f32[batch,3,224,224]   f32[]  (scalar)   f32[*]  (unknown rank)
//   seq<f32[?,4]>          opt<i64[2]>       opt<seq<f32[*]>>
#pragma once

#include "support/dtype.h"
#include "support/tensor.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

class Dim {
public:
  Dim() = default; // unknown
  Dim(int64_t v) : value_(v) {}
  static Dim symbol(std::string name) {
    Dim d;
    d.symbol_ = std::move(name);
    return d;
  }
  static Dim unknown() { return Dim(); }

  bool isStatic() const { return value_ >= 0; }
  bool isSymbol() const { return !symbol_.empty(); }
  bool isUnknown() const { return value_ < 0 && symbol_.empty(); }
  int64_t value() const { return value_; }
  const std::string &symbolName() const { return symbol_; }

  bool operator==(const Dim &o) const = default;
  std::string str() const;

private:
  int64_t value_ = -1;
  std::string symbol_;
};

struct Shape {
  std::vector<Dim> dims;
  bool rankKnown = true;

  Shape() = default;
  Shape(std::vector<Dim> d) : dims(std::move(d)) {}
  static Shape unranked() {
    Shape s;
    s.rankKnown = false;
    return s;
  }
  static Shape fromStatic(const Shape64 &v);

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  bool isStatic() const; // rank known and every dim a number
  std::optional<Shape64> staticDims() const;
  bool operator==(const Shape &o) const = default;
  std::string str() const;
};

class Type {
public:
  enum class Kind : uint8_t { Tensor, Sequence, Optional };

  Type() = default;
  static Type tensor(DType dtype, Shape shape) {
    Type t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    return t;
  }
  static Type sequence(Type elem) { return wrap(Kind::Sequence, std::move(elem)); }
  static Type optional(Type elem) { return wrap(Kind::Optional, std::move(elem)); }

  Kind kind() const { return kind_; }
  bool isTensor() const { return kind_ == Kind::Tensor; }
  // For tensors: the dtype and shape. For sequences/optionals: of the element.
  DType dtype() const { return isTensor() ? dtype_ : elem_->dtype(); }
  const Shape &shape() const { return isTensor() ? shape_ : elem_->shape(); }
  Shape &mutableShape() { return shape_; }
  const Type &element() const { return *elem_; }

  bool operator==(const Type &o) const;
  std::string str() const;

private:
  static Type wrap(Kind k, Type elem) {
    Type t;
    t.kind_ = k;
    t.elem_ = std::make_shared<Type>(std::move(elem));
    return t;
  }
  Kind kind_ = Kind::Tensor;
  DType dtype_ = DType::F32;
  Shape shape_ = Shape::unranked();
  std::shared_ptr<const Type> elem_;
};

} // namespace kiln
