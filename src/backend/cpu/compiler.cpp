#include "backend/cpu/compiler.h"

#include "runtime/cpu/attention_step.h"
#include "runtime/cpu/conv_step.h"
#include "runtime/cpu/conv_transpose_step.h"
#include "runtime/cpu/copy_steps.h"
#include "runtime/cpu/int_conv_step.h"
#include "runtime/cpu/int_matmul_step.h"
#include "runtime/cpu/loop_steps.h"
#include "runtime/cpu/lstm_step.h"
#include "runtime/cpu/matmul_step.h"
#include "runtime/cpu/pool_step.h"
#include "runtime/cpu/steps.h"
#include "runtime/cpu/host_op_step.h"
#include "runtime/cpu/program_io.h"
#include "codegen/cpu/compile.h"
#include "codegen/cpu/cpu_target.h"
#include "interp/interpreter.h"
#include "interp/kernel.h"
#include "kernel/printer.h"
#include "kernel/verifier.h"
#include "lower/elementwise.h"
#include "lower/reduce.h"
#include "lower/elementwise_ops.h"
#include "lower/ops.h"
#include "runtime/cpu/dispatch_step.h"
#include "passes/attention_region.h"
#include "passes/pipeline.h"
#include "passes/rewrite.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace kiln::cpu {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// "node 'name' (Op) (f32[n,4], i64[]): why": a node the cpu target cannot
// compile, with the form of its inputs, for the compile error.
std::string unsupportedLine(const Node &node, const std::string &why) {
  std::string line = node.describe() + " (";
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    const Value *v = node.inputs()[i];
    line += (i ? ", " : "") + (v ? v->type().str() : std::string("-"));
  }
  return line + "): " + why;
}

// Runs `node` with the interpreter's kernel: the constant folder's use of
// the reference, at compile time only.
Expected<std::vector<RtValue>> evaluateNode(const Node &node,
                                            std::vector<const RtValue *> args,
                                            Interpreter &interp) {
  KernelFn fn = kernelTable().find(node.op());
  if (!fn) return makeError(node.describe(), ": no reference kernel");
  Environment env;
  KernelContext ctx(node, std::move(args), interp, interp.options(), env);
  KILN_RETURN_IF_ERROR(fn(ctx));
  return ctx.takeOutputs();
}

// Builds the programs of one model: slots, steps, and the kernels to compile.
class ProgramBuilder {
public:
  ProgramBuilder(const codegen::CpuTarget &target, CompileStats &stats, std::string perturbNode,
                 bool specializedSteps, bool microkernels,
                 std::function<bool(const Step &)> acceptMicrokernel)
      : target_(target), stats_(stats), perturbNode_(std::move(perturbNode)),
        generalOnly_(!specializedSteps || std::getenv("KILN_DEBUG_GENERAL") != nullptr),
        microkernels_(microkernels), acceptMicrokernel_(std::move(acceptMicrokernel)) {}

  struct Scope {
    const Scope *parent;
    Program *program;
    std::unordered_map<const Value *, int> slots;
  };

  Expected<std::unique_ptr<Program>> build(const Graph &g, const Scope *parent);

  std::vector<kir::Kernel> kernels;
  // One line per node no step covers (unsupportedLine); compiling fails
  // with all of them when there is any.
  std::vector<std::string> unsupported;

private:
  Expected<int> slotOf(Scope &scope, const Value *v);
  // Adds the steps of one node (addNodeSteps), marking them for fault
  // injection when the node is (or fuses) perturbNode_.
  Status addNode(Scope &scope, const Node &node);
  Status addNodeSteps(Scope &scope, const Node &node);
  bool tryElementwise(Scope &scope, const Node &node);
  bool tryMicrokernel(Scope &scope, const Node &node);
  bool tryReduction(Scope &scope, const Node &node);
  bool tryPrecompute(Scope &scope, const Node &node);
  bool tryAttention(Scope &scope, const Node &node);
  Status addRegionInline(Scope &scope, const Node &node);
  // The node's Kernel IR lowering (lower/ops.h) as a dispatch step over
  // the given slots; an error is a form the lowering does not cover.
  Expected<std::unique_ptr<DispatchStep>> lowerToDispatch(Scope &scope, const Node &node,
                                                          std::vector<int> in, std::vector<int> out);
  // The general variant (program.h) of a specialized step computing `node`:
  // its Kernel IR dispatch, or null where the lowering needs what the graph
  // does not know (a rank); the specialized step then reports a run whose
  // shapes it does not fit as an error naming them.
  std::unique_ptr<Step> generalVariantOf(Scope &scope, const Node &node,
                                         const std::vector<int> &in, const std::vector<int> &out);
  // The compile-time value of `v` in this scope, or null.
  const Tensor *constantValue(Scope &scope, const Value *v);
  // Adds a kernel to compile, or finds an identical one; returns its index
  // and renames `kernel` to the one that will run.
  int internKernel(kir::Kernel &kernel);
  std::vector<int> nodeInputSlots(Scope &scope, const Node &node) {
    std::vector<int> in;
    for (const Value *v : node.inputs()) in.push_back(v ? scope.slots.at(v) : -1);
    return in;
  }
  int newSlot(Scope &scope, const Value *v) {
    int slot = scope.program->numSlots++;
    scope.slots[v] = slot;
    return slot;
  }

