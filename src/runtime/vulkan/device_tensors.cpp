#include "runtime/vulkan/device_tensors.h"

#include <algorithm>
#include <cstring>

namespace kiln::vulkan {

std::shared_ptr<Buffer> DeviceTensors::find(const Tensor &t) const {
  if (!t.defined() || t.dtype() == DType::String) return nullptr;
  auto it = byData_.find(t.raw());
  if (it == byData_.end()) return nullptr;
  std::shared_ptr<Buffer> b = it->second.buffer.lock();
  return b && b->size() >= t.byteSize() ? b : nullptr;
}

const DeviceTensors::Entry *DeviceTensors::containing(const void *data) const {
  auto it = byData_.upper_bound(data);
  if (it == byData_.begin()) return nullptr;
  --it;
  std::shared_ptr<Buffer> b = it->second.buffer.lock();
  if (!b) return nullptr;
  const char *start = static_cast<const char *>(it->first);
  return static_cast<const char *>(data) < start + std::max<size_t>(b->size(), 1) ? &it->second
                                                                                  : nullptr;
}

bool DeviceTensors::pendingWrite(const Tensor &t) const {
  if (!t.defined() || t.dtype() == DType::String) return false;
  const Entry *e = containing(t.raw());
  return e && e->serial >= ranBefore_;
}

Expected<Tensor> DeviceTensors::allocate(DType dtype, const Shape64 &shape) {
  return make(dtype, shape, nextSerial_++);
}

Expected<Tensor> DeviceTensors::make(DType dtype, const Shape64 &shape, uint64_t serial) {
  if (dtype == DType::String) return Error{"strings have no device buffers"};
  const size_t bytes = size_t(numelOf(shape)) * dtypeSize(dtype);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> owned, device_.allocate(bytes));
  std::shared_ptr<Buffer> buffer(std::move(owned));
  // Forget buffers that are gone, so the registry stays about the size of
  // what lives: a sweep each time it doubles, not one per allocation.
  if (byData_.size() >= 2 * sweptSize_) {
    for (auto it = byData_.begin(); it != byData_.end();)
      it = it->second.buffer.expired() ? byData_.erase(it) : std::next(it);
    sweptSize_ = std::max<size_t>(64, byData_.size());
  }
  byData_[buffer->data()] = Entry{buffer, serial};
  const void *data = buffer->data();
  return Tensor::view(dtype, shape, std::shared_ptr<const void>(buffer, data), data);
}

Expected<Tensor> DeviceTensors::upload(const Tensor &t) {
  KILN_ASSIGN_OR_RETURN(Tensor d, make(t.dtype(), t.shape(), 0));
  if (t.byteSize() > 0) std::memcpy(d.mutableRaw(), t.raw(), t.byteSize());
  return d;
}

Expected<Tensor> DeviceTensors::constant(const Tensor &t) {
  if (t.dtype() == DType::String || find(t)) return t;
  auto it = constants_.find(t.raw());
  if (it != constants_.end() && it->second.shape() == t.shape() && it->second.dtype() == t.dtype())
    return it->second;
  KILN_ASSIGN_OR_RETURN(Tensor d, upload(t));
  constants_[t.raw()] = d;
  return d;
}

} // namespace kiln::vulkan
