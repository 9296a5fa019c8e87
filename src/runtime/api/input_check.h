// Whether run-time inputs fit a model's declared inputs (dtype, rank,
// static dims, symbolic dims bound consistently across inputs), with the
// message a caller reports: the runtime's sessions and every engine that
// runs a model (the Vulkan target's included) give the same clear error.
#pragma once

#include "artifact/manifest.h"
#include "support/value.h"

#include <string>
#include <vector>

namespace kiln::rt {

// "" when `inputs` fit `declared`, else "input 'NAME': why (the model
// expects TYPE)" for the first that does not, or a count mismatch.
std::string inputMismatch(const std::vector<artifact::TensorInfo> &declared,
                          const std::vector<RtValue> &inputs);

} // namespace kiln::rt
