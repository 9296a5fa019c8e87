// Device buffers, and the spares a buffer leaves for the next allocation of
// its size class.
#include "runtime/vulkan/vulkan_device.h"

#include <algorithm>
#include <bit>

namespace kiln::vulkan {

namespace {

// Spares kept at most: enough for a large model's activations, run after
// run, without holding on to what a one-off big tensor needed.
constexpr size_t kRecycleBytes = size_t(1) << 30;

// Sizes round up to a quarter power of two (at most 25% over), so that a
// freed buffer fits the next run's tensor of about the same size.
size_t sizeClass(size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  const int top = int(std::bit_width(bytes)) - 1; // 2^top <= bytes
  const size_t step = size_t(1) << std::max(0, top - 2);
  return (bytes + step - 1) / step * step;
}

} // namespace

Buffer::~Buffer() {
  if (device_) device_->recycle(*this);
}

void Device::recycle(Buffer &b) {
  if (b.capacity_ > 0 && spareBytes_ + b.capacity_ <= kRecycleBytes) {
    spare_.emplace(b.capacity_, Spare{b.buffer_, b.memory_, b.mapped_});
    spareBytes_ += b.capacity_;
    return;
  }
  if (b.mapped_) api_.vkUnmapMemory(device_, b.memory_);
  if (b.buffer_) api_.vkDestroyBuffer(device_, b.buffer_, nullptr);
  if (b.memory_) api_.vkFreeMemory(device_, b.memory_, nullptr);
}

Expected<std::unique_ptr<Buffer>> Device::allocate(size_t bytes) {
  std::unique_ptr<Buffer> b(new Buffer);
  b->size_ = bytes;
  const size_t capacity = sizeClass(bytes);
  if (auto it = spare_.find(capacity); it != spare_.end()) {
    b->device_ = this;
    b->capacity_ = capacity;
    b->buffer_ = it->second.buffer;
    b->memory_ = it->second.memory;
    b->mapped_ = it->second.mapped;
    spareBytes_ -= capacity;
    spare_.erase(it);
    return b;
  }
  b->device_ = this; // from here its destructor frees what was made
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = capacity;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  KILN_RETURN_IF_ERROR(
      check(api_.vkCreateBuffer(device_, &info, nullptr, &b->buffer_), "vkCreateBuffer"));
  VkMemoryRequirements req{};
  api_.vkGetBufferMemoryRequirements(device_, b->buffer_, &req);
  if (!(req.memoryTypeBits & (1u << memoryType_)))
    return makeError("Vulkan device ", info_.name, ": buffers cannot use host-visible memory");
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = memoryType_;
  KILN_RETURN_IF_ERROR(
      check(api_.vkAllocateMemory(device_, &alloc, nullptr, &b->memory_), "vkAllocateMemory"));
  KILN_RETURN_IF_ERROR(
      check(api_.vkBindBufferMemory(device_, b->buffer_, b->memory_, 0), "vkBindBufferMemory"));
  KILN_RETURN_IF_ERROR(check(
      api_.vkMapMemory(device_, b->memory_, 0, VK_WHOLE_SIZE, 0, &b->mapped_), "vkMapMemory"));
  b->capacity_ = capacity; // complete: may be recycled
  return b;
}

} // namespace kiln::vulkan
