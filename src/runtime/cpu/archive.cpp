#include "runtime/cpu/archive.h"

namespace kiln::cpu {

int TensorTable::add(const Tensor &t) {
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(t.raw())) + ":" +
                    std::string(dtypeName(t.dtype())) + shapeToString(t.shape());
  auto [it, inserted] = index_.emplace(std::move(key), static_cast<int>(tensors.size()));
  if (inserted) tensors.push_back(t);
  return it->second;
}

void *Loader::resolve(const std::string &symbol) {
  void *entry = resolve_ ? resolve_(symbol) : nullptr;
  if (!entry) in_.fail("generated kernel '" + symbol + "' is missing from the code section");
  return entry;
}

} // namespace kiln::cpu
