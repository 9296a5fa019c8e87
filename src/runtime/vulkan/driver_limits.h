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

// Tuning values per driver, in the same table. Kept apart from the limits:
// a limit is about correctness, these only about speed.
struct DriverTuning {
  // A launch with at least this many 64 x 64 tiles uses them; fewer: 32 x 32
  // tiles, four times as many workgroups to spread over the GPU's cores.
  int64_t bigTilesFrom = 256;
  // A MatMul of fewer rows (a GEMV, a batch-1 classifier head) runs one
  // output element per invocation: a tile would compute mostly padding.
  int64_t directMatMulBelowRows = 16;
};

DriverLimits driverLimits(uint32_t vendorId, const std::string &deviceName);
DriverTuning driverTuning(uint32_t vendorId, const std::string &deviceName);

} // namespace kiln::vulkan