  const codegen::CpuTarget &target_;
  CompileStats &stats_;
  std::string perturbNode_;
  // CompileOptions::specializedSteps off (or KILN_DEBUG_GENERAL set, for
  // tests of the general variants): no specialized elementwise, reduction or
  // copy steps; every such node runs its op's dispatch, as a specialized
  // step does when a run's shapes do not fit it.
  bool generalOnly_ = false;
  bool microkernels_ = true;
  std::function<bool(const Step &)> acceptMicrokernel_; // CompileOptions::acceptMicrokernel

  bool accepted(const Step &step) const { return !acceptMicrokernel_ || acceptMicrokernel_(step); }

public:
  int perturbedSteps = 0;

private:
  std::unordered_map<std::string, int> kernelIndex_;
  Interpreter precomputeInterpreter_;
};

Expected<int> ProgramBuilder::slotOf(Scope &scope, const Value *v) {
  auto it = scope.slots.find(v);
  if (it != scope.slots.end()) return it->second;
  // A value of an enclosing graph: capture it from the parent's frame.
  if (!scope.parent) return makeError("value '", v->name(), "' is read before it is defined");
  Scope &parent = const_cast<Scope &>(*scope.parent);
  KILN_ASSIGN_OR_RETURN(int parentSlot, slotOf(parent, v));
  int slot = scope.program->numSlots++;
  scope.slots[v] = slot;
  // A constant of the parent is a constant here too (so nodes reading it
  // can be precomputed); anything else is captured at run time.
  for (const auto &[constSlot, value] : parent.program->constants)
    if (constSlot == parentSlot) {
      scope.program->constants.emplace_back(slot, value);
      return slot;
    }
  scope.program->captures.emplace_back(parentSlot, slot);
  return slot;
}

Expected<std::unique_ptr<Program>> ProgramBuilder::build(const Graph &g, const Scope *parent) {
  auto program = std::make_unique<Program>();
  Scope scope{parent, program.get(), {}};
  for (const Value *in : g.inputs()) {
    int slot = program->numSlots++;
    scope.slots[in] = slot;
    program->inputSlots.push_back(slot);
  }
  for (const auto &n : g.nodes()) KILN_RETURN_IF_ERROR(addNode(scope, *n));
  for (const Value *out : g.outputs()) {
    KILN_ASSIGN_OR_RETURN(int slot, slotOf(scope, out));
    program->outputSlots.push_back(slot);
  }
  program->computeLiveness();
  return program;
}

// The group a node stands for: a Fused elementwise node's region, or the
// node alone.
lower::ElementwiseGroup groupOf(const Node &node, std::vector<const Value *> &nodeInputs) {
  lower::ElementwiseGroup group;
  if (node.op() == OpKind::Fused) {
    const Graph *body = node.getGraph("body");
    for (auto &n : body->nodes()) group.nodes.push_back(n.get());
    group.inputs.assign(body->inputs().begin(), body->inputs().end());
    group.outputs.assign(body->outputs().begin(), body->outputs().end());
    nodeInputs.assign(node.inputs().begin(), node.inputs().end());
    return group;
  }
  group.nodes = {&node};
  for (const Value *v : node.inputs())
    if (v && std::find(group.inputs.begin(), group.inputs.end(), v) == group.inputs.end())
      group.inputs.push_back(v);
  group.outputs = {node.output(0)};
  nodeInputs = group.inputs;
  return group;
}

