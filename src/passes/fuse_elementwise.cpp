// fuse-elementwise: groups chains of elementwise nodes of one output shape
// into Fused(kind = "elementwise") nodes, each of which the CPU backend
// compiles into one loop nest (lower/elementwise.h): intermediates stay in
// registers instead of round-tripping through memory.
//
// Before: a verified, topologically sorted model.
// After:  the same model where every group of >= 2 fusible nodes is one
//         Fused node; values read outside a group are its outputs (names
//         kept); still sorted and valid. Runs inside If branches too.
//
// Algorithm (per graph, greedy in topological order):
//  1. A node is fusible when the elementwise lowering can express it alone
//     (lower::canLowerElementwise and statically provable broadcasting).
//  2. A fusible node joins the group of one of its producers when its output
//     has the group's shape (dims equal, or unknown: then the executor
//     checks each run and falls back to the interpreter if they differ) and every other input comes
//     from the group or from a node placed before the group's first node or from a node without
//     inputs — so no path leaves the group and comes back (no cycle).
//  3. Otherwise it starts a new group. Groups of >= 2 nodes become Fused.
#include "lower/elementwise.h"
#include "lower/elementwise_ops.h"
#include "passes/fusion.h"
#include "passes/pass.h"

#include <unordered_map>

namespace kiln {
namespace {

bool isFusible(const Node &n) {
  if (!lower::canLowerElementwise(n)) return false;
  lower::ElementwiseGroup g;
  g.nodes = {&n};
  for (const Value *v : n.inputs())
    if (v) g.inputs.push_back(v);
  g.outputs = {n.output(0)};
  return lower::lowerElementwise(g, "probe", 1).ok();
}

bool fuseGraph(Graph &graph) {
  (void)graph.sortTopologically();
  std::vector<Node *> order;
  for (auto &n : graph.nodes()) order.push_back(n.get());
  std::unordered_map<const Node *, int> position, groupOf;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
  std::vector<std::vector<Node *>> groups;

  for (Node *n : order) {
    if (!isFusible(*n)) continue;
    const Shape &shape = n->output(0)->type().shape();
    int chosen = -1;
    for (const Value *v : n->inputs()) {
      if (!v || !v->producer() || !groupOf.count(v->producer())) continue;
      const int g = groupOf[v->producer()];
      if (!lower::compatibleShapes(groups[g].front()->output(0)->type().shape(), shape)) continue;
      const int first = position[groups[g].front()];
      bool acyclic = true;
      for (const Value *u : n->inputs()) {
        if (!u || !u->producer() || u->producer()->owner() != &graph) continue;
        // A producer without inputs (a Constant node, e.g. the scale a
        // decomposed BatchNormalization multiplies by) lies on no path out
        // of the group: it cannot close a cycle wherever it is placed.
        // Counting it split a QAT conv's Div -> Mul -> Add into three
        // passes over the activation.
        if (u->producer()->numInputs() == 0) continue;
        auto it = groupOf.find(u->producer());
        if (it != groupOf.end() && it->second == g) continue;
        acyclic &= position[u->producer()] < first;
      }
      if (acyclic) {
        chosen = g;
        break;
      }
    }
    if (chosen < 0) {
      chosen = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    groups[chosen].push_back(n);
    groupOf[n] = chosen;
  }

  bool changed = false;
  for (const std::vector<Node *> &g : groups)
    if (g.size() >= 2) {
      fusion::fuseNodes(graph, g, "elementwise");
      changed = true;
    }
  return changed;
}

class FuseElementwisePass : public Pass {
public:
  std::string_view name() const override { return "fuse-elementwise"; }
  Expected<bool> run(Model &model) override {
    bool changed = false;
    for (Graph *g : fusion::graphsToFuse(*model.graph)) changed |= fuseGraph(*g);
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createFuseElementwisePass() { return std::make_unique<FuseElementwisePass>(); }

} // namespace kiln
