#include "ir/type.h"

namespace kiln {

std::string Dim::str() const {
  if (isStatic()) return std::to_string(value_);
  if (isSymbol()) return symbol_;
  return "?";
}

Shape Shape::fromStatic(const Shape64 &v) {
  Shape s;
  for (int64_t d : v) s.dims.emplace_back(d);
  return s;
}

bool Shape::isStatic() const {
  if (!rankKnown) return false;
  for (const Dim &d : dims)
    if (!d.isStatic()) return false;
  return true;
}

std::optional<Shape64> Shape::staticDims() const {
  if (!isStatic()) return std::nullopt;
  Shape64 v;
  for (const Dim &d : dims) v.push_back(d.value());
  return v;
}

std::string Shape::str() const {
  if (!rankKnown) return "[*]";
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + dims[i].str();
  return s + "]";
}

bool Type::operator==(const Type &o) const {
  if (kind_ != o.kind_) return false;
  if (kind_ == Kind::Tensor) return dtype_ == o.dtype_ && shape_ == o.shape_;
  return *elem_ == *o.elem_;
}

std::string Type::str() const {
  switch (kind_) {
  case Kind::Tensor:
    return std::string(dtypeName(dtype_)) + shape_.str();
  case Kind::Sequence:
    return "seq<" + elem_->str() + ">";
  case Kind::Optional:
    return "opt<" + elem_->str() + ">";
  }
  return "?";
}

} // namespace kiln