bool ProgramBuilder::tryElementwise(Scope &scope, const Node &node) {
  const bool fused = node.op() == OpKind::Fused && node.getString("kind") == "elementwise";
  if (!fused && !lower::canLowerElementwise(node)) return false;
  std::vector<const Value *> nodeInputs;
  lower::ElementwiseGroup group = groupOf(node, nodeInputs);
  int widest = 1;
  for (const Value *v : group.inputs) widest = std::max<int>(widest, dtypeSize(v->type().dtype()));
  for (const Value *v : group.outputs) widest = std::max<int>(widest, dtypeSize(v->type().dtype()));
  const std::string name = "k" + std::to_string(kernels.size());
  auto lowered = lower::lowerElementwise(group, name, std::max(1, target_.lanes(widest)));
  if (!lowered.ok()) return false;
  for (const Value *v : nodeInputs)
    if (!slotOf(scope, v).ok()) return false;
  const int index = internKernel(lowered->kernel);
  if (index < 0) return false;

  std::vector<int> in, out;
  std::vector<DType> outTypes;
  for (const Value *v : nodeInputs) {
    auto s = slotOf(scope, v);
    if (!s.ok()) return false;
    in.push_back(*s);
  }
  for (const Value *v : node.outputs()) {
    int slot = scope.program->numSlots++;
    scope.slots[v] = slot;
    out.push_back(slot);
    outTypes.push_back(v->type().dtype());
  }
  std::string label = "kernel " + lowered->kernel.name + " " + node.describe();
  if (fused) {
    label += " [";
    for (const Node *n : group.nodes) label += std::string(opName(n->op())) + " ";
    label.back() = ']';
  }
  std::vector<int> nodeIn = nodeInputSlots(scope, node);
  // With static shapes the kernel fits every run: no general variant.
  bool allStatic = true;
  for (const Value *v : nodeInputs) allStatic &= v->type().isTensor() && v->type().shape().isStatic();
  std::unique_ptr<Step> fallback =
      allStatic ? nullptr : generalVariantOf(scope, node, nodeIn, out);
  lowered->launch.symbol = lowered->kernel.name; // after internKernel's renaming
  auto step = std::make_unique<ElementwiseStep>(label, std::move(lowered->launch), in, out,
                                                outTypes, std::move(fallback));
  scope.program->steps.push_back(std::move(step));
  return true;
}

// A node whose inputs are all constants of this program is evaluated once,
// here, and its outputs become constants: weights that the model slices
// and concatenates on every run (silero's LSTM) are prepared at compile
// time. Unlike the fold-constants pass this has no size limit: it costs
// memory only in this process, never in the model.
bool ProgramBuilder::tryPrecompute(Scope &scope, const Node &node) {
  if (!node.regions().empty() || !isDeterministic(node.op()) || node.op() == OpKind::Fused)
    return false;
  // Slots first: reading an outer constant declares it here (slotOf).
  std::vector<int> in;
  for (const Value *v : node.inputs()) {
    if (!v) {
      in.push_back(-1);
      continue;
    }
    auto slot = slotOf(scope, v);
    if (!slot.ok()) return false;
    in.push_back(*slot);
  }
  if (in.empty()) return false;
  Frame frame;
  frame.slots.resize(scope.program->numSlots + node.numOutputs());
  int found = 0;
  for (const auto &[slot, value] : scope.program->constants)
    if (std::find(in.begin(), in.end(), slot) != in.end()) {
      frame.slots[slot] = value;
      ++found;
    }
  int needed = 0;
  for (size_t i = 0; i < in.size(); ++i)
    needed += in[i] >= 0 && std::find(in.begin(), in.begin() + i, in[i]) == in.begin() + i;
  if (found != needed) return false; // some input is not a constant
  std::vector<const RtValue *> args;
  for (int s : in) args.push_back(s < 0 ? nullptr : &frame.slots[s]);
  auto outs = evaluateNode(node, std::move(args), precomputeInterpreter_);
  if (!outs.ok()) return false; // left for run time, which reports it
  for (int i = 0; i < node.numOutputs(); ++i)
    if (const Value *v = node.output(i))
      scope.program->constants.emplace_back(newSlot(scope, v), std::move((*outs)[size_t(i)]));
  return true;
}

