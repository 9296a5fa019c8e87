// A dispatch (runtime/cpu/dispatch_step.h) run on a Vulkan device: the same
// recipe as on the CPU -- the shape program sizes outputs, scratch and
// params from the inputs' shapes -- with each launch a compute dispatch of
// its kernel's SPIR-V (codegen/vulkan, binding ABI of emit_glsl.h) over the
// grid its planner picks, recorded into the device's batch. Inputs already
// on the device (device_tensors.h) are bound as they are, others copied
// in; outputs are views of the device buffers they are written to; a
// kernel's status word is checked as on the CPU, once the batch has run.
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

// A dispatch's status word, to read once its batch has run.
struct PendingStatus {
  std::shared_ptr<Buffer> word;
  const std::vector<std::string> *messages; // the recipe's, which outlives the run
  std::string label;
};

// Records the dispatch's launches into the device's open batch
// (Device::record). `inputs` are the node's inputs (null: an absent
// optional input). Fills `outputs`: their contents exist once the batch is
// flushed, and so does the status word it adds to `pending`.
Status runDispatch(Device &device, DeviceTensors &tensors, const cpu::DispatchRecipe &recipe,
                   const std::vector<const Tensor *> &inputs, std::vector<Tensor> &outputs,
                   const std::string &label, const LaunchPlanner &plan,
                   std::vector<PendingStatus> &pending);

// Whether the recipe's shape program reads input values (not only shapes):
// those inputs must be on the host, their batch flushed, before it runs.
bool readsInputValues(const cpu::DispatchRecipe &recipe);

// After Device::flush(): the first error a kernel reported, naming its
// step; empties `pending`.
Status checkStatuses(std::vector<PendingStatus> &pending);

} // namespace kiln::vulkan
