#include "runtime/vulkan/vulkan_device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln::vulkan {

namespace {

struct Instance {
  Api api;
  VkInstance instance = VK_NULL_HANDLE;
};

// An instance of Vulkan 1.2 (kernels use its 8/16-bit storage and the
// explicit arithmetic types), with the functions it needs loaded.
Expected<Instance> createInstance() {
  KILN_ASSIGN_OR_RETURN(Api api, Api::loadGlobal());
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "kiln";
  app.pEngineName = "kiln";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  if (VkResult r = api.vkCreateInstance(&info, nullptr, &instance); r != VK_SUCCESS)
    return makeError("vkCreateInstance failed: ", resultName(r));
  if (Status s = api.loadInstance(instance); !s.ok()) {
    if (api.vkDestroyInstance) api.vkDestroyInstance(instance, nullptr);
    return s.error();
  }
  return Instance{api, instance};
}

Expected<std::vector<VkPhysicalDevice>> physicalDevices(const Instance &in) {
  uint32_t count = 0;
  in.api.vkEnumeratePhysicalDevices(in.instance, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  if (count) in.api.vkEnumeratePhysicalDevices(in.instance, &count, devices.data());
  devices.resize(count);
  return devices;
}

// The device's properties and the features kiln's kernels use, read through
// the 1.1/1.2 feature structs.
struct Features {
  VkPhysicalDeviceVulkan12Features v12{};
  VkPhysicalDeviceVulkan11Features v11{};
  VkPhysicalDeviceFeatures2 all{};
  // The pNext chain points into the object itself: never copied or moved.
  Features(const Features &) = delete;
  Features &operator=(const Features &) = delete;
  Features() {
    v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    v11.pNext = &v12;
    all.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    all.pNext = &v11;
  }
};

DeviceInfo describe(const Api &api, VkPhysicalDevice d, Features &f) {
  VkPhysicalDeviceProperties p{};
  api.vkGetPhysicalDeviceProperties(d, &p);
  DeviceInfo info;
  info.name = p.deviceName;
  info.vendorId = p.vendorID;
  info.apiVersion = p.apiVersion;
  info.type = p.deviceType;
  if (VK_API_VERSION_MINOR(p.apiVersion) >= 2 || VK_API_VERSION_MAJOR(p.apiVersion) > 1)
    api.vkGetPhysicalDeviceFeatures2(d, &f.all);
  info.int64 = f.all.features.shaderInt64;
  info.float64 = f.all.features.shaderFloat64;
  info.int16 = f.all.features.shaderInt16;
  info.int8 = f.v12.shaderInt8;
  info.float16 = f.v12.shaderFloat16;
  info.storage8 = f.v12.storageBuffer8BitAccess;
  info.storage16 = f.v11.storageBuffer16BitAccess;
  info.limits = driverLimits(info.vendorId, info.name);
  info.tuning = driverTuning(info.vendorId, info.name);
  return info;
}

// The device the selector names (see the header).
Expected<size_t> select(const std::vector<DeviceInfo> &infos, std::string selector) {
  if (infos.empty()) return Error{"the Vulkan loader reports no device"};
  if (selector.empty())
    if (const char *env = std::getenv("KILN_VULKAN_DEVICE")) selector = env;
  if (selector.empty()) {
    for (VkPhysicalDeviceType want :
         {VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU})
      for (size_t i = 0; i < infos.size(); ++i)
        if (infos[i].type == want) return i;
    return size_t(0);
  }
  if (std::all_of(selector.begin(), selector.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const size_t index = std::strtoul(selector.c_str(), nullptr, 10);
    if (index < infos.size()) return index;
  } else {
    for (size_t i = 0; i < infos.size(); ++i)
      if (infos[i].name.find(selector) != std::string::npos) return i;
  }
  std::string names;
  for (size_t i = 0; i < infos.size(); ++i)
    names += "\n  " + std::to_string(i) + ": " + infos[i].name;
  return makeError("no Vulkan device matches '", selector, "'; the devices are:", names);
}

} // namespace

Expected<std::vector<DeviceInfo>> Device::list() {
  KILN_ASSIGN_OR_RETURN(Instance in, createInstance());
  auto devices = physicalDevices(in);
  std::vector<DeviceInfo> infos;
  if (devices.ok())
    for (VkPhysicalDevice d : *devices) {
      Features f;
      infos.push_back(describe(in.api, d, f));
    }
  in.api.vkDestroyInstance(in.instance, nullptr);
  if (!devices.ok()) return devices.error();
  return infos;
}

Status Device::check(VkResult r, const char *what) const {
  if (r == VK_SUCCESS) return Status::success();
  return makeError(what, " failed on ", info_.name, ": ", resultName(r));
}

Expected<std::unique_ptr<Device>> Device::open(const std::string &selector) {
  KILN_ASSIGN_OR_RETURN(Instance in, createInstance());
  std::unique_ptr<Device> dev(new Device);
  dev->api_ = in.api;
  dev->instance_ = in.instance; // owned by dev from here: its destructor cleans up
  KILN_ASSIGN_OR_RETURN(std::vector<VkPhysicalDevice> devices, physicalDevices(in));
  std::vector<DeviceInfo> infos;
  std::vector<Features> features(devices.size());
  for (size_t i = 0; i < devices.size(); ++i)
    infos.push_back(describe(dev->api_, devices[i], features[i]));
  KILN_ASSIGN_OR_RETURN(size_t chosen, select(infos, selector));
  dev->physical_ = devices[chosen];
  dev->info_ = infos[chosen];
  if (VK_API_VERSION_MINOR(dev->info_.apiVersion) < 2 &&
      VK_API_VERSION_MAJOR(dev->info_.apiVersion) == 1)
    return makeError("Vulkan device ", dev->info_.name, " has Vulkan 1.",
                     VK_API_VERSION_MINOR(dev->info_.apiVersion), "; kiln needs 1.2");
  const Api &api = dev->api_;

  uint32_t families = 0;
  api.vkGetPhysicalDeviceQueueFamilyProperties(dev->physical_, &families, nullptr);
  std::vector<VkQueueFamilyProperties> props(families);
  api.vkGetPhysicalDeviceQueueFamilyProperties(dev->physical_, &families, props.data());
  auto compute = std::find_if(props.begin(), props.end(), [](const VkQueueFamilyProperties &p) {
    return (p.queueFlags & VK_QUEUE_COMPUTE_BIT) != 0;
  });
  if (compute == props.end())
    return makeError("Vulkan device ", dev->info_.name, " has no compute queue");
  dev->queueFamily_ = uint32_t(compute - props.begin());

  // Host-visible, coherent memory; device-local as well where there is such.
  VkPhysicalDeviceMemoryProperties memory{};
  api.vkGetPhysicalDeviceMemoryProperties(dev->physical_, &memory);
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int best = -1;
  for (uint32_t t = 0; t < memory.memoryTypeCount; ++t) {
    const VkMemoryPropertyFlags f = memory.memoryTypes[t].propertyFlags;
    if ((f & host) != host) continue;
    if (best < 0 ||
        ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) &&
         !(memory.memoryTypes[best].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)))
      best = int(t);
  }
  if (best < 0) return makeError("Vulkan device ", dev->info_.name, " has no host-visible memory");
  dev->memoryType_ = uint32_t(best);
  VkPhysicalDeviceProperties p{};
  api.vkGetPhysicalDeviceProperties(dev->physical_, &p);
  for (int a = 0; a < 3; ++a)
    dev->maxGroups_[a] = std::max<uint32_t>(1, p.limits.maxComputeWorkGroupCount[a]);
  dev->offsetAlignment_ = std::max<VkDeviceSize>(16, p.limits.minStorageBufferOffsetAlignment);
  dev->tickNs_ = p.limits.timestampPeriod;
  if (std::getenv("KILN_VULKAN_TRACE")) // where tensors live decides how fast kernels read them
    for (uint32_t t = 0; t < memory.memoryTypeCount; ++t)
      std::fprintf(
          stderr, "kiln vulkan: memory type %u flags 0x%x heap %u (%llu MiB)%s\n", t,
          memory.memoryTypes[t].propertyFlags, memory.memoryTypes[t].heapIndex,
          (unsigned long long)(memory.memoryHeaps[memory.memoryTypes[t].heapIndex].size >> 20),
          t == uint32_t(best) ? " <- tensors" : "");
  dev->info_.maxStorageBuffers =
      std::min({p.limits.maxPerStageDescriptorStorageBuffers,
                p.limits.maxDescriptorSetStorageBuffers, p.limits.maxPerStageResources});