int ProgramBuilder::internKernel(kir::Kernel &kernel) {
  // A lowering bug must not reach LLVM as undefined behaviour: the node
  // runs on the interpreter instead, and the bug is reported.
  if (Status s = verifyKernel(kernel); !s.ok()) {
    std::fprintf(stderr, "kiln: warning: lowered kernel does not verify (a kiln bug): %s\n",
                 s.error().message.c_str());
    return -1;
  }
  // Identical kernels (the same activation on many layers) are compiled
  // once: the text without the name is the key.
  const std::string text = printKernel(kernel);
  const std::string key = text.substr(text.find('('));
  auto [it, isNew] = kernelIndex_.emplace(key, static_cast<int>(kernels.size()));
  if (isNew) {
    kernels.push_back(kernel);
    ++stats_.generatedKernels;
  } else {
    kernel.name = kernels[it->second].name;
  }
  return it->second;
}

const Tensor *ProgramBuilder::constantValue(Scope &scope, const Value *v) {
  if (!v) return nullptr;
  auto slot = slotOf(scope, v);
  if (!slot.ok()) return nullptr;
  for (const auto &[constSlot, value] : scope.program->constants)
    if (constSlot == *slot && value.isTensor()) return &value.tensor;
  return nullptr;
}

// The node's Kernel IR lowering: its op's, or for a Fused conv/matmul
// node the lowering of its region.
lower::LowerFn loweringOf(const Node &node) {
  if (node.op() == OpKind::Fused &&
      (node.getString("kind") == "conv" || node.getString("kind") == "matmul"))
    return lower::lowerFusedConvOrMatMul;
  return lower::kernelLoweringOf(node.op());
}

Expected<std::unique_ptr<DispatchStep>> ProgramBuilder::lowerToDispatch(Scope &scope,
                                                                         const Node &node,
                                                                         std::vector<int> in,
                                                                         std::vector<int> out) {
  lower::LowerFn lower = loweringOf(node);
  if (!lower) return makeError("no Kernel IR lowering");
  lower::DispatchBuilder d(node, "k" + std::to_string(kernels.size()),
                           [&](const Value *v) { return constantValue(scope, v); });
  KILN_RETURN_IF_ERROR(lower(d));
  KILN_ASSIGN_OR_RETURN(lower::LoweredDispatch lowered, d.finish());
  for (size_t k = 0; k < lowered.kernels.size(); ++k) {
    if (internKernel(lowered.kernels[k]) < 0)
      return makeError("its lowered kernel does not verify (a kiln bug)");
    lowered.recipe.launches[k].symbol = lowered.kernels[k].name; // after renaming
  }
  std::string label = "kernel " +
                      (lowered.kernels.empty() ? std::string("-") : lowered.kernels[0].name) +
                      " " + node.describe();
  auto step = std::make_unique<DispatchStep>(std::move(label), std::move(in), std::move(out),
                                             std::move(lowered.recipe));
  KILN_RETURN_IF_ERROR(step->prepare());
  return step;
}

std::unique_ptr<Step> ProgramBuilder::generalVariantOf(Scope &scope, const Node &node,
                                                       const std::vector<int> &in,
                                                       const std::vector<int> &out) {
  if (!loweringOf(node)) return nullptr;
  auto step = lowerToDispatch(scope, node, in, out);
  if (step.ok()) return std::move(*step);
  ++stats_.withoutGeneralVariant;
  return nullptr;
}

bool ProgramBuilder::tryReduction(Scope &scope, const Node &node) {
  if (!lower::canLowerReduction(node)) return false;
  auto lowered = lower::lowerReduction(node, "k" + std::to_string(kernels.size()),
                                       std::max(1, target_.lanes(4)));
  if (!lowered.ok()) return false;
  for (const Value *v : node.inputs())
    if (v && !slotOf(scope, v).ok()) return false;
  const int index = internKernel(lowered->kernel);
  if (index < 0) return false;
  std::vector<int> in = nodeInputSlots(scope, node);
  std::vector<int> out;
  for (const Value *v : node.outputs()) out.push_back(v ? newSlot(scope, v) : -1);
  std::unique_ptr<Step> fallback = generalVariantOf(scope, node, in, out);
  lowered->launch.symbol = lowered->kernel.name; // after internKernel's renaming
  auto step = std::make_unique<ReductionStep>("kernel " + lowered->kernel.name + " " +
                                                  node.describe(),
                                              std::move(lowered->launch), in, out[0],
                                              std::move(fallback));
  scope.program->steps.push_back(std::move(step));
  return true;
}

