// A model compiled for a Vulkan device (`--target vulkan`), the first slice
// of the Vulkan target: the CPU compiler's passes and Kernel IR lowerings
// (the same kernels every target consumes, DESIGN.md), every kernel turned
// into SPIR-V (codegen/vulkan) and run as compute dispatches
// (runtime/vulkan/vulkan_dispatch.h); host ops (shape arithmetic,
// NonZero, NMS...) run on the host, as on every target.
//
// Conv and MatMul (with their fused epilogues) run on tuned shaders
// (tuned_steps.h: tiled GEMM, implicit-GEMM and direct conv). The other ops
// the CPU runs on handwritten microkernels (pooling, LSTM, attention) run
// as their ops' generic Kernel IR lowerings, shaped for a GPU (codegen/gpu:
// one invocation per output element where a launch allows). Tensors stay in
// device buffers (device_tensors.h) and a run's dispatches go to the device
// in batches, flushed where the host needs a result. If runs its chosen
// branch the same way; Loop, Scan and SequenceMap have no Vulkan form yet: compiling a model
// with one fails, naming each such step -- never a silent run on the CPU.
#pragma once

#include "artifact/manifest.h"
#include "backend/cpu/compiler.h"
#include "backend/vulkan/tuned_steps.h"
#include "codegen/gpu/grid_plan.h"
#include "codegen/gpu/row_to_element.h"
#include "runtime/cpu/dispatch_step.h"
#include "runtime/cpu/steps.h"
#include "runtime/vulkan/device_tensors.h"
#include "runtime/vulkan/vulkan_device.h"
#include "runtime/vulkan/vulkan_dispatch.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::vulkan {

class VulkanModel {
public:
  // `device`: open()'s selector ("" picks, see vulkan_device.h).
  // `dumpDir` (when set) gets kernels.kir and one GLSL file per kernel.
  static Expected<std::unique_ptr<VulkanModel>> compile(Model model, const std::string &device,
                                                        int optLevel = 3,
                                                        const std::string &dumpDir = "");
  ~VulkanModel();

  // Inputs in graph-input order; outputs in graph-output order. One run at
  // a time (the device is single-threaded, vulkan_device.h).
  Expected<std::vector<RtValue>> run(std::vector<RtValue> inputs);
  const Graph &graph() const { return *compiled_->model().graph; }
  const DeviceInfo &device() const { return device_->info(); }
  std::string summary() const;

private:
  VulkanModel() = default;
  Expected<std::vector<RtValue>> runProgram(const cpu::Program &program, cpu::Frame &frame);
  Status runIf(const cpu::IfStep &step, cpu::Frame &frame);
  Status runDispatchStep(const cpu::DispatchStep &step, cpu::Frame &frame);
  // A conv or matmul step on its tuned shader, or on its general variant
  // where a run's shapes are not the shader's.
  Status runTunedStep(const cpu::Step &step, cpu::Frame &frame);
  // Runs the recorded dispatches, then checks their status words.
  Status flush();
  bool mustFlushBefore(const cpu::Step &step, const cpu::Frame &frame) const;
  std::optional<std::string> shapeValueKey(const cpu::DispatchStep &step,
                                           const std::vector<const Tensor *> &in) const;
  // Outputs of shape computations by their inputs (runDispatchStep), on
  // the host; a few input shapes per step at most.
  static constexpr size_t kShapeValuesPerStep = 8;
  static constexpr size_t kMaxShapeValueBytes = 4096;
  std::map<const cpu::Step *, std::map<std::string, std::vector<Tensor>>> shapeValues_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<DeviceTensors> tensors_; // before device_ goes
  std::vector<PendingStatus> pending_;     // status words of the open batch
  std::unique_ptr<cpu::CompiledModel> compiled_;
  std::vector<artifact::TensorInfo> inputs_;               // what run() checks inputs against
  // A kernel as the device runs it: pipeline, Kernel IR and grid plan.
  struct Shader {
    std::unique_ptr<Kernel> pipeline;
    kir::Kernel ir;
    codegen::gpu::GridPlan plan;
  };
  // Each kernel of the model: GPU-shaped where the rewrite applies
  // (codegen/gpu/row_to_element.h), else as lowered. A shaped kernel whose
  // row segments do not fit a launch's sizes runs as lowered (`plain`,
  // built the first time that happens).
  struct DeviceKernel {
    kir::Kernel lowered;
    std::optional<codegen::gpu::RowShapedKernel> shaped;
    Shader main;
    std::unique_ptr<Shader> plain;
  };
  Expected<Shader> buildShader(kir::Kernel ir, const std::string &dumpDir) const;
  Expected<LaunchGrid> planLaunch(DeviceKernel &k, const std::vector<int64_t> &params,
                                  int64_t extent);
  std::map<std::string, DeviceKernel> kernels_;
  std::unique_ptr<ShaderCache> tunedShaders_;
  std::map<const cpu::Step *, std::unique_ptr<TunedStep>> tuned_;
  std::unique_ptr<runtime::ThreadPool> hostPool_;          // for host ops
  double codegenMs_ = 0;
};

} // namespace kiln::vulkan
