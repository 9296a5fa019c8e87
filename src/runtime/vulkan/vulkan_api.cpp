#include "runtime/vulkan/vulkan_api.h"

#include <dlfcn.h>

#include <string>

namespace kiln::vulkan {

Expected<Api> Api::loadGlobal() {
  // Never closed: Vulkan objects may outlive any one owner of the handle.
  static void *library = [] {
    void *h = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    return h ? h : dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
  }();
  if (!library)
    return Error{"no Vulkan loader on this machine (libvulkan.so.1 not found: install "
                 "libvulkan1 and a driver, e.g. mesa-vulkan-drivers)"};
  Api api;
  api.vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library, "vkGetInstanceProcAddr"));
  if (!api.vkGetInstanceProcAddr) return Error{"libvulkan.so.1 has no vkGetInstanceProcAddr"};
  api.vkCreateInstance = reinterpret_cast<PFN_vkCreateInstance>(
      api.vkGetInstanceProcAddr(nullptr, "vkCreateInstance"));
  if (!api.vkCreateInstance) return Error{"the Vulkan loader has no vkCreateInstance"};
  return api;
}

Status Api::loadInstance(VkInstance instance) {
#define KILN_VK_LOAD(name)                                                                         \
  name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(instance, #name));                     \
  if (!name) return makeError("the Vulkan instance has no ", #name);
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_LOAD)
#undef KILN_VK_LOAD
  return Status::success();
}

Status Api::loadDevice(VkDevice device) {
#define KILN_VK_LOAD(name)                                                                         \
  name = reinterpret_cast<PFN_##name>(vkGetDeviceProcAddr(device, #name));                         \
  if (!name) return makeError("the Vulkan device has no ", #name);
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_LOAD)
#undef KILN_VK_LOAD
  return Status::success();
}

std::string resultName(VkResult r) {
  const char *name = "VkResult";
  switch (r) {
  case VK_SUCCESS:
    name = "VK_SUCCESS";
    break;
  case VK_TIMEOUT:
    name = "VK_TIMEOUT";
    break;
  case VK_ERROR_OUT_OF_HOST_MEMORY:
    name = "VK_ERROR_OUT_OF_HOST_MEMORY";
    break;
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    name = "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    break;
  case VK_ERROR_INITIALIZATION_FAILED:
    name = "VK_ERROR_INITIALIZATION_FAILED";
    break;
  case VK_ERROR_DEVICE_LOST:
    name = "VK_ERROR_DEVICE_LOST";
    break;
  case VK_ERROR_EXTENSION_NOT_PRESENT:
    name = "VK_ERROR_EXTENSION_NOT_PRESENT";
    break;
  case VK_ERROR_FEATURE_NOT_PRESENT:
    name = "VK_ERROR_FEATURE_NOT_PRESENT";
    break;
  case VK_ERROR_INCOMPATIBLE_DRIVER:
    name = "VK_ERROR_INCOMPATIBLE_DRIVER";
    break;
  default:
    break;
  }
  return std::string(name) + " (" + std::to_string(int(r)) + ")";
}

} // namespace kiln::vulkan