// Two dims that are equal on every run: the same number or the same symbol.
bool sameOnEveryRun(const Dim &a, const Dim &b) { return !a.isUnknown() && a == b; }

// Whether the graph's types guarantee that a conv or pooling step's packed
// kernel fits every run (runtime/cpu/conv_step.cpp, pool_step.cpp say when
// it does not): the data input is f32 of a known rank with a fixed channel
// count, and every other input that is not a constant (a fused residual)
// has the output's shape. A run too small for the kernel is an error either
// way.
bool convStepAlwaysFits(const Node &node, const std::function<bool(const Value *)> &isConstant) {
  const Value *x = node.input(0);
  const Value *y = node.output(0);
  if (!x || !y || !x->type().isTensor() || !y->type().isTensor()) return false;
  const Shape &xs = x->type().shape(), &ys = y->type().shape();
  if (x->type().dtype() != DType::F32 || !xs.rankKnown || !ys.rankKnown || xs.rank() < 3 ||
      !xs.dims[1].isStatic())
    return false;
  for (int i = 1; i < node.numInputs(); ++i) {
    const Value *v = node.input(i);
    if (!v || isConstant(v)) continue;
    const Shape &vs = v->type().shape();
    if (!v->type().isTensor() || !vs.rankKnown || vs.rank() != ys.rank()) return false;
    for (int64_t d = 0; d < ys.rank(); ++d)
      if (!sameOnEveryRun(vs.dims[size_t(d)], ys.dims[size_t(d)])) return false;
  }
  return true;
}

// Conv, MatMul and pooling (with fused epilogues) on the handwritten
// microkernels; false when the node is not one of those or not in a form
// they take, so it runs another way.
bool ProgramBuilder::tryMicrokernel(Scope &scope, const Node &node) {
  const std::string kind = node.op() == OpKind::Fused ? node.getString("kind") : "";
  if (node.numOutputs() != 1 && !(node.op() == OpKind::MaxPool && !node.output(1)) &&
      node.op() != OpKind::LSTM)
    return false;
  const OpKind op = node.op();
  const bool pool = op == OpKind::MaxPool || op == OpKind::AveragePool ||
                    op == OpKind::GlobalAveragePool || op == OpKind::GlobalMaxPool;
  if (!hasMicrokernelStep(op) && kind != "matmul" && kind != "conv") return false;
  std::vector<int> in;
  for (const Value *v : node.inputs()) {
    if (!v) {
      in.push_back(-1);
      continue;
    }
    auto s = slotOf(scope, v);
    if (!s.ok()) return false;
    in.push_back(*s);
  }
  std::unique_ptr<Step> step;
  const int out = scope.program->numSlots; // the slot newSlot() gives next
  // A node a microkernel does not take runs as generated code (its dispatch
  // or its region's nodes), often many times slower: the reason is kept for
  // `kiln inspect` and `kiln bench` (CompileStats::microkernelMisses).
  auto take = [&](auto created) {
    if (created.ok() && !accepted(**created)) return false; // the target runs it another way
    if (created.ok()) {
      step = std::move(*created);
      return true;
    }
    stats_.microkernelMisses.push_back(node.describe() + ": " + created.error().message);
    return false;
  };
  if (op == OpKind::MatMulInteger || op == OpKind::QLinearMatMul) {
    if (!take(IntMatMulStep::create(node, in, out))) return false;
  } else if (op == OpKind::ConvInteger || op == OpKind::QLinearConv) {
    if (!take(IntConvStep::create(node, in, out))) return false;
  } else if (node.op() == OpKind::MatMul || kind == "matmul") {
    if (!take(MatMulStep::create(node, in, out))) return false;
  } else if (pool) {
    if (!take(PoolStep::create(node, in[0], out))) return false;
  } else if (node.op() == OpKind::Conv || kind == "conv") {
    if (!take(ConvStep::create(node, in, out))) return false;
  } else if (op == OpKind::ConvTranspose) {
    if (!take(ConvTransposeStep::create(node, in, out))) return false;
  } else if (op == OpKind::LSTM) { // several outputs, any of them absent
    std::vector<int> outs;
    int next = out;
    for (const Value *v : node.outputs()) outs.push_back(v ? next++ : -1);
    auto s = LstmStep::create(node, in, outs);
    if (!s.ok() || !accepted(**s)) return false;
    for (const Value *v : node.outputs())
      if (v) newSlot(scope, v);
    scope.program->steps.push_back(std::move(*s));
    ++stats_.microkernelSteps;
    return true;
  } else {
    return false;
  }
  // The microkernels take every size, but a run whose shapes they were not
  // built for (a residual or batch that broadcasts another way) runs the
  // node's dispatch instead. ConvTranspose works its geometry out on every
  // run, and a conv or pool whose types rule every miss out never misses:
  // neither gets a variant (dead code, and a conv kernel to compile per node).
  bool allStatic = true;
  for (const Value *v : node.inputs())
    allStatic &= !v || (v->type().isTensor() && v->type().shape().isStatic());
  const bool alwaysFits =
      (pool || node.op() == OpKind::Conv || kind == "conv") &&
      convStepAlwaysFits(node, [&](const Value *v) { return constantValue(scope, v) != nullptr; });
  if (!allStatic && op != OpKind::ConvTranspose && !alwaysFits) {
    std::vector<int> outs(size_t(node.numOutputs()), -1);
    outs[0] = out;
    step->generalVariant = generalVariantOf(scope, node, in, outs);
  }
  newSlot(scope, node.output(0));
  scope.program->steps.push_back(std::move(step));
  ++stats_.microkernelSteps;
  return true;
}