  // Enable exactly the kernel features the device has.
  Features &have = features[chosen];
  Features enable;
  enable.all.features.shaderInt64 = have.all.features.shaderInt64;
  enable.all.features.shaderFloat64 = have.all.features.shaderFloat64;
  enable.all.features.shaderInt16 = have.all.features.shaderInt16;
  enable.v11.storageBuffer16BitAccess = have.v11.storageBuffer16BitAccess;
  enable.v12.storageBuffer8BitAccess = have.v12.storageBuffer8BitAccess;
  enable.v12.shaderInt8 = have.v12.shaderInt8;
  enable.v12.shaderFloat16 = have.v12.shaderFloat16;
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = dev->queueFamily_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.pNext = &enable.all;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  KILN_RETURN_IF_ERROR(dev->check(api.vkCreateDevice(dev->physical_, &info, nullptr, &dev->device_),
                                  "vkCreateDevice"));
  KILN_RETURN_IF_ERROR(dev->api_.loadDevice(dev->device_));
  api.vkGetDeviceQueue(dev->device_, dev->queueFamily_, 0, &dev->queue_);

  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = dev->queueFamily_;
  KILN_RETURN_IF_ERROR(
      dev->check(api.vkCreateCommandPool(dev->device_, &pool, nullptr, &dev->commandPool_),
                 "vkCreateCommandPool"));
  VkCommandBufferAllocateInfo cb{};
  cb.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cb.commandPool = dev->commandPool_;
  cb.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cb.commandBufferCount = 1;
  KILN_RETURN_IF_ERROR(dev->check(api.vkAllocateCommandBuffers(dev->device_, &cb, &dev->commands_),
                                  "vkAllocateCommandBuffers"));
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  KILN_RETURN_IF_ERROR(
      dev->check(api.vkCreateFence(dev->device_, &fence, nullptr, &dev->fence_), "vkCreateFence"));
  return dev;
}

