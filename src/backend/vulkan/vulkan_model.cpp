#include "backend/vulkan/vulkan_model.h"

#include "codegen/vulkan/emit_glsl.h"
#include "codegen/vulkan/loop_count.h"
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
// host, If by running the chosen branch the same way.
bool runsOnVulkan(const cpu::Step &step) {
  return step.kind() == cpu::StepKind::Dispatch || step.kind() == cpu::StepKind::HostOp ||
         step.kind() == cpu::StepKind::If;
}

// The steps of `p` and of its If branches that this slice cannot run.
void collectMissing(const cpu::Program &p, std::string &missing) {
  for (const auto &step : p.steps) {
    if (!runsOnVulkan(*step)) missing += "\n  " + step->describe();
    for (const cpu::Program *sub : step->subPrograms()) collectMissing(*sub, missing);
  }
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
  collectMissing(main, missing);
  if (!missing.empty())
    return makeError("the vulkan target cannot run these steps yet (Loop, Scan and SequenceMap "
                     "run on the cpu target only):",
                     missing);
  const auto t0 = std::chrono::steady_clock::now();
  for (const kir::Kernel &k : m->compiled_->kernels()) {
    KILN_ASSIGN_OR_RETURN(std::string glsl, codegen::emitGlsl(k));
    if (!dumpDir.empty()) std::ofstream(dumpDir + "/" + k.name + ".comp") << glsl;
    KILN_ASSIGN_OR_RETURN(std::vector<uint32_t> spirv, codegen::compileGlslCompute(glsl));
    KILN_ASSIGN_OR_RETURN(auto kernel, m->device_->createKernel(spirv, int(k.buffers.size())));
    m->kernels_[k.name] = std::move(kernel);
    m->kernelIr_[k.name] = &k;
  }
  m->codegenMs_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  m->hostPool_ = std::make_unique<runtime::ThreadPool>(1);
  return m;
}

Expected<std::vector<RtValue>> VulkanModel::run(std::vector<RtValue> inputs) {
  const cpu::Program &main = compiled_->program();
  if (std::string why = rt::inputMismatch(inputs_, inputs); !why.empty()) return Error{why};
  cpu::Frame frame;
  frame.slots.resize(size_t(main.numSlots));
  for (size_t i = 0; i < inputs.size(); ++i)
    frame.slots[size_t(main.inputSlots[i])] = std::move(inputs[i]);
  return runProgram(main, frame);
}

Expected<std::vector<RtValue>> VulkanModel::runProgram(const cpu::Program &program,
                                                       cpu::Frame &frame) {
  for (const auto &[slot, value] : program.constants) frame.slots[size_t(slot)] = value;
  cpu::ExecContext ctx;
  ctx.pool = hostPool_.get();
  for (const auto &step : program.steps) {
    if (step->kind() == cpu::StepKind::HostOp) {
      KILN_RETURN_IF_ERROR(step->run(frame, ctx));
    } else if (step->kind() == cpu::StepKind::If) {
      KILN_RETURN_IF_ERROR(runIf(static_cast<const cpu::IfStep &>(*step), frame));
    } else {
      KILN_RETURN_IF_ERROR(runDispatchStep(static_cast<const cpu::DispatchStep &>(*step), frame));
    }
  }
  std::vector<RtValue> result;
  for (int slot : program.outputSlots) result.push_back(frame.slots[size_t(slot)]);
  return result;
}

// As IfStep::run (if_step.cpp), with the branch run here.
Status VulkanModel::runIf(const cpu::IfStep &step, cpu::Frame &frame) {
  const RtValue &c = frame.slots[size_t(step.cond_)];
  if (!c.isTensor() || c.tensor.numel() != 1 || c.tensor.dtype() == DType::String)
    return makeError(step.describe(), ": condition must hold one boolean, got ", c.describe());
  const cpu::Program &branch = c.tensor.getDouble(0) != 0 ? *step.then_ : *step.else_;
  cpu::Frame sub;
  sub.slots.resize(size_t(branch.numSlots));
  for (const auto &[parentSlot, slot] : branch.captures)
    sub.slots[size_t(slot)] = frame.slots[size_t(parentSlot)];
  auto outs = runProgram(branch, sub);
  if (!outs.ok()) return makeError(step.describe(), ": ", outs.error().message);
  for (size_t i = 0; i < step.out_.size() && i < outs->size(); ++i)
    if (step.out_[i] >= 0) frame.slots[size_t(step.out_[i])] = std::move((*outs)[i]);
  return Status::success();
}

Status VulkanModel::runDispatchStep(const cpu::DispatchStep &step, cpu::Frame &frame) {
  std::vector<const Tensor *> in;
  for (int slot : step.inputSlots()) {
    if (slot < 0) {
      in.push_back(nullptr);
      continue;
    }
    const RtValue &v = frame.slots[size_t(slot)];
    if (!v.isTensor()) return makeError(step.describe(), ": an input is ", v.describe());
    in.push_back(&v.tensor);
  }
  std::vector<const Kernel *> launches;
  std::vector<const kir::Kernel *> ir;
  for (const cpu::DispatchRecipe::Launch &l : step.recipe().launches) {
    auto it = kernels_.find(l.symbol);
    if (it == kernels_.end()) return makeError(step.describe(), ": no kernel ", l.symbol);
    launches.push_back(it->second.get());
    ir.push_back(kernelIr_.at(l.symbol));
  }
  // A driver that ends loops past a budget would truncate this kernel
  // silently: refuse it instead.
  const int64_t budget = device_->info().limits.loopIterations;
  LaunchCheck check;
  if (budget > 0)
    check = [&](size_t k, const std::vector<int64_t> &params) -> Status {
      const int64_t n = codegen::loopIterationsPerInvocation(*ir[k], params);
      if (n <= budget) return Status::success();
      return makeError("kernel ", ir[k]->name, " runs ", n,
                       " loop iterations per invocation; the device's driver (",
                       device_->info().name, ") ends loops after ", budget,
                       ", which would cut its result short");
    };
  std::vector<Tensor> out;
  KILN_RETURN_IF_ERROR(
      runDispatch(*device_, step.recipe(), launches, in, out, step.describe(), check));
  const std::vector<int> &outSlots = step.outputSlots();
  for (size_t o = 0; o < outSlots.size() && o < out.size(); ++o)
    if (outSlots[o] >= 0) frame.slots[size_t(outSlots[o])] = RtValue(std::move(out[o]));
  return Status::success();
}

std::string VulkanModel::summary() const {
  const cpu::CompileStats &s = compiled_->stats();
  return strCat("vulkan on ", device_->info().name, ": ", s.steps, " steps, ",
                compiled_->kernels().size(), " kernels as SPIR-V, ", s.hostSteps,
                " host ops; passes ", s.passesMs, " ms, lowering ", s.loweringMs,
                " ms, GLSL -> SPIR-V -> pipelines ", codegenMs_, " ms");
}

} // namespace kiln::vulkan
