#include "runtime/vulkan/driver_limits.h"

namespace kiln::vulkan {

DriverLimits driverLimits(uint32_t vendorId, const std::string &deviceName) {
  DriverLimits l;
  // Mesa's llvmpipe (lavapipe) counts every loop iteration of an invocation
  // against LP_MAX_TGSI_LOOP_ITERATIONS (65535, shared by all loops of a
  // shader) and stops looping past it. Measured here: a MaxPool kernel went
  // wrong after ~65,000 inner iterations at every input length.
  constexpr uint32_t kMesaVendor = 0x10005; // VK_VENDOR_ID_MESA
  if (vendorId == kMesaVendor && deviceName.rfind("llvmpipe", 0) == 0) l.loopIterations = 65535;
  return l;
}

} // namespace kiln::vulkan
