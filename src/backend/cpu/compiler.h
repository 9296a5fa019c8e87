// The CPU backend's driver: takes an imported model through the pass
// pipeline, turns every graph (and every If/Loop/Scan body) into a Program
// of steps, lowers nodes to Kernel IR, and compiles all kernels into one
// native object with LLVM. There is no interpreter at run time: a node that
// no step covers is a compile error.
//
//   model ─passes(-O)─▶ fused graph ─▶ steps ─┬─ dispatches: Kernel IR ─▶ object
//                                             ├─ microkernels (conv, matmul, pooling, LSTM)
//                                             └─ host ops, sub-programs
#pragma once

#include "codegen/cpu/compile.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/cpu/program.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

struct CompileOptions {
  int optLevel = 3;            // graph pipeline -O0..-O3 (also LLVM's level, at least 2)
  std::string cpu = "native";  // codegen::cpuTargetFromName
  PipelineOptions passOptions; // --print-after / --dump-dir
  std::string dumpDir;         // when set: kernels.kir (Kernel IR) and kernels.ll (LLVM IR)
  // For `kiln verify --bisect`: after the passes, every value a top-level
  // node of the optimized graph produces (Fused nodes' outputs, not values
  // inside their regions; Constants excluded) becomes an extra graph output,
  // appended in topological order after the model's own outputs. Fusion has
  // already happened, so the comparison runs the code that ships.
  bool exposeIntermediates = false;
  // Fault injection for testing verify: the step that computes the ONNX
  // node of this name (alone or fused into a group) gets each float output
  // element perturbed (x + s_i*(|x|+1)/2 with a pseudo-random sign per
  // element: runtime/cpu/program.cpp) after it runs. Defaults to the
  // environment variable KILN_DEBUG_PERTURB; compile fails when no step
  // computes the node.
  std::string perturbNode;
  // false (or the environment variable KILN_DEBUG_GENERAL set): no
  // specialized elementwise, reduction or copy steps; those nodes compile to
  // their op's dispatch, the general variant, so tests can check it on
  // every form.
  bool specializedSteps = true;
  // false: stop at the Kernel IR (kernels() holds it) and generate no CPU
  // object code, for the code generators of other targets (the Vulkan
  // target's SPIR-V, codegen/vulkan) and their tests.
  bool cpuCode = true;
  // false: no handwritten microkernel steps (conv, matmul, pooling, LSTM,
  // attention); those nodes compile to their op's Kernel IR dispatch too,
  // for targets that have only the generated kernels (vulkan, today).
  bool microkernels = true;
  // When set, a microkernel step it refuses is compiled as its op's Kernel
  // IR dispatch instead: a GPU target takes the conv and matmul steps, whose
  // weights, geometry and epilogue its tuned shaders run, and nothing else.
  std::function<bool(const Step &)> acceptMicrokernel;
};

struct CompileStats {
  double passesMs = 0, loweringMs = 0, codegenMs = 0;
  int steps = 0, generatedKernels = 0, microkernelSteps = 0, copySteps = 0, hostSteps = 0;
  // Of the microkernel steps: attentions on the flash kernel, each one step.
  int attentionSteps = 0;
  // Specialized steps over shapes the graph does not fully know (an
  // unknown rank) whose op's lowering could not make a general variant.
  int withoutGeneralVariant = 0;
  // Nodes of a microkernel op (or Fused matmul/conv) that no microkernel step
  // took, each "node: why"; they run as generated code.
  std::vector<std::string> microkernelMisses;
};

// Ops some forms of which run on a handwritten microkernel step (conv,
// matmul, pooling, conv-transpose, LSTM; kernels/), the others on the op's
// dispatch.
bool hasMicrokernelStep(OpKind op);

// A model compiled for the CPU: the program of steps (kernel entries not
// yet resolved), the generated kernels as one object, and the optimized
// graph. It is what `kiln compile` packages (package/package.h); every run,
// `kiln run` included, goes through that artifact and the runtime library.
class CompiledModel {
public:
  // Fails when a node cannot be compiled, naming every such node with its
  // op, input types and why.
  static Expected<std::unique_ptr<CompiledModel>> compile(Model model,
                                                          const CompileOptions &options);
  ~CompiledModel();

  const Model &model() const { return model_; }
  // Hands the optimized graph over (the program does not refer to it).
  Model releaseModel() { return std::move(model_); }
  const CompileStats &stats() const { return stats_; }
  const Program &program() const { return *main_; }
  // The generated kernels as one relocatable object (empty when the program
  // has none), for packaging into an artifact.
  const codegen::ObjectCode &objectCode() const { return object_; }
  // The generated kernels' Kernel IR, in the object's order.
  const std::vector<kir::Kernel> &kernels() const { return kernels_; }

private:
  CompiledModel() = default;
  Model model_;
  CompileStats stats_;
  std::unique_ptr<Program> main_;
  codegen::ObjectCode object_;
  std::vector<kir::Kernel> kernels_;
};

} // namespace kiln::cpu
