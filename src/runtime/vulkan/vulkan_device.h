// A Vulkan device for kiln's compute kernels: instance and physical-device
// selection, buffers, compute pipelines from SPIR-V, and dispatches with
// the binding ABI of codegen/vulkan/emit_glsl.h. libvulkan is loaded at run
// time (vulkan_api.h); on a machine without it, open() fails with a clear
// error and nothing else is affected.
//
// This is the first slice of the Vulkan device of DESIGN.md ("Devices"):
// buffers live in host-visible, coherent memory (device-local too where the
// device has such memory: lavapipe's is all of it); dispatches are recorded
// into one command buffer until the host needs their results (flush).
// Staging buffers, one command buffer recorded once per session and
// timeline semaphores come with the device-neutral program that drives it.
//
// Device selection (open's selector, else the environment variable
// KILN_VULKAN_DEVICE): a device index ("0"), or a substring of the device's
// name ("llvmpipe", "NVIDIA"); empty: the first discrete GPU, else the first
// integrated one, else the first device of any kind.
#pragma once

#include "runtime/vulkan/driver_limits.h"
#include "runtime/vulkan/vulkan_api.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::vulkan {

struct DeviceInfo {
  std::string name;
  uint32_t vendorId = 0;
  uint32_t apiVersion = 0;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  // The features kernels may need; the device enables those it has, and a
  // kernel needing one it lacks fails at pipeline creation.
  bool int64 = false, float64 = false, int16 = false, int8 = false, float16 = false;
  bool storage8 = false, storage16 = false;
  uint32_t maxStorageBuffers = 0; // bindings one compute shader may use
  DriverLimits limits; // what the driver does not report (driver_limits.h)
  DriverTuning tuning;
};

class Device;

// Device memory the host can map: data() is valid for the buffer's life.
// A buffer that goes is kept for reuse by a later allocate() of its size
// class (allocating device memory costs tens of microseconds on a GPU
// driver, more than a small kernel runs): see Device::allocate.
class Buffer {
public:
  ~Buffer();
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  size_t size() const { return size_; }
  void *data() { return mapped_; }
  const void *data() const { return mapped_; }

private:
  friend class Device;
  Buffer() = default;
  Device *device_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void *mapped_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0; // the size class it was made for
};

// A compute pipeline of one kernel: `buffers` storage buffers at bindings
// 0..buffers-1, the params buffer after them.
class Kernel {
public:
  ~Kernel();
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;
  int buffers() const { return buffers_; }

private:
  friend class Device;
  Kernel() = default;
  const Device *device_ = nullptr;
  int buffers_ = 0;
  int workgroupSize_ = 0;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout setLayout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

// Buffers and kernels must not outlive the device that made them. One
// thread at a time: dispatches share the device's command buffer and fence.
class Device {
public:
  static Expected<std::unique_ptr<Device>> open(const std::string &selector = "");
  // Every device the loader reports (an error when there is no loader).
  static Expected<std::vector<DeviceInfo>> list();
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  const DeviceInfo &info() const { return info_; }

  // A zero-size request gets a small buffer (Vulkan has no empty ones).
  // Contents are undefined: a recycled buffer holds what it held.
  Expected<std::unique_ptr<Buffer>> allocate(size_t bytes);
  Expected<std::unique_ptr<Kernel>> createKernel(const std::vector<uint32_t> &spirv, int buffers,
                                                 int workgroupSize = 64);
  // Records `kernel` on `invocations` invocations into the open batch (one
  // command buffer; begun by the first record). `words` fill its params
  // buffer: the kernel's params, begin and end of its parallel range, and
  // its grid words (emit_glsl.h's binding ABI). The batch keeps the buffers
  // alive until flush(). A batch's dispatches run in order, each seeing
  // what the ones before it wrote; the host must not touch their buffers
  // until flush() returns (it may fill fresh input buffers before).
  // `label` names the dispatch in the profile (KILN_VULKAN_PROFILE=1: each
  // dispatch timed on the device, a table per label on stderr when the
  // device closes).
  Status record(const Kernel &kernel, const std::vector<std::shared_ptr<Buffer>> &buffers,
                const std::vector<int64_t> &words, int64_t invocations,
                const std::string &label = "");
  // As record(), over an explicit grid of workgroups (the tuned shaders'
  // tiles, gemm_shader.h), each at most the device's limit.
  Status recordGroups(const Kernel &kernel, const std::vector<std::shared_ptr<Buffer>> &buffers,
                      const std::vector<int64_t> &words, const uint32_t groups[3],
                      const std::string &label = "");
  uint32_t maxGroups(int axis) const { return maxGroups_[axis]; }
  // Submits the batch and waits for it: then the host sees every write.
  Status flush();
  // record() then flush().
  Status dispatch(const Kernel &kernel, const std::vector<std::shared_ptr<Buffer>> &buffers,
                  const std::vector<int64_t> &words, int64_t invocations);

private:
  friend class Buffer;
  friend class Kernel;
  Device() = default;
  Status check(VkResult r, const char *what) const;
  Status begin();
  // The descriptor set and params slice of one dispatch, from the batch's
  // pools and params arena (vulkan_batch.cpp).
  Expected<VkDescriptorSet> bind(const Kernel &kernel,
                                 const std::vector<std::shared_ptr<Buffer>> &buffers,
                                 const std::vector<int64_t> &words);
  void recycle(Buffer &b);
  void profileBegin();
  void profileEnd(const std::string &label);
  void readProfile();

  Api api_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queueFamily_ = 0;
  uint32_t memoryType_ = 0;
  uint32_t maxGroups_[3] = {65535, 65535, 65535};
  VkDeviceSize offsetAlignment_ = 256; // of a storage buffer descriptor's offset
  VkCommandPool commandPool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  DeviceInfo info_;
  // The open batch: recording into commands_, its descriptor pools, and the
  // buffers its dispatches use.
  bool recording_ = false;
  std::vector<std::shared_ptr<Buffer>> held_;
  // Reused from batch to batch: descriptor pools (reset at flush; the
  // batch has used the first poolsOpen_, sets come from the last of those,
  // which has setsLeft_ and descriptorsLeft_ to give)
  // and params chunks (params_[chunk_] filled up to chunkUsed_ bytes).
  std::vector<VkDescriptorPool> pools_;
  size_t poolsOpen_ = 0;
  uint32_t setsLeft_ = 0, descriptorsLeft_ = 0;
  std::vector<std::unique_ptr<Buffer>> params_;
  size_t chunk_ = 0, chunkUsed_ = 0;
  // Buffers that went, by size class, for allocate() to reuse; at most
  // kRecycleBytes in all.
  struct Spare {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped;
  };
  std::multimap<size_t, Spare> spare_;
  size_t spareBytes_ = 0;
  // KILN_VULKAN_PROFILE: a timestamp pair per dispatch of the open batch.
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t queriesUsed_ = 0;
  double tickNs_ = 1;
  std::vector<std::string> queryLabels_;
  struct Timing {
    int64_t count = 0;
    double ns = 0;
  };
  std::map<std::string, Timing> profile_;
  // And on the host: time spent recording dispatches, and waiting in flush.
  Timing recordingHost_, waitingHost_;
};

} // namespace kiln::vulkan
