#include "support/value.h"

namespace kiln {

std::string RtValue::describe() const {
  switch (kind) {
  case Kind::Tensor:
    return std::string(dtypeName(tensor.dtype())) + shapeToString(tensor.shape());
  case Kind::Sequence:
    return "seq<" + std::to_string(sequence.size()) + " tensors>";
  case Kind::Optional:
    return inner ? "opt<" + inner->describe() + ">" : "opt<empty>";
  }
  return "?";
}

} // namespace kiln
