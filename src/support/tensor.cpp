#include "support/tensor.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace kiln {

int64_t numelOf(const Shape64 &shape) {
  // Saturates instead of wrapping, so a corrupt shape can never pass for a
  // small one; the allocation of such a tensor then fails loudly.
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

std::string shapeToString(const Shape64 &shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  return os.str();
}

Shape64 stridesOf(const Shape64 &shape) {
  Shape64 strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

namespace {

// Large buffers are recycled through a small process-wide cache. A model's
// outputs (and any buffer the memory plan does not hold) are freed and
// allocated again at the same sizes every run, and glibc maps and unmaps
// each one (a size at or above its mmap threshold stays on mmap), so every
// run paid a page fault and a page clear per 4 KiB: 11% of a segmentation
// model whose output is 21 x 256 x 256. Bounded, so little memory stays
// held when tensors go away; exact sizes (rounded to 64 KiB) only.
class LargeBufferCache {
public:
  static constexpr size_t kMinBytes = size_t(1) << 18, kGranule = size_t(1) << 16;
  static constexpr size_t kMaxEntries = 16, kMaxBytes = size_t(128) << 20;

  void *take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i].first == bytes) {
        void *p = free_[i].second;
        held_ -= bytes;
        free_.erase(free_.begin() + std::ptrdiff_t(i));
        return p;
      }
    return nullptr;
  }
  void give(void *p, size_t bytes) {
    std::vector<void *> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.emplace_back(bytes, p);
      held_ += bytes;
      while (free_.size() > kMaxEntries || held_ > kMaxBytes) { // oldest first
        held_ -= free_.front().first;
        evicted.push_back(free_.front().second);
        free_.erase(free_.begin());
      }
    }
    for (void *q : evicted) std::free(q);
  }

private:
  std::mutex mu_;
  std::vector<std::pair<size_t, void *>> free_;
  size_t held_ = 0;
};

// Never destroyed: tensors may be released during static destruction.
LargeBufferCache &largeBuffers() {
  static LargeBufferCache *cache = new LargeBufferCache;
  return *cache;
}

// 64-byte alignment so that vector code and mmap-style views line up.
std::shared_ptr<void> allocateBytes(size_t bytes, bool zero) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  if (rounded >= LargeBufferCache::kMinBytes) {
    const size_t g = LargeBufferCache::kGranule;
    rounded = (rounded + g - 1) / g * g;
    void *p = largeBuffers().take(rounded);
    if (!p) p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    if (zero) std::memset(p, 0, rounded);
    return std::shared_ptr<void>(p, [rounded](void *q) { largeBuffers().give(q, rounded); });
  }
  void *p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  if (zero) std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void *q) { std::free(q); });
}

} // namespace

Tensor::Tensor(DType dtype, Shape64 shape) : Tensor(dtype, std::move(shape), true) {}

Tensor::Tensor(DType dtype, Shape64 shape, bool zeroed)
    : dtype_(dtype), shape_(std::move(shape)), defined_(true) {
  if (numel() > kMaxTensorBytes / static_cast<int64_t>(std::max<size_t>(dtypeSize(dtype_), 1)))
    throw std::length_error("tensor of shape " + shapeToString(shape_) + " is too large");
  if (dtype_ == DType::String) {
    strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(numel()));
    data_ = strings_->data();
    return;
  }
  owner_ = allocateBytes(byteSize(), zeroed);
  data_ = owner_.get();
}

Tensor Tensor::uninitialized(DType dtype, Shape64 shape) {
  return Tensor(dtype, std::move(shape), false);
}

Tensor Tensor::view(DType dtype, Shape64 shape, std::shared_ptr<const void> owner,
                    const void *data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.defined_ = true;
  t.owner_ = std::const_pointer_cast<void>(owner);
  t.data_ = const_cast<void *>(data);
  return t;
}

const void *Tensor::raw() const { return data_; }
void *Tensor::mutableRaw() { return data_; }

Tensor Tensor::reshaped(Shape64 shape) const {
  assert(numelOf(shape) == numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (dtype_ == DType::String)
    *t.strings_ = *strings_;
  else if (byteSize())
    std::memcpy(t.data_, data_, byteSize());
  return t;
}

double Tensor::getDouble(int64_t i) const {
  return visitDType(dtype_, [&](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::string>)
      return 0.0;
    else
      return static_cast<double>(data<T>()[i]);
  });
}

int64_t Tensor::getInt(int64_t i) const {
  return visitDType(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::string>)
      return 0;
    else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      return static_cast<int64_t>(static_cast<float>(data<T>()[i]));
    else
      return static_cast<int64_t>(data<T>()[i]);
  });
}

void Tensor::setDouble(int64_t i, double v) {
  visitDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::string>)
      return;
    else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      data<T>()[i] = T(static_cast<float>(v));
    else
      data<T>()[i] = static_cast<T>(v);
  });
}

void Tensor::setInt(int64_t i, int64_t v) {
  visitDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::string>)
      return;
    else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      data<T>()[i] = T(static_cast<float>(v));
    else
      data<T>()[i] = static_cast<T>(v);
  });
}

bool Tensor::identical(const Tensor &o) const {
  if (defined_ != o.defined_ || dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  if (!defined_) return true;
  if (dtype_ == DType::String) {
    for (int64_t i = 0; i < numel(); ++i)
      if (data<std::string>()[i] != o.data<std::string>()[i]) return false;
    return true;
  }
  return byteSize() == 0 || std::memcmp(data_, o.data_, byteSize()) == 0;
}

} // namespace kiln