Device::~Device() {
  if (recording_) (void)flush(); // nothing may run past the device; frees the batch
  if (device_) {
    api_.vkDeviceWaitIdle(device_);
    readProfile();
    params_.clear(); // back to spare_, freed below
    for (const auto &[bytes, b] : spare_) {
      api_.vkUnmapMemory(device_, b.memory);
      api_.vkDestroyBuffer(device_, b.buffer, nullptr);
      api_.vkFreeMemory(device_, b.memory, nullptr);
    }
    for (VkDescriptorPool p : pools_) api_.vkDestroyDescriptorPool(device_, p, nullptr);
    if (queries_) api_.vkDestroyQueryPool(device_, queries_, nullptr);
    if (fence_) api_.vkDestroyFence(device_, fence_, nullptr);
    if (commandPool_) api_.vkDestroyCommandPool(device_, commandPool_, nullptr);
    api_.vkDestroyDevice(device_, nullptr);
  }
  if (instance_) api_.vkDestroyInstance(instance_, nullptr);
}

Kernel::~Kernel() {
  if (!device_) return;
  const Api &api = device_->api_;
  VkDevice d = device_->device_;
  if (pipeline_) api.vkDestroyPipeline(d, pipeline_, nullptr);
  if (layout_) api.vkDestroyPipelineLayout(d, layout_, nullptr);
  if (setLayout_) api.vkDestroyDescriptorSetLayout(d, setLayout_, nullptr);
  if (module_) api.vkDestroyShaderModule(d, module_, nullptr);
}

Expected<std::unique_ptr<Kernel>> Device::createKernel(const std::vector<uint32_t> &spirv,
                                                       int buffers, int workgroupSize) {
  // Past the limit a driver may crash instead of failing (lavapipe does).
  if (uint32_t(buffers) + 1 > info_.maxStorageBuffers)
    return makeError("the kernel binds ", buffers + 1, " storage buffers (its ", buffers,
                     " tensors and its params); the device allows ", info_.maxStorageBuffers,
                     " per shader");
  std::unique_ptr<Kernel> k(new Kernel);
  k->device_ = this;
  k->buffers_ = buffers;
  k->workgroupSize_ = workgroupSize;
  VkShaderModuleCreateInfo module{};
  module.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module.codeSize = spirv.size() * sizeof(uint32_t);
  module.pCode = spirv.data();
  KILN_RETURN_IF_ERROR(check(api_.vkCreateShaderModule(device_, &module, nullptr, &k->module_),
                             "vkCreateShaderModule"));
  std::vector<VkDescriptorSetLayoutBinding> bindings(size_t(buffers) + 1);
  for (size_t b = 0; b < bindings.size(); ++b) {
    bindings[b].binding = uint32_t(b);
    bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[b].descriptorCount = 1;
    bindings[b].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set{};
  set.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set.bindingCount = uint32_t(bindings.size());
  set.pBindings = bindings.data();
  KILN_RETURN_IF_ERROR(
      check(api_.vkCreateDescriptorSetLayout(device_, &set, nullptr, &k->setLayout_),
            "vkCreateDescriptorSetLayout"));
  VkPipelineLayoutCreateInfo layout{};
  layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &k->setLayout_;
  KILN_RETURN_IF_ERROR(check(api_.vkCreatePipelineLayout(device_, &layout, nullptr, &k->layout_),
                             "vkCreatePipelineLayout"));
  // The workgroup size is specialization constant 0 (emit_glsl.h).
  const uint32_t size = uint32_t(workgroupSize);
  VkSpecializationMapEntry entry{0, 0, sizeof(uint32_t)};
  VkSpecializationInfo spec{1, &entry, sizeof(uint32_t), &size};
  VkComputePipelineCreateInfo pipeline{};
  pipeline.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pipeline.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline.stage.module = k->module_;
  pipeline.stage.pName = "main";
  pipeline.stage.pSpecializationInfo = &spec;
  pipeline.layout = k->layout_;
  KILN_RETURN_IF_ERROR(check(
      api_.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &pipeline, nullptr, &k->pipeline_),
      "vkCreateComputePipelines"));
  return k;
}

} // namespace kiln::vulkan
