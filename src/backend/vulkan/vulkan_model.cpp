#include "backend/vulkan/vulkan_model.h"

#include "codegen/gpu/row_to_element.h"
#include "codegen/vulkan/emit_glsl.h"
#include "codegen/vulkan/loop_count.h"
#include "codegen/vulkan/spirv.h"
#include "kernel/printer.h"
#include "kernel/verifier.h"
#include "package/package.h"
#include "runtime/api/input_check.h"
#include "runtime/cpu/dispatch_step.h"
#include "runtime/cpu/host_op_step.h"
#include "runtime/vulkan/vulkan_dispatch.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace kiln::vulkan {

namespace {

// The step kinds this slice runs: dispatches on the device, host ops on the
// host, If by running the chosen branch the same way.
bool runsOnVulkan(const cpu::Step &step) {
  return step.kind() == cpu::StepKind::Dispatch || step.kind() == cpu::StepKind::HostOp ||
         step.kind() == cpu::StepKind::If || takesTunedShader(step);
}

// The conv and matmul steps of `p` and of its If branches.
void collectTuned(const cpu::Program &p, std::vector<const cpu::Step *> &out) {
  for (const auto &step : p.steps) {
    if (takesTunedShader(*step)) out.push_back(step.get());
    for (const cpu::Program *sub : step->subPrograms()) collectTuned(*sub, out);
  }
}

// Which step launches each kernel, for errors that name the node.
void collectLabels(const cpu::Program &p, std::map<std::string, std::string> &labels) {
  for (const auto &step : p.steps) {
    if (step->kind() == cpu::StepKind::Dispatch)
      for (const auto &l : static_cast<const cpu::DispatchStep &>(*step).recipe().launches)
        labels[l.symbol] = step->describe();
    for (const cpu::Program *sub : step->subPrograms()) collectLabels(*sub, labels);
  }
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
  tuned_.clear(); // pipelines and buffers before their device
  tunedShaders_.reset();
  kernels_.clear();
  tensors_.reset();
}

Expected<std::unique_ptr<VulkanModel>> VulkanModel::compile(Model model, const std::string &device,
                                                            int optLevel,
                                                            const std::string &dumpDir) {
  std::unique_ptr<VulkanModel> m(new VulkanModel);
  KILN_ASSIGN_OR_RETURN(m->device_, Device::open(device));
  m->tensors_ = std::make_unique<DeviceTensors>(*m->device_);
  cpu::CompileOptions options;
  options.optLevel = optLevel;
  options.dumpDir = dumpDir;
  options.cpuCode = false;          // the Kernel IR only
  options.specializedSteps = false; // every Kernel IR node as its op's dispatch
  // Conv and matmul as the CPU's steps, for their weights, geometry and
  // epilogue (tuned_steps.h); pooling, LSTM and attention as Kernel IR.
  options.microkernels = true;
  options.acceptMicrokernel = takesTunedShader;
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
  std::string shapedText; // the kernels as the device runs them, for --dump-dir
  std::map<std::string, std::string> labels;
  collectLabels(main, labels);
  for (const kir::Kernel &k : m->compiled_->kernels()) {
    DeviceKernel dk;
    dk.lowered = k;
    dk.shaped = codegen::gpu::rowPassesToElements(k);
    // A rewrite that broke an invariant would be a kiln bug: caught here,
    // never run.
    if (dk.shaped)
      if (Status s = verifyKernel(dk.shaped->kernel); !s.ok())
        return makeError("row-to-element rewrite of kernel ", k.name, ": ", s.error().message);
    auto shader = m->buildShader(dk.shaped ? dk.shaped->kernel : k, dumpDir);
    if (!shader.ok()) return makeError(labels[k.name], ": ", shader.error().message);
    dk.main = std::move(*shader);
    if (!dumpDir.empty()) shapedText += printKernel(dk.main.ir) + "\n";
    m->kernels_[k.name] = std::move(dk);
  }
  if (!dumpDir.empty()) std::ofstream(dumpDir + "/kernels.vulkan.kir") << shapedText;
  m->tunedShaders_ = std::make_unique<ShaderCache>(*m->device_);
  std::vector<const cpu::Step *> tuned;
  collectTuned(main, tuned);
  for (const cpu::Step *step : tuned) {
    KILN_ASSIGN_OR_RETURN(m->tuned_[step], TunedStep::create(*m->device_, *m->tensors_,
                                                             *m->tunedShaders_, *step, dumpDir));
  }
  m->codegenMs_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  m->hostPool_ = std::make_unique<runtime::ThreadPool>(1);
  return m;
}

// Whether `step` reads, on the host, the elements of a tensor that a
// recorded dispatch has not written yet: host ops (except views and shape
// queries), If's condition, a dispatch whose shape program reads input
// values. An optional counts as read.
bool VulkanModel::mustFlushBefore(const cpu::Step &step, const cpu::Frame &frame) const {
  auto pending = [&](int slot) {
    if (slot < 0) return false;
    const RtValue &v = frame.slots[size_t(slot)];
    if (v.isTensor()) return tensors_->pendingWrite(v.tensor);
    if (!v.isSequence()) return true;
    for (const Tensor &t : v.sequence)
      if (tensors_->pendingWrite(t)) return true;
    return false;
  };
  switch (step.kind()) {
  case cpu::StepKind::Dispatch: {
    const auto &d = static_cast<const cpu::DispatchStep &>(step);
    if (!readsInputValues(d.recipe())) return false;
    for (int slot : d.inputSlots())
      if (pending(slot)) return true;
    return false;
  }
  case cpu::StepKind::HostOp: {
    const auto &h = static_cast<const cpu::HostOpStep &>(step);
    for (size_t i = 0; i < h.inputSlots().size(); ++i)
      if (h.readsElementsOf(i) && pending(h.inputSlots()[i])) return true;
    return false;
  }
  case cpu::StepKind::If:
    return pending(static_cast<const cpu::IfStep &>(step).cond_);
  default:
    return !takesTunedShader(step); // the tuned steps record, like dispatches
  }
}

Status VulkanModel::flush() {
  Status ran = device_->flush();
  tensors_->markRun();
  Status reported = checkStatuses(pending_);
  return !ran.ok() ? ran : reported;
}

Expected<VulkanModel::Shader> VulkanModel::buildShader(kir::Kernel ir,
                                                      const std::string &dumpDir) const {
  Shader shader;
  shader.plan = codegen::gpu::planGrid(ir);
  KILN_ASSIGN_OR_RETURN(std::string glsl, codegen::emitGlsl(ir, shader.plan));
  if (!dumpDir.empty()) std::ofstream(dumpDir + "/" + ir.name + ".comp") << glsl;
  KILN_ASSIGN_OR_RETURN(std::vector<uint32_t> spirv, codegen::compileGlslCompute(glsl));
  KILN_ASSIGN_OR_RETURN(shader.pipeline, device_->createKernel(spirv, int(ir.buffers.size())));
  shader.ir = std::move(ir);
  return shader;
}

Expected<std::vector<RtValue>> VulkanModel::run(std::vector<RtValue> inputs) {
  const cpu::Program &main = compiled_->program();
  if (std::string why = rt::inputMismatch(inputs_, inputs); !why.empty()) return Error{why};
  cpu::Frame frame;
  frame.slots.resize(size_t(main.numSlots));
  for (size_t i = 0; i < inputs.size(); ++i) {
    RtValue &slot = frame.slots[size_t(main.inputSlots[i])];
    slot = std::move(inputs[i]);
    if (slot.isTensor() && slot.tensor.dtype() != DType::String) { // on the device once
      KILN_ASSIGN_OR_RETURN(slot.tensor, tensors_->upload(slot.tensor));
    }
  }
  auto ran = runProgram(main, frame);
  if (!ran.ok()) { // the batch is run and dropped: the next run starts clean
    (void)device_->flush();
    pending_.clear();
    return ran.error();
  }
  std::vector<RtValue> outputs = std::move(*ran);
  // Out of device memory: the caller's tensors must not hold the device's
  // buffers (they may outlive it).
  for (RtValue &v : outputs)
    if (v.isTensor() && tensors_->find(v.tensor)) v.tensor = v.tensor.clone();
  return outputs;
}

Expected<std::vector<RtValue>> VulkanModel::runProgram(const cpu::Program &program,
                                                       cpu::Frame &frame) {
  for (const auto &[slot, value] : program.constants) {
    frame.slots[size_t(slot)] = value;
    if (value.isTensor()) { // weights: uploaded on the first run, kept
      KILN_ASSIGN_OR_RETURN(frame.slots[size_t(slot)].tensor, tensors_->constant(value.tensor));
    }
  }
  cpu::ExecContext ctx;
  ctx.pool = hostPool_.get();
  for (const auto &step : program.steps) {
    // Dispatches run batched; the host waits for them only where it reads
    // what they write.
    if (mustFlushBefore(*step, frame)) {
      static const bool trace = std::getenv("KILN_VULKAN_TRACE") != nullptr;
      if (trace) std::fprintf(stderr, "kiln vulkan: flush before %s\n", step->describe().c_str());
      KILN_RETURN_IF_ERROR(flush());
    }
    if (step->kind() == cpu::StepKind::HostOp) {
      KILN_RETURN_IF_ERROR(step->run(frame, ctx));
    } else if (step->kind() == cpu::StepKind::If) {
      KILN_RETURN_IF_ERROR(runIf(static_cast<const cpu::IfStep &>(*step), frame));
    } else if (step->kind() != cpu::StepKind::Dispatch) {
      KILN_RETURN_IF_ERROR(runTunedStep(*step, frame));
    } else {
      KILN_RETURN_IF_ERROR(runDispatchStep(static_cast<const cpu::DispatchStep &>(*step), frame));
    }
  }
  KILN_RETURN_IF_ERROR(flush());
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

// The key of a shape computation's inputs (dtype, shape, bytes of each),
// or nothing when the dispatch is not one: its outputs are not all integer
// or bool, or an input is larger than a shape or still being written.
std::optional<std::string> VulkanModel::shapeValueKey(const cpu::DispatchStep &step,
                                                      const std::vector<const Tensor *> &in) const {
  constexpr size_t kMaxBytes = 1024;
  for (const cpu::DispatchRecipe::Output &o : step.recipe().outputs)
    if (isFloat(o.dtype) || o.dtype == DType::String) return std::nullopt;
  std::string key;
  for (const Tensor *t : in) {
    if (!t) {
      key += "-;";
      continue;
    }
    if (t->byteSize() > kMaxBytes || t->dtype() == DType::String || tensors_->pendingWrite(*t))
      return std::nullopt;
    key += strCat(int(t->dtype()), shapeToString(t->shape()), ":");
    key.append(static_cast<const char *>(t->raw()), t->byteSize());
    key += ';';
  }
  return key;
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
  // Shape arithmetic (the Concat that builds a Reshape's target, say) is
  // the same run after run for the same input shapes, and the host reads
  // its result: computed once per distinct input, then taken from here, so
  // the host does not wait for the device in the middle of every run.
  const std::optional<std::string> key = shapeValueKey(step, in);
  auto &cached = shapeValues_[&step];
  if (key) {
    if (auto hit = cached.find(*key); hit != cached.end()) {
      const std::vector<int> &outSlots = step.outputSlots();
      for (size_t o = 0; o < outSlots.size() && o < hit->second.size(); ++o)
        if (outSlots[o] >= 0) frame.slots[size_t(outSlots[o])] = RtValue(hit->second[o]);
      return Status::success();
    }
  }
  std::vector<DeviceKernel *> kernels;
  for (const cpu::DispatchRecipe::Launch &l : step.recipe().launches) {
    auto it = kernels_.find(l.symbol);
    if (it == kernels_.end()) return makeError(step.describe(), ": no kernel ", l.symbol);
    kernels.push_back(&it->second);
  }
  const LaunchPlanner plan = [&](size_t k, const std::vector<int64_t> &params, int64_t extent) {
    return planLaunch(*kernels[k], params, extent);
  };
  std::vector<Tensor> out;
  KILN_RETURN_IF_ERROR(
      runDispatch(*device_, *tensors_, step.recipe(), in, out, step.describe(), plan, pending_));
  size_t outBytes = 0;
  for (const Tensor &t : out) outBytes += t.byteSize();
  // Large integer results (a Range over a sequence, say) stay on the
  // device: keeping them on the host would upload them again every run.
  if (key && cached.size() < kShapeValuesPerStep && outBytes <= kMaxShapeValueBytes) {
    KILN_RETURN_IF_ERROR(flush());
    for (Tensor &t : out) t = t.clone(); // on the host, where its readers are
    cached[*key] = out;
  }
  const std::vector<int> &outSlots = step.outputSlots();
  for (size_t o = 0; o < outSlots.size() && o < out.size(); ++o)
    if (outSlots[o] >= 0) frame.slots[size_t(outSlots[o])] = RtValue(std::move(out[o]));
  return Status::success();
}

Status VulkanModel::runTunedStep(const cpu::Step &step, cpu::Frame &frame) {
  auto it = tuned_.find(&step);
  if (it == tuned_.end()) return makeError(step.describe(), ": no tuned shader");
  std::string whyNot;
  KILN_RETURN_IF_ERROR(it->second->run(frame, whyNot));
  if (whyNot.empty()) return Status::success();
  const cpu::Step *general = step.generalVariant.get();
  if (!general || general->kind() != cpu::StepKind::Dispatch)
    return makeError(step.describe(), ": ", whyNot);
  return runDispatchStep(static_cast<const cpu::DispatchStep &>(*general), frame);
}

// Picks the kernel's shader for these sizes and splits its loops over as
// many invocations as its grid plan allows (grid_plan.h). A driver that
// ends loops past a budget would truncate what is left per invocation
// silently: refused.
Expected<LaunchGrid> VulkanModel::planLaunch(DeviceKernel &k, const std::vector<int64_t> &params,
                                             int64_t extent) {
  const Shader *shader = &k.main;
  if (k.shaped && !codegen::gpu::fitsLaunch(*k.shaped, params)) {
    if (!k.plain) {
      KILN_ASSIGN_OR_RETURN(Shader plain, buildShader(k.lowered, ""));
      k.plain = std::make_unique<Shader>(std::move(plain));
    }
    shader = k.plain.get();
  }
  constexpr int64_t kMaxInvocations = int64_t(1) << 31;
  const codegen::gpu::GridLaunch g =
      codegen::gpu::chooseGrid(shader->plan, params, extent, kMaxInvocations);
  LaunchGrid grid;
  grid.pipeline = shader->pipeline.get();
  grid.invocations = g.invocations;
  if (!shader->plan.levels.empty()) {
    grid.words.push_back(g.depth);
    grid.words.insert(grid.words.end(), g.sizes.begin(), g.sizes.end());
    grid.words.resize(1 + shader->plan.levels.size(), 1); // unsplit levels: never read
  }
  static const bool trace = std::getenv("KILN_VULKAN_TRACE") != nullptr;
  if (trace) // what each launch runs as, before it runs (a driver crash names its kernel)
    std::fprintf(stderr, "kiln vulkan: %s%s grid depth %d of %zu, %lld invocations\n",
                 shader->ir.name.c_str(), shader == &k.main && k.shaped ? " (shaped)" : "", g.depth,
                 shader->plan.levels.size(), (long long)g.invocations);
  const int64_t budget = device_->info().limits.loopIterations;
  if (budget > 0) {
    const int64_t n = codegen::loopIterationsPerInvocation(shader->ir, params, shader->plan, g.depth);
    if (n > budget)
      return makeError("kernel ", shader->ir.name, " runs ", n,
                       " loop iterations per invocation; the device's driver (",
                       device_->info().name, ") ends loops after ", budget,
                       ", which would cut its result short");
  }
  return grid;
}

std::string VulkanModel::summary() const {
  const cpu::CompileStats &s = compiled_->stats();
  return strCat("vulkan on ", device_->info().name, ": ", s.steps, " steps, ",
                compiled_->kernels().size(), " kernels as SPIR-V, ", tuned_.size(),
                " conv/matmul steps on tuned shaders, ", s.hostSteps, " host ops; passes ",
                s.passesMs, " ms, lowering ", s.loweringMs, " ms, GLSL -> SPIR-V -> pipelines ",
                codegenMs_, " ms");
}

} // namespace kiln::vulkan
