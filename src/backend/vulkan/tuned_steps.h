// Conv and MatMul on the Vulkan target's tuned shaders
// (codegen/vulkan/gemm_shader.h). The CPU compiler's conv and matmul steps
// already hold what the shaders need -- weights, geometry, the fused
// epilogue (runtime/cpu/conv_step.h, matmul_step.h) -- so the Vulkan target
// compiles with those steps on (CompileOptions::acceptMicrokernel =
// takesTunedShader) and runs each here: weights and epilogue data uploaded
// once, one dispatch per run over a grid of output tiles. Shaders are
// shared by every step with the same form and kind of epilogue.
#pragma once

#include "codegen/vulkan/gemm_shader.h"
#include "runtime/cpu/program.h"
#include "runtime/vulkan/device_tensors.h"
#include "runtime/vulkan/vulkan_device.h"

#include <map>
#include <memory>
#include <string>

namespace kiln::vulkan {

// Whether the Vulkan target runs `step` on a tuned shader.
bool takesTunedShader(const cpu::Step &step);

// Pipelines by GLSL source: one per distinct shader.
class ShaderCache {
public:
  explicit ShaderCache(Device &device) : device_(device) {}
  // `buffers` as the shader binds (params excluded); `dumpDir`: where its
  // GLSL goes, when set.
  Expected<const Kernel *> get(const std::string &glsl, int buffers, const std::string &name,
                               const std::string &dumpDir);

private:
  Device &device_;
  std::map<std::string, std::unique_ptr<Kernel>> kernels_;
};

class TunedStep {
public:
  // `step` must be one takesTunedShader accepts.
  static Expected<std::unique_ptr<TunedStep>> create(Device &device, DeviceTensors &tensors,
                                                     ShaderCache &shaders, const cpu::Step &step,
                                                     const std::string &dumpDir);
  // Records the step's dispatch and puts its output (on the device) in its
  // slot. A run the shaders do not take (a residual that broadcasts, an
  // input of another rank...) sets `whyNot` and records nothing: the
  // caller runs the step's general variant, which handles or reports it.
  Status run(cpu::Frame &frame, std::string &whyNot) const;

private:
  TunedStep(Device &device, DeviceTensors &tensors) : device_(device), tensors_(tensors) {}
  Status runConv(cpu::Frame &frame, std::string &whyNot) const;
  Status runMatMul(cpu::Frame &frame, std::string &whyNot) const;
  Status launch(const Kernel &kernel, std::vector<std::shared_ptr<Buffer>> buffers,
                const Tensor *residual, std::vector<int64_t> words, const uint32_t groups[3],
                int64_t invocations) const;
  Expected<std::shared_ptr<Buffer>> onDevice(const Tensor &t) const;
  Status withinLoopBudget(int64_t iterations) const;
  const Tensor *residualFor(const cpu::Frame &frame, const Shape64 &outShape,
                            std::string &whyNot) const;

  Device &device_;
  DeviceTensors &tensors_;
  const cpu::Step *step_ = nullptr;
  std::string label_;
  bool conv_ = false;
  codegen::GemmShaderSpec spec_;
  // The shaders: tiles of 64 and 32 (the tiled forms) and the direct form
  // (a MatMul of few rows), or the direct form alone (a conv of few
  // channels per group).
  const Kernel *tile64_ = nullptr, *tile32_ = nullptr, *direct_ = nullptr;
  Tensor weights_, data_; // on the device; data_: the epilogue's arrays, concatenated
  std::vector<int64_t> dataOffsets_;
  int residualSlot_ = -1;
};

} // namespace kiln::vulkan
