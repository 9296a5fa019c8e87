// Limits of particular Vulkan drivers that the API does not report, in one
// table (vendor and driver facts live here, not in scattered checks).
#pragma once

#include <cstdint>
#include <string>

namespace kiln::vulkan {

struct DriverLimits {
  // Loop iterations one invocation may run, summed over all its loops,
  // before the driver ends its loops early (silently: later iterations do
  // not happen); 0 when there is no such limit.
  int64_t loopIterations = 0;
};

DriverLimits driverLimits(uint32_t vendorId, const std::string &deviceName);

} // namespace kiln::vulkan
