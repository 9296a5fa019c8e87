// A dispatch (runtime/cpu/dispatch_step.h) run on a Vulkan device: the same
// recipe as on the CPU -- the shape program sizes outputs, scratch and
// params from the inputs' shapes -- with each launch a compute dispatch of
// its kernel's SPIR-V (codegen/vulkan, binding ABI of emit_glsl.h) over the
// launch's parallel extent. Inputs are copied into device buffers and
// outputs back (this first slice keeps tensors on the host between
// dispatches); a kernel's status word is checked as on the CPU.
#pragma once

#include "runtime/cpu/dispatch_step.h"
#include "runtime/vulkan/vulkan_device.h"
#include "support/tensor.h"

#include <functional>
#include <string>
#include <vector>

namespace kiln::vulkan {

// `launches[k]` is the pipeline of recipe.launches[k]; `inputs` are the
// node's inputs (null: an absent optional input). Fills `outputs`.
// `check`, when set, sees each launch's params before it runs and may
// refuse it (a kernel too long for the driver, say).
using LaunchCheck = std::function<Status(size_t launch, const std::vector<int64_t> &params)>;
Status runDispatch(Device &device, const cpu::DispatchRecipe &recipe,
                   const std::vector<const Kernel *> &launches,
                   const std::vector<const Tensor *> &inputs, std::vector<Tensor> &outputs,
                   const std::string &label, const LaunchCheck &check = {});

} // namespace kiln::vulkan
