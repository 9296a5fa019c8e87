#include "runtime/api/input_check.h"

#include <unordered_map>

namespace kiln::rt {

namespace {

// Why `t` does not fit `info`'s tensor, or "". Symbols bind across the
// model's plain tensor inputs only (`bound`: null inside sequences and
// optionals, whose tensors may differ).
std::string tensorMismatch(const artifact::TensorInfo &info, const Tensor &t,
                           std::unordered_map<std::string, int64_t> *bound) {
  if (!t.defined() || t.dtype() != info.dtype)
    return "dtype is " + std::string(t.defined() ? dtypeName(t.dtype()) : "undefined");
  if (!info.rankKnown) return "";
  if (t.rank() != static_cast<int64_t>(info.dims.size()))
    return "shape " + shapeToString(t.shape()) + " has rank " + std::to_string(t.rank());
  if (!bound) return "";
  for (size_t d = 0; d < info.dims.size(); ++d) {
    if (info.dims[d] >= 0 && t.dim(d) != info.dims[d])
      return "shape " + shapeToString(t.shape()) + " differs in dim " + std::to_string(d);
    if (info.dims[d] < 0 && !info.dimNames[d].empty()) {
      auto [it, fresh] = bound->emplace(info.dimNames[d], t.dim(d));
      if (!fresh && it->second != t.dim(d))
        return "dim " + std::to_string(d) + " is " + std::to_string(t.dim(d)) + " but '" +
               info.dimNames[d] + "' is " + std::to_string(it->second) + " in another input";
    }
  }
  return "";
}

// Why `v` does not fit `info` from container `depth` inward, or "".
std::string valueMismatch(const artifact::TensorInfo &info, size_t depth, const RtValue &v,
                          std::unordered_map<std::string, int64_t> &bound) {
  if (depth == info.containers.size())
    return v.isTensor() ? tensorMismatch(info, v.tensor, depth == 0 ? &bound : nullptr)
                        : "it is " + v.describe();
  if (info.containers[depth] == artifact::ContainerKind::Optional) {
    if (!v.isOptional()) return "it is " + v.describe() + ", not an optional";
    return v.inner ? valueMismatch(info, depth + 1, *v.inner, bound) : "";
  }
  if (!v.isSequence()) return "it is " + v.describe() + ", not a sequence";
  if (depth + 1 != info.containers.size()) return "a sequence of sequences";
  for (size_t i = 0; i < v.sequence.size(); ++i)
    if (std::string why = tensorMismatch(info, v.sequence[i], nullptr); !why.empty())
      return "tensor " + std::to_string(i) + ": " + why;
  return "";
}

} // namespace

std::string inputMismatch(const std::vector<artifact::TensorInfo> &declared,
                          const std::vector<RtValue> &inputs) {
  if (inputs.size() != declared.size())
    return "the model takes " + std::to_string(declared.size()) + " inputs, got " +
           std::to_string(inputs.size());
  std::unordered_map<std::string, int64_t> bound;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (std::string why = valueMismatch(declared[i], 0, inputs[i], bound); !why.empty())
      return "input '" + declared[i].name + "': " + why + " (the model expects " +
             artifact::typeText(declared[i]) + ")";
  return "";
}

} // namespace kiln::rt