// A Fused attention node on the flash-style kernel (runtime/cpu/
// attention_step.h); false when its form or types are not the kernel's.
bool ProgramBuilder::tryAttention(Scope &scope, const Node &node) {
  if (node.op() != OpKind::Fused || node.getString("kind") != kAttentionKind) return false;
  std::vector<int> in;
  for (const Value *v : node.inputs()) {
    auto s = v ? slotOf(scope, v) : Expected<int>(-1);
    if (!s.ok()) return false;
    in.push_back(*s);
  }
  auto step = AttentionStep::create(node, in, scope.program->numSlots);
  if (!step.ok() || !accepted(**step)) return false;
  newSlot(scope, node.output(0));
  scope.program->steps.push_back(std::move(*step));
  ++stats_.microkernelSteps;
  ++stats_.attentionSteps;
  return true;
}

// A Fused node that no step takes whole (an attention region of a form or
// dtype the kernel does not take) compiles as the nodes of its region, in
// line: the region's inputs are the node's input slots, its outputs the
// node's.
Status ProgramBuilder::addRegionInline(Scope &scope, const Node &node) {
  const Graph *body = node.getGraph("body");
  if (body->inputs().size() != node.inputs().size() ||
      body->outputs().size() != node.outputs().size())
    return makeError(node.describe(), ": its region does not match its inputs and outputs");
  for (size_t i = 0; i < body->inputs().size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int slot, slotOf(scope, node.inputs()[i]));
    scope.slots[body->inputs()[i]] = slot;
  }
  for (const auto &n : body->nodes()) KILN_RETURN_IF_ERROR(addNode(scope, *n));
  for (size_t i = 0; i < body->outputs().size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int slot, slotOf(scope, body->outputs()[i]));
    if (node.outputs()[i]) scope.slots[node.outputs()[i]] = slot;
  }
  return Status::success();
}

// True when `node` is the ONNX node `name` or a Fused node containing it.
bool computesNode(const Node &node, const std::string &name) {
  if (node.name() == name) return true;
  if (node.op() != OpKind::Fused) return false;
  for (const auto &n : node.getGraph("body")->nodes())
    if (n->name() == name) return true;
  return false;
}

Status ProgramBuilder::addNode(Scope &scope, const Node &node) {
  const size_t before = scope.program->steps.size();
  KILN_RETURN_IF_ERROR(addNodeSteps(scope, node));
  if (!perturbNode_.empty() && computesNode(node, perturbNode_))
    for (size_t i = before; i < scope.program->steps.size(); ++i) {
      scope.program->steps[i]->perturbOutputs = true;
      ++perturbedSteps;
    }
  return Status::success();
}

