// A dispatch (runtime/cpu/dispatch_step.h) run on a Vulkan device: the same
// recipe as on the CPU -- the shape program sizes outputs, scratch and
// params from the inputs' shapes -- with each launch a compute dispatch of
// its kernel's SPIR-V (codegen/vulkan, binding ABI of emit_glsl.h) over the
// grid its planner picks. Inputs already on the device (device_tensors.h)
// are bound as they are, others copied in; outputs are views of the device
// buffers they were written to; a kernel's status word is checked as on
// the CPU.
#pragma once

#include "runtime/cpu/dispatch_step.h"
#include "runtime/vulkan/device_tensors.h"
#include "runtime/vulkan/vulkan_device.h"
#include "support/tensor.h"

#include <functional>
#include <string>
#include <vector>

namespace kiln::vulkan {

// How a launch runs on the device: the pipeline, the words its kernel
// reads after its params and parallel range, and its invocations
// (emit_glsl.h's binding ABI).
struct LaunchGrid {
  const Kernel *pipeline = nullptr;
  std::vector<int64_t> words;
  int64_t invocations = 0;
};
// Picks launch `launch`'s pipeline and grid for its params and parallel
// extent (1 for a kernel without a parallel loop), or refuses it (a kernel
// too long for the driver, say).
using LaunchPlanner = std::function<Expected<LaunchGrid>(
    size_t launch, const std::vector<int64_t> &params, int64_t extent)>;

// `inputs` are the node's inputs (null: an absent optional input). Fills
// `outputs`.
Status runDispatch(Device &device, DeviceTensors &tensors, const cpu::DispatchRecipe &recipe,
                   const std::vector<const Tensor *> &inputs, std::vector<Tensor> &outputs,
                   const std::string &label, const LaunchPlanner &plan);

} // namespace kiln::vulkan
