#include "engine.h"

#include "artifact_engine.h"

#include "backend/vulkan/vulkan_model.h"
#include "interp/interpreter.h"
#include "package/package.h"

#include <algorithm>
#include <cstdlib>

namespace kiln::cli {

const char *kTargetHelp =
    R"(  --target cpu|interp|vulkan
                          cpu: compile to native code (default); interp: the
                          reference interpreter; vulkan: the generated kernels
                          as SPIR-V on a Vulkan device (KILN_VULKAN_DEVICE
                          picks one: an index or part of its name)
  --cpu NAME              cpu target: native (default), x86-64-v4, x86-64-v3
  --opt N                 graph optimization level 0..3 (default 3)
  --threads N             threads for the cpu target (default: physical cores)
)";

namespace {

class InterpEngine : public Engine {
public:
  explicit InterpEngine(Model m) : model_(std::move(m)) {}
  Expected<std::vector<RtValue>> run(std::vector<RtValue> inputs) override {
    return interp_.run(*model_.graph, std::move(inputs));
  }
  const Graph &graph() const override { return *model_.graph; }

private:
  Model model_;
  Interpreter interp_;
};

Expected<int> parseInt(const std::optional<std::string> &text, const char *flag, int def, int lo,
                       int hi) {
  if (!text) return def;
  char *end = nullptr;
  long v = std::strtol(text->c_str(), &end, 10);
  if (text->empty() || *end || v < lo || v > hi)
    return makeError("--", flag, ": '", *text, "' is not an integer in [", lo, ", ", hi, "]");
  return static_cast<int>(v);
}

class VulkanEngine : public Engine {
public:
  explicit VulkanEngine(std::unique_ptr<vulkan::VulkanModel> m) : model_(std::move(m)) {}
  Expected<std::vector<RtValue>> run(std::vector<RtValue> inputs) override {
    return model_->run(std::move(inputs));
  }
  const Graph &graph() const override { return model_->graph(); }
  std::string summary() const override { return model_->summary(); }

private:
  std::unique_ptr<vulkan::VulkanModel> model_;
};

} // namespace

Expected<TargetOptions> targetOptionsFrom(const Args &args, int defaultThreads) {
  TargetOptions o;
  o.target = args.value("target").value_or("cpu");
  if (o.target != "cpu" && o.target != "interp" && o.target != "vulkan")
    return makeError("unknown target '", o.target, "' (available: cpu, interp, vulkan)");
  o.cpu = args.value("cpu").value_or("native");
  KILN_ASSIGN_OR_RETURN(o.optLevel, parseInt(args.value("opt"), "opt", 3, 0, 3));
  KILN_ASSIGN_OR_RETURN(o.threads,
                        parseInt(args.value("threads"), "threads", defaultThreads, 0, 1024));
  return o;
}

std::string summaryOf(const cpu::CompileStats &s) {
  std::string out =
      strCat(s.steps, " steps: ", s.generatedKernels, " generated kernels, ", s.microkernelSteps,
             " microkernel calls (", s.attentionSteps, " attention), ", s.copySteps, " copies, ",
             s.hostSteps, " host ops; passes ", s.passesMs, " ms, lowering ", s.loweringMs,
             " ms, codegen ", s.codegenMs, " ms");
  // Nodes of microkernel ops that run as generated code instead: the first
  // place to look when a model is slow.
  if (!s.microkernelMisses.empty()) {
    out += strCat("\n", s.microkernelMisses.size(), " nodes no microkernel took:");
    constexpr size_t kShown = 10;
    for (size_t i = 0; i < std::min(kShown, s.microkernelMisses.size()); ++i)
      out += "\n  " + s.microkernelMisses[i];
    if (s.microkernelMisses.size() > kShown)
      out += strCat("\n  ... and ", s.microkernelMisses.size() - kShown, " more");
  }
  return out;
}

Expected<std::unique_ptr<Engine>> makeEngine(Model model, const TargetOptions &options) {
  if (options.target == "interp")
    return std::unique_ptr<Engine>(new InterpEngine(std::move(model)));
  if (options.target == "vulkan") {
    KILN_ASSIGN_OR_RETURN(auto m, vulkan::VulkanModel::compile(std::move(model), "",
                                                               options.optLevel, options.dumpDir));
    return std::unique_ptr<Engine>(new VulkanEngine(std::move(m)));
  }
  // The cpu target runs what `kiln compile` would store: the model is
  // packaged into an artifact in memory and run by the runtime library.
  package::PackageOptions po;
  po.optLevel = options.optLevel;
  po.cpu = options.cpu;
  po.dumpDir = options.dumpDir;
  KILN_ASSIGN_OR_RETURN(auto compiled, package::compileForArtifact(std::move(model), po));
  KILN_ASSIGN_OR_RETURN(std::string bytes, package::packageCompiled(*compiled, po));
  const std::string summary = summaryOf(compiled->stats());
  return openArtifactEngineFromMemory(bytes, options.threads, compiled->releaseModel(), summary);
}

Expected<std::unique_ptr<Engine>> openEngine(const std::string &path,
                                             const TargetOptions &options) {
  if (isArtifactFile(path)) return openArtifactEngine(path, options.threads);
  KILN_ASSIGN_OR_RETURN(Model model, loadModel(path));
  return makeEngine(std::move(model), options);
}

} // namespace kiln::cli
