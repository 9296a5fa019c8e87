#include "runtime/vulkan/driver_limits.h"

namespace kiln::vulkan {

namespace {

constexpr uint32_t kMesaVendor = 0x10005; // VK_VENDOR_ID_MESA

bool isLlvmpipe(uint32_t vendorId, const std::string &deviceName) {
  return vendorId == kMesaVendor && deviceName.rfind("llvmpipe", 0) == 0;
}

} // namespace

DriverLimits driverLimits(uint32_t vendorId, const std::string &deviceName) {
  DriverLimits l;
  // Mesa's llvmpipe (lavapipe) counts every loop iteration of an invocation
  // against LP_MAX_TGSI_LOOP_ITERATIONS (65535, shared by all loops of a
  // shader) and stops looping past it. Measured here: a MaxPool kernel went
  // wrong after ~65,000 inner iterations at every input length.
  if (isLlvmpipe(vendorId, deviceName)) l.loopIterations = 65535;
  return l;
}

DriverTuning driverTuning(uint32_t vendorId, const std::string &deviceName) {
  // No driver needs other values yet. Measured on llvmpipe: ResNet-50's
  // convs and matmuls take about as long tiled (10.5 s a run, 2 cores) as
  // one element per invocation (9.8 s with the generic kernels, 20 s with
  // the direct shaders), though each barrier there switches through all
  // 256 invocations of a workgroup.
  return DriverTuning{};
}

} // namespace kiln::vulkan