Status ProgramBuilder::addNodeSteps(Scope &scope, const Node &node) {
  if (node.op() == OpKind::Constant && node.output(0)) {
    const Attribute *a = node.attr("value");
    if (a && a->kind == AttrKind::Tensor) {
      scope.program->constants.emplace_back(newSlot(scope, node.output(0)), RtValue(a->t));
      return Status::success();
    }
  }
  if (tryPrecompute(scope, node)) return Status::success();
  ++stats_.steps;
  if (node.op() == OpKind::If) {
    KILN_ASSIGN_OR_RETURN(int cond, slotOf(scope, node.input(0)));
    KILN_ASSIGN_OR_RETURN(auto thenP, build(*node.getGraph("then_branch"), &scope));
    KILN_ASSIGN_OR_RETURN(auto elseP, build(*node.getGraph("else_branch"), &scope));
    std::vector<int> out;
    for (const Value *v : node.outputs()) {
      int slot = scope.program->numSlots++;
      scope.slots[v] = slot;
      out.push_back(slot);
    }
    scope.program->steps.push_back(std::make_unique<IfStep>("if " + node.describe(), cond, out,
                                                            std::move(thenP), std::move(elseP)));
    return Status::success();
  }
  if (node.op() == OpKind::Loop || node.op() == OpKind::Scan || node.op() == OpKind::SequenceMap) {
    std::vector<int> in, out; // a body program run per iteration (runtime/cpu/loop_steps.h)
    for (const Value *v : node.inputs()) {
      KILN_ASSIGN_OR_RETURN(int s, v ? slotOf(scope, v) : Expected<int>(-1));
      in.push_back(s);
    }
    KILN_ASSIGN_OR_RETURN(auto body, build(*node.getGraph("body"), &scope));
    for (const Value *v : node.outputs()) out.push_back(v ? newSlot(scope, v) : -1);
    KILN_ASSIGN_OR_RETURN(auto step, BodyStep::create(node, in, out, std::move(body)));
    scope.program->steps.push_back(std::move(step));
    return Status::success();
  }
  // The ways a node compiles, fastest first: a microkernel, a generated
  // elementwise or reduction kernel, a copy step (each with its op's
  // dispatch as the general variant), the op's Kernel IR dispatch, a host
  // op.
  if (microkernels_ && tryMicrokernel(scope, node)) return Status::success();
  if (node.op() == OpKind::Fused && node.getString("kind") == kAttentionKind)
    return microkernels_ && tryAttention(scope, node) ? Status::success()
                                                      : addRegionInline(scope, node);
  if (!generalOnly_ && tryElementwise(scope, node)) return Status::success();
  if (!generalOnly_ && tryReduction(scope, node)) return Status::success();
  std::vector<int> in;
  for (const Value *v : node.inputs()) {
    if (!v) {
      in.push_back(-1);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int s, slotOf(scope, v));
    in.push_back(s);
  }
  std::vector<int> out;
  int next = scope.program->numSlots;
  for (const Value *v : node.outputs()) out.push_back(v ? next++ : -1);
  auto claimOutputs = [&] {
    for (const Value *v : node.outputs())
      if (v) newSlot(scope, v);
  };
  const bool hasRegions = !node.regions().empty();
  if (!hasRegions && !generalOnly_)
    if (std::unique_ptr<Step> copy = makeCopyStep(node, in, out, nullptr)) {
      copy->generalVariant = generalVariantOf(scope, node, in, out);
      claimOutputs();
      scope.program->steps.push_back(std::move(copy));
      ++stats_.copySteps;
      return Status::success();
    }
  Status dispatchError = Status::success();
  if (loweringOf(node)) {
    auto step = lowerToDispatch(scope, node, in, out);
    if (step.ok()) {
      claimOutputs();
      scope.program->steps.push_back(std::move(*step));
      return Status::success();
    }
    dispatchError = step.error();
  }
  if (!hasRegions)
    if (std::unique_ptr<HostOpStep> host = HostOpStep::create(node, in, out)) {
      claimOutputs();
      scope.program->steps.push_back(std::move(host));
      ++stats_.hostSteps;
      return Status::success();
    }

  // No step covers the node: recorded, and compiling fails with every such
  // node listed (the outputs still get slots so later nodes can be checked).
  unsupported.push_back(unsupportedLine(
      node, !dispatchError.ok() ? dispatchError.message()
            : loweringOf(node)  ? "no step covers this form"
                                : "the cpu target has no lowering for " +
                                      std::string(opName(node.op()))));
  claimOutputs();
  return Status::success();
}

