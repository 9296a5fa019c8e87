// Tensors that live in a Vulkan device's buffers, so that a model's
// dispatches hand them on without copies: a dispatch's outputs are tensor
// views of the device buffers they were written to (host-visible memory:
// host ops and the caller read them in place), and a later dispatch that
// takes such a tensor binds its buffer as it is. Weights are uploaded once.
//
// Ownership: each view holds its buffer; the registry only remembers which
// buffer a tensor's data is (weakly). Every view must be gone, and the
// registry destroyed, before the device that made the buffers.
// One thread at a time, like the device.
#pragma once

#include "runtime/vulkan/vulkan_device.h"
#include "support/tensor.h"

#include <map>
#include <memory>

namespace kiln::vulkan {

class DeviceTensors {
public:
  explicit DeviceTensors(Device &device) : device_(device) {}

  // The device buffer holding `t`'s data (from its first byte, at least
  // byteSize() long), or null when it lives elsewhere.
  std::shared_ptr<Buffer> find(const Tensor &t) const;
  // A tensor in a new device buffer, contents undefined.
  Expected<Tensor> allocate(DType dtype, const Shape64 &shape);
  // `t` copied into a new device buffer.
  Expected<Tensor> upload(const Tensor &t);
  // `t` on the device, uploaded the first time it is asked for and kept
  // (weights: their data never changes while the model lives).
  Expected<Tensor> constant(const Tensor &t);

  // Whether a dispatch not yet run may write `t`'s data: it lies in a buffer
  // allocate() made since the last markRun() (uploads are written by the
  // host, never pending). The host must flush the device before reading it.
  bool pendingWrite(const Tensor &t) const;
  // The device has run everything recorded so far (Device::flush).
  void markRun() { ranBefore_ = nextSerial_; }

private:
  struct Entry {
    std::weak_ptr<Buffer> buffer;
    uint64_t serial = 0; // allocate()'s count at its making; 0: written by the host
  };
  // The entry of the buffer holding `data` (an interior pointer too), or null.
  const Entry *containing(const void *data) const;
  Expected<Tensor> make(DType dtype, const Shape64 &shape, uint64_t serial);

  Device &device_;
  std::map<const void *, Entry> byData_;
  uint64_t nextSerial_ = 1, ranBefore_ = 1;
  size_t sweptSize_ = 64;                    // byData_'s size after the last sweep of dead entries
  std::map<const void *, Tensor> constants_; // by the host data's address
};

} // namespace kiln::vulkan
