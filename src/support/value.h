// Run-time values (of the interpreter and the CPU runtime): a tensor, a sequence of
// tensors, or an optional (empty, or holding a tensor or a sequence).
#pragma once

#include "support/tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct RtValue {
  enum class Kind : uint8_t { Tensor, Sequence, Optional };

  Kind kind = Kind::Tensor;
  Tensor tensor;                  // Kind::Tensor
  std::vector<Tensor> sequence;   // Kind::Sequence
  std::shared_ptr<RtValue> inner; // Kind::Optional; null when empty

  RtValue() = default;
  RtValue(Tensor t) : tensor(std::move(t)) {}
  static RtValue ofSequence(std::vector<Tensor> s) {
    RtValue v;
    v.kind = Kind::Sequence;
    v.sequence = std::move(s);
    return v;
  }
  static RtValue ofOptional(std::shared_ptr<RtValue> in) {
    RtValue v;
    v.kind = Kind::Optional;
    v.inner = std::move(in);
    return v;
  }

  bool isTensor() const { return kind == Kind::Tensor; }
  bool isSequence() const { return kind == Kind::Sequence; }
  bool isOptional() const { return kind == Kind::Optional; }
  // "f32[2,3]", "seq<3 x f32>", "opt<empty>" for messages and summaries.
  std::string describe() const;
};

} // namespace kiln
