// `kiln inspect MODEL`: inputs, outputs, op counts, opsets and parameters.
#include "cli.h"
#include "commands.h"

#include <iostream>
#include <map>

namespace kiln::cli {

namespace {

const char *kHelp = R"(usage: kiln inspect MODEL

Prints MODEL's inputs and outputs with their types, the opsets it imports,
how many nodes of each op it has (regions included), and its parameter count
and bytes (the elements and bytes of all constant tensors).
)";

} // namespace

int inspectCommand(const std::vector<std::string> &argv) {
  auto args = Args::parse(argv, {}, {"help"});
  if (!args.ok()) return fail("inspect", args.error());
  if (args->flag("help")) {
    std::cout << kHelp;
    return 0;
  }
  if (args->positional().size() != 1) return fail("inspect", Error{"expects one MODEL argument"});
  auto model = loadModel(args->positional()[0]);
  if (!model.ok()) return fail("inspect", model.error());
  Graph &graph = *model->graph;

  std::cout << "model: " << args->positional()[0] << "\n";
  if (!model->producer.empty()) std::cout << "producer: " << model->producer << "\n";
  std::cout << "opsets:";
  for (auto &[domain, version] : model->opsets)
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
  return 0;
}

} // namespace kiln::cli
