// dce: dead code elimination.
//
// Before: a verified, topologically sorted model.
// After:  the same model without nodes none of whose outputs is used, in
//         the top-level graph and in every region; still sorted and valid.
//         A use is a node input (in any graph, so a region reading a value of
//         an enclosing graph keeps its producer alive) or a graph output
//         (region outputs included). Region signatures are never changed.
//
// Algorithm:
//  1. Count the uses of every value in the whole model.
//  2. Sweep each graph's nodes last to first. A node whose outputs all have
//     zero uses is erased, and the uses it made (its inputs and, for nodes
//     with regions, every input inside them) are uncounted, so producers
//     earlier in the sweep can die in the same sweep. A kept node's regions
//     are swept when it is reached, before the producers of the outer values
//     they read.
// Graph IR ops have no side effects, so dead random draws go too.
#include "passes/pass.h"

#include <unordered_map>

namespace kiln {
namespace {

using UseCounts = std::unordered_map<const Value *, int>;

void countUses(Graph &graph, UseCounts &uses, int delta) {
  graph.walk([&](Graph &g) {
    for (auto &n : g.nodes())
      for (Value *v : n->inputs())
        if (v) uses[v] += delta;
    for (Value *v : g.outputs()) uses[v] += delta;
  });
}

void uncountNode(Node &n, UseCounts &uses) {
  for (Value *v : n.inputs())
    if (v) --uses[v];
  for (Graph *r : n.regions()) countUses(*r, uses, -1);
}

bool sweep(Graph &graph, UseCounts &uses) {
  bool changed = false;
  std::vector<Node *> order;
  for (auto &n : graph.nodes()) order.push_back(n.get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node *n = *it;
    bool used = false;
    for (Value *v : n->outputs()) used |= uses[v] > 0;
    if (!used) {
      uncountNode(*n, uses);
      graph.eraseNode(n);
      changed = true;
      continue;
    }
    for (Graph *r : n->regions()) changed |= sweep(*r, uses);
  }
  return changed;
}

class DcePass : public Pass {
public:
  std::string_view name() const override { return "dce"; }
  Expected<bool> run(Model &model) override {
    UseCounts uses;
    countUses(*model.graph, uses, +1);
    return sweep(*model.graph, uses);
  }
};

} // namespace

std::unique_ptr<Pass> createDcePass() {
  return std::make_unique<DcePass>();
}

} // namespace kiln