Status writeFile(const std::string &path, const std::string &text) {
  std::ofstream f(path);
  f << text;
  if (!f) return makeError("cannot write '", path, "'");
  return Status::success();
}

// CompileOptions::exposeIntermediates.
void exposeIntermediates(Graph &g) {
  std::unordered_set<const Value *> outputs(g.outputs().begin(), g.outputs().end());
  for (const auto &n : g.nodes()) {
    if (n->op() == OpKind::Constant) continue;
    for (Value *v : n->outputs())
      if (v && outputs.insert(v).second) g.addOutput(v);
  }
}

} // namespace

bool hasMicrokernelStep(OpKind op) {
  switch (op) {
  case OpKind::MatMul: case OpKind::Conv: case OpKind::ConvTranspose: case OpKind::MaxPool:
  case OpKind::AveragePool: case OpKind::GlobalAveragePool: case OpKind::GlobalMaxPool:
  case OpKind::LSTM: case OpKind::MatMulInteger: case OpKind::QLinearMatMul:
  case OpKind::ConvInteger: case OpKind::QLinearConv:
    return true;
  default:
    return false;
  }
}

CompiledModel::~CompiledModel() = default;

Expected<std::unique_ptr<CompiledModel>> CompiledModel::compile(Model model,
                                                                const CompileOptions &options) {
  std::unique_ptr<CompiledModel> cm(new CompiledModel());
  auto t0 = Clock::now();
  KILN_RETURN_IF_ERROR(runPipeline(model, pipelineForLevel(options.optLevel), options.passOptions));
  KILN_RETURN_IF_ERROR(model.graph->sortTopologically());
  if (options.exposeIntermediates) exposeIntermediates(*model.graph);
  cm->model_ = std::move(model);
  cm->stats_.passesMs = msSince(t0);

  t0 = Clock::now();
  KILN_ASSIGN_OR_RETURN(codegen::CpuTarget target, codegen::cpuTargetFromName(options.cpu));
  if (!target.runsOnHost())
    return makeError("--cpu ", options.cpu, " needs CPU features this machine lacks");
  std::string perturbNode = options.perturbNode;
  if (const char *env = std::getenv("KILN_DEBUG_PERTURB"); env && perturbNode.empty())
    perturbNode = env;
  ProgramBuilder builder(target, cm->stats_, perturbNode, options.specializedSteps,
                         options.microkernels, options.acceptMicrokernel);
  KILN_ASSIGN_OR_RETURN(cm->main_, builder.build(*cm->model_.graph, nullptr));
  if (!builder.unsupported.empty()) {
    std::string list;
    for (const std::string &line : builder.unsupported) list += "\n  " + line;
    return makeError(builder.unsupported.size(), builder.unsupported.size() == 1 ? " node" : " nodes",
                     " cannot be compiled for the cpu target:", list);
  }
  if (!perturbNode.empty() && builder.perturbedSteps == 0)
    return makeError("KILN_DEBUG_PERTURB: no compiled step computes node '", perturbNode,
                     "' (unknown, or folded into a constant)");
  cm->stats_.loweringMs = msSince(t0);

  t0 = Clock::now();
  if (!options.dumpDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.dumpDir, ec);
    std::string text;
    for (const kir::Kernel &k : builder.kernels) text += printKernel(k) + "\n";
    KILN_RETURN_IF_ERROR(writeFile(options.dumpDir + "/kernels.kir", text));
  }
  if (!builder.kernels.empty() && options.cpuCode) {
    codegen::CompileOptions co;
    co.optLevel = std::max(2, std::min(3, options.optLevel));
    if (!options.dumpDir.empty()) co.dumpLlvmIrPath = options.dumpDir + "/kernels.ll";
    // The steps find their kernels by symbol when the artifact loads.
    KILN_ASSIGN_OR_RETURN(cm->object_, codegen::compileKernels(builder.kernels, target, co));
  }
  cm->stats_.codegenMs = msSince(t0);
  cm->kernels_ = std::move(builder.kernels);
  numberPrograms(*cm->main_);
  return cm;
}

} // namespace kiln::cpu
