// The CPU backend's driver: takes an imported model through the pass
// pipeline, turns every graph (and If branch) into a Program of steps,
// lowers the elementwise groups to Kernel IR, compiles all kernels into one
// native object with LLVM and links it with the JIT.
//
//   model ─passes(-O)─▶ fused graph ─▶ steps ─┬─ kernels ─▶ Kernel IR ─▶ object ─▶ JIT
//                                             └─ conv/matmul/pool microkernels, interpreter fallback
#pragma once

#include "runtime/cpu/program.h"
#include "interp/interpreter.h"
#include "codegen/cpu/compile.h"
#include "codegen/cpu/jit.h"
#include "ir/graph.h"
#include "passes/pass.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

struct CompileOptions {
  int optLevel = 3;           // graph pipeline -O0..-O3 (also LLVM's level, at least 2)
  std::string cpu = "native"; // codegen::cpuTargetFromName
  int threads = 0;            // 0: physical cores
  PipelineOptions passOptions; // --print-after / --dump-dir
  std::string dumpDir;        // when set: kernels.kir (Kernel IR) and kernels.ll (LLVM IR)
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
};

struct CompileStats {
  double passesMs = 0, loweringMs = 0, codegenMs = 0;
  int steps = 0, generatedKernels = 0, interpSteps = 0, microkernelSteps = 0, copySteps = 0;
  int hostSteps = 0;
  // One line per interpreter fallback (transitional): the node, its input
  // types and why no compiled step took it (`kiln inspect --target cpu`
  // lists them; scripts/corpus_report.py collects them per model).
  std::vector<std::string> interpNodes;
};

class CompiledModel {
public:
  static Expected<std::unique_ptr<CompiledModel>> compile(Model model, const CompileOptions &options);
  ~CompiledModel();

  // Inputs in graph-input order, checked against the declared types.
  Expected<std::vector<RtValue>> run(std::vector<RtValue> inputs);

  const Model &model() const { return model_; }
  // Hands the optimized graph over; the compiled model must not run after.
  Model releaseModel() { return std::move(model_); }
  const CompileStats &stats() const { return stats_; }
  const Program &program() const { return *main_; }
  // The generated kernels as one relocatable object (empty when the program
  // has none), for packaging into an artifact.
  const codegen::ObjectCode &objectCode() const { return object_; }
  // One line per step (If branches included) with its accumulated time,
  // slowest first (after runs with profiling on). An If's time includes its
  // branch's steps.
  void setProfiling(bool on);

  // Activation memory of the current plans, summed over the program and its
  // If branches: the arenas (with reuse) and the buffers side by side.
  // Plans are made from the sizes a run observed, so this is zero before
  // the first run.
  struct MemoryReport {
    int64_t arenaBytes = 0, naiveBytes = 0;
  };
  MemoryReport memoryReport() const;
  std::string profileReport() const;

private:
  CompiledModel() = default;
  Model model_;
  CompileStats stats_;
  std::unique_ptr<Program> main_;
  std::vector<ActivationArena> arenas_; // one run at a time: see run()
  std::unique_ptr<codegen::CpuJit> jit_;
  codegen::ObjectCode object_;
  std::unique_ptr<runtime::ThreadPool> pool_;
  std::unique_ptr<Interpreter> interpreter_;
  bool profiling_ = false;
  std::unordered_map<const Step *, double> profile_;
};

} // namespace kiln::cpu
