// Where a command runs a model: the reference interpreter (`--target
// interp`) or the CPU compiler (`--target cpu`, the default). Commands parse
// the shared target flags once, build an Engine from a loaded model, and
// call run(); compile time is whatever makeEngine takes.
#pragma once

#include "cli.h"

#include "support/value.h"
#include "ir/graph.h"
#include "support/status.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::cli {

struct TargetOptions {
  std::string target = "cpu"; // cpu | interp
  std::string cpu = "native"; // --cpu
  int optLevel = 3;           // -O0..-O3 (as --opt N)
  int threads = 0;            // --threads (0: physical cores)
  std::string dumpDir;        // --dump-dir: Kernel IR and LLVM IR of the cpu target
};

// The value flags makeEngine understands, for Args::parse lists.
inline const std::vector<std::string> kTargetFlags = {"target", "cpu", "opt", "threads"};
// Help text lines for those flags.
extern const char *kTargetHelp;

Expected<TargetOptions> targetOptionsFrom(const Args &args, int defaultThreads = 0);

class Engine {
public:
  virtual ~Engine() = default;
  // Inputs in graph-input order.
  virtual Expected<std::vector<RtValue>> run(std::vector<RtValue> inputs) = 0;
  // The graph whose inputs and outputs the engine takes and gives.
  virtual const Graph &graph() const = 0;
  // Steps, kernels and fallbacks of a compiled program ("" for interp).
  virtual std::string summary() const { return ""; }
  // Per-step time profile after runs (cpu only; "" otherwise).
  virtual void setProfiling(bool) {}
  virtual std::string profileReport() const { return ""; }
  // Planned activation memory after a run ("" for interp).
  virtual std::string memoryReport() const { return ""; }
};

Expected<std::unique_ptr<Engine>> makeEngine(Model model, const TargetOptions &options);

// An engine for a model file or a `.kiln` artifact (run by the runtime
// library; the target flags other than --threads do not apply to it).
Expected<std::unique_ptr<Engine>> openEngine(const std::string &path, const TargetOptions &options);

} // namespace kiln::cli
