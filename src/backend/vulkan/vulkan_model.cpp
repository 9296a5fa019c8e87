#include "backend/vulkan/vulkan_model.h"

#include "codegen/vulkan/emit_glsl.h"
#include "codegen/vulkan/spirv.h"
#include "package/package.h"
#include "runtime/api/input_check.h"
#include "runtime/cpu/dispatch_step.h"
#include "runtime/vulkan/vulkan_dispatch.h"

#include <chrono>
#include <fstream>

namespace kiln::vulkan {

namespace {

// The step kinds this slice runs: dispatches on the device, host ops on the
// host.
bool runsOnVulkan(const cpu::Step &step) {
  return step.kind() == cpu::StepKind::Dispatch || step.kind() == cpu::StepKind::HostOp;
}

} // namespace

VulkanModel::~VulkanModel() {
  kernels_.clear(); // pipelines before their device
}

Expected<std::unique_ptr<VulkanModel>> VulkanModel::compile(Model model, const std::string &device,
                                                            int optLevel,
                                                            const std::string &dumpDir) {
  std::unique_ptr<VulkanModel> m(new VulkanModel);
  KILN_ASSIGN_OR_RETURN(m->device_, Device::open(device));
  cpu::CompileOptions options;
  options.optLevel = optLevel;
  options.dumpDir = dumpDir;
  options.cpuCode = false;          // the Kernel IR only
  options.specializedSteps = false; // every Kernel IR node as its op's dispatch
  options.microkernels = false;     // conv, matmul, pooling too, until tuned shaders exist
  KILN_ASSIGN_OR_RETURN(m->compiled_, cpu::CompiledModel::compile(std::move(model), options));
  for (const Value *v : m->compiled_->model().graph->inputs())
    m->inputs_.push_back(package::tensorInfoOf(*v));
  const cpu::Program &main = m->compiled_->program();
  std::string missing;
  for (const auto &step : main.steps)
    if (!runsOnVulkan(*step)) missing += "\n  " + step->describe();
  if (!missing.empty())
    return makeError("the vulkan target cannot run these steps yet (control flow runs on the cpu "
                     "target only):",
                     missing);
  const auto t0 = std::chrono::steady_clock::now();
  for (const kir::Kernel &k : m->compiled_->kernels()) {
    KILN_ASSIGN_OR_RETURN(std::string glsl, codegen::emitGlsl(k));
    if (!dumpDir.empty()) std::ofstream(dumpDir + "/" + k.name + ".comp") << glsl;
    KILN_ASSIGN_OR_RETURN(std::vector<uint32_t> spirv, codegen::compileGlslCompute(glsl));
    KILN_ASSIGN_OR_RETURN(auto kernel, m->device_->createKernel(spirv, int(k.buffers.size())));
    m->kernels_[k.name] = std::move(kernel);
  }
  m->codegenMs_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  m->hostPool_ = std::make_unique<runtime::ThreadPool>(1);
  m->arenas_ = cpu::createArenas(main);
  return m;
}

Expected<std::vector<RtValue>> VulkanModel::run(std::vector<RtValue> inputs) {
  const cpu::Program &main = compiled_->program();
  if (std::string why = rt::inputMismatch(inputs_, inputs); !why.empty()) return Error{why};
  cpu::Frame frame;
  frame.slots.resize(size_t(main.numSlots));
  for (size_t i = 0; i < inputs.size(); ++i)
    frame.slots[size_t(main.inputSlots[i])] = std::move(inputs[i]);
  for (const auto &[slot, value] : main.constants) frame.slots[size_t(slot)] = value;
  cpu::ExecContext ctx;
  ctx.pool = hostPool_.get();
  ctx.arenas = &arenas_;
  std::vector<const Tensor *> in;
  std::vector<const Kernel *> launches;
  std::vector<Tensor> out;
  for (const auto &step : main.steps) {
    if (step->kind() == cpu::StepKind::HostOp) {
      KILN_RETURN_IF_ERROR(step->run(frame, ctx));
      continue;
    }
    const auto &dispatch = static_cast<const cpu::DispatchStep &>(*step);
    in.clear();
    for (int slot : dispatch.inputSlots()) {
      if (slot < 0) {
        in.push_back(nullptr);
        continue;
      }
      const RtValue &v = frame.slots[size_t(slot)];
      if (!v.isTensor()) return makeError(step->describe(), ": an input is ", v.describe());
      in.push_back(&v.tensor);
    }
    launches.clear();
    for (const cpu::DispatchRecipe::Launch &l : dispatch.recipe().launches) {
      auto it = kernels_.find(l.symbol);
      if (it == kernels_.end()) return makeError(step->describe(), ": no kernel ", l.symbol);
      launches.push_back(it->second.get());
    }
    KILN_RETURN_IF_ERROR(
        runDispatch(*device_, dispatch.recipe(), launches, in, out, step->describe()));
    const std::vector<int> &outSlots = dispatch.outputSlots();
    for (size_t o = 0; o < outSlots.size() && o < out.size(); ++o)
      if (outSlots[o] >= 0) frame.slots[size_t(outSlots[o])] = RtValue(std::move(out[o]));
  }
  std::vector<RtValue> result;
  for (int slot : main.outputSlots) result.push_back(frame.slots[size_t(slot)]);
  return result;
}

std::string VulkanModel::summary() const {
  const cpu::CompileStats &s = compiled_->stats();
  return strCat("vulkan on ", device_->info().name, ": ", s.steps, " steps, ",
                compiled_->kernels().size(), " kernels as SPIR-V, ", s.hostSteps,
                " host ops; passes ", s.passesMs, " ms, lowering ", s.loweringMs,
                " ms, GLSL -> SPIR-V -> pipelines ", codegenMs_, " ms");
}

} // namespace kiln::vulkan
