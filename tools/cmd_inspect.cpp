// `kiln inspect MODEL`: inputs, outputs, op counts, opsets and parameters;
// with --target cpu also what the compiler made of it (steps, kernels,
// fallbacks, compile times) and its peak activation memory.
#include "cli.h"
#include "commands.h"
#include "artifact_engine.h"
#include "engine.h"
#include "inputs.h"

#include <iostream>
#include <map>

namespace kiln::cli {

namespace {

const char *kHelp = R"(usage: kiln inspect MODEL [options]

Prints MODEL's inputs and outputs with their types, the opsets it imports,
how many nodes of each op it has (regions included), and its parameter count
and bytes (the elements and bytes of all constant tensors).

With --target cpu it also compiles the model, runs it once on seeded random
inputs (sizes from --dim, default 1 per symbolic dim) and reports the
program (steps, generated kernels, microkernel calls, copies, interpreter
fallbacks, compile times) and the peak activation memory the static memory
planner assigns for those sizes, next to what the buffers would take without
reuse.

options:
  --dim NAME=VALUE        size of symbolic dim NAME (repeatable)
  --input NAME=FILE.npy   use this tensor for input NAME (repeatable)
  --seed N                seed for random inputs (default 0)
)";

void printModel(const std::string &path, Model &model) {
  Graph &graph = *model.graph;
  std::cout << "model: " << path << "\n";
  if (!model.producer.empty()) std::cout << "producer: " << model.producer << "\n";
  std::cout << "opsets:";
  for (auto &[domain, version] : model.opsets)
    std::cout << " " << (domain.empty() ? "ai.onnx" : domain) << "=" << version;
  std::cout << "\ninputs:\n";
  for (Value *v : graph.inputs()) std::cout << "  " << v->name() << ": " << v->type().str() << "\n";
  std::cout << "outputs:\n";
  for (Value *v : graph.outputs()) std::cout << "  " << v->name() << ": " << v->type().str() << "\n";

  std::map<std::string_view, int64_t> counts;
  int64_t nodes = 0, params = 0, bytes = 0;
  graph.walk([&](Graph &g) {
    for (auto &n : g.nodes()) {
      ++counts[opName(n->op())];
      ++nodes;
      if (n->op() == OpKind::Constant) {
        const Tensor &t = n->getTensor("value");
        params += t.numel();
        bytes += static_cast<int64_t>(t.byteSize());
      }
    }
  });
  std::cout << "ops (" << nodes << " nodes):\n";
  for (auto &[op, count] : counts) std::cout << "  " << op << " " << count << "\n";
  std::cout << "parameters: " << params << " (" << bytes << " bytes)\n";
}

} // namespace

int inspectCommand(const std::vector<std::string> &argv) {
  std::vector<std::string> flags = {"input", "dim", "seed"};
  flags.insert(flags.end(), kTargetFlags.begin(), kTargetFlags.end());
  auto args = Args::parse(argv, flags, {"help"});
  if (!args.ok()) return fail("inspect", args.error());
  if (args->flag("help")) {
    std::cout << kHelp << kTargetHelp;
    return 0;
  }
  if (args->positional().size() != 1) return fail("inspect", Error{"expects one MODEL argument"});
  const std::string &path = args->positional()[0];
  if (isArtifactFile(path)) {
    auto engine = openArtifactEngine(path, 1);
    if (!engine.ok()) return fail("inspect", engine.error());
    std::cout << "artifact: " << path << "\n" << (*engine)->summary();
    return 0;
  }
  auto model = loadModel(path);
  if (!model.ok()) return fail("inspect", model.error());
  printModel(path, *model);
  if (!args->value("target")) return 0;

  auto target = targetOptionsFrom(*args);
  if (!target.ok()) return fail("inspect", target.error());
  auto spec = inputSpecFrom(*args);
  if (!spec.ok()) return fail("inspect", spec.error());
  auto inputs = prepareInputs(*model->graph, *spec);
  if (!inputs.ok()) return fail("inspect", inputs.error());
  auto engine = makeEngine(std::move(*model), *target);
  if (!engine.ok()) return fail("inspect", engine.error());
  if (target->target == "interp") return 0;
  std::cout << "target: " << target->target << " (cpu " << target->cpu << ", -O" << target->optLevel
            << ")\nprogram: " << (*engine)->summary() << "\n";
  auto outputs = (*engine)->run(std::move(*inputs));
  if (!outputs.ok()) return fail("inspect", outputs.error());
  std::cout << "peak activation memory: " << (*engine)->memoryReport() << "\n";
  return 0;
}

} // namespace kiln::cli
