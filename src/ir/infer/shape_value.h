// Compile-time tracing of small integer tensors that hold shapes. Exported
// models compute target shapes at run time (Shape -> Gather -> Concat ->
// Reshape); to give such a Reshape a precise, possibly symbolic output shape,
// inference follows the chain back and evaluates it element by element. Each
// element is a known integer, a symbolic dim ("batch"), or unknown.
#pragma once

#include "ir/graph.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

class SymInt {
public:
  SymInt() = default; // unknown
  static SymInt known(int64_t v) {
    SymInt s;
    s.kind_ = Kind::Known;
    s.value_ = v;
    return s;
  }
  // From a dim of a shape: static -> known, symbol -> symbol, else unknown.
  static SymInt fromDim(const Dim &d);

  bool isKnown() const { return kind_ == Kind::Known; }
  bool isSymbol() const { return kind_ == Kind::Symbol; }
  int64_t value() const { return value_; }
  const std::string &symbol() const { return symbol_; }
  // As a dim of an output shape (a negative known value becomes unknown).
  Dim toDim() const;
  bool operator==(const SymInt &o) const = default;

private:
  enum class Kind : uint8_t { Unknown, Known, Symbol };
  Kind kind_ = Kind::Unknown;
  int64_t value_ = 0;
  std::string symbol_;
};

// One axis of a Slice after numpy's clamping: the first index taken and how
// many elements are taken (step != 0).
struct SliceRange {
  int64_t start = 0, count = 0;
};
SliceRange clampSliceRange(int64_t start, int64_t end, int64_t step, int64_t dim);

// The elements (row-major) of a small integer value, traced back through
// Constant, Shape, Size, ConstantOfShape, Gather, Concat, Slice, Transpose,
// Unsqueeze/Squeeze/Reshape/Flatten, Cast, Identity, integer
// Add/Sub/Mul/Div, Equal and Where; nullopt when the chain leads to
// something that cannot be traced (a graph input, a data-dependent op).
std::optional<std::vector<SymInt>> traceShapeValue(const Value *v);

// The traced elements when every one is a known integer (pads, axes,
// starts... computed from constants), else nullopt.
std::optional<std::vector<int64_t>> traceKnownInts(const Value *v);

// Dims of a shape input for ops like Expand and ConstantOfShape: the traced
// elements as dims, or `rank` unknown dims when only the length is known
// (from the input's static type), or nullopt.
std::optional<std::vector<Dim>> shapeInputDims(const Value *v);

} // namespace kiln
