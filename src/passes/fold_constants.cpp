// fold-constants: evaluates at compile time what depends only on constants.
//
// Before: a verified, topologically sorted model.
// After:  every node that
//           - is deterministic, has no regions and is not a Constant,
//           - has at least one input, and every present input is produced
//             by a Constant node,
//           - and whose outputs are tensors of at most kMaxFoldedElements
//             elements each,
//         is replaced by one Constant node per output, holding what the
//         interpreter's kernel computes (outputs keep their names; the
//         folded node's name goes to the constants). Besides, Shape and Size
//         of a value whose type is fully static become constants without
//         evaluating that value. A node whose kernel fails is left as it is
//         (the error belongs to run time). The model stays sorted and
//         valid; constants that lose their last use are left for dce.
//
// Algorithm: visit each graph's nodes in order (regions included, each
// constant lands in the graph of the node it replaces), so the constant made
// for one node is already a Constant when its consumers are visited: a
// Shape -> Gather -> Concat -> Reshape chain over static shapes folds in one
// run. Graphs are re-sorted at the end, as new constants are appended.
#include "interp/interpreter.h"
#include "interp/kernel.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

#include <algorithm>
#include <optional>

namespace kiln {
namespace {

// Outputs larger than this stay computed at run time: folding them would
// grow the model's weights for little gain.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 20;

const Tensor *constantValue(const Value *v) {
  if (!v || !v->producer() || v->producer()->op() != OpKind::Constant) return nullptr;
  return &v->producer()->getTensor("value");
}

std::optional<Shape64> staticShapeOf(const Value *v) {
  if (!v || !v->type().isTensor()) return std::nullopt;
  return v->type().shape().staticDims();
}

// Shape and Size of a statically shaped value, without its data.
std::optional<Tensor> foldFromType(const Node &n) {
  if (n.op() != OpKind::Shape && n.op() != OpKind::Size) return std::nullopt;
  std::optional<Shape64> dims = staticShapeOf(n.input(0));
  if (!dims) return std::nullopt;
  if (n.op() == OpKind::Size) return Tensor::scalar<int64_t>(numelOf(*dims));
  const int64_t rank = static_cast<int64_t>(dims->size());
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  int64_t start = clampAxis(n.getInt("start"));
  int64_t end = n.hasAttr("end") ? clampAxis(n.getInt("end")) : rank;
  std::vector<int64_t> slice(dims->begin() + start, dims->begin() + std::max(start, end));
  return Tensor::fromVector(slice, {static_cast<int64_t>(slice.size())});
}

bool mayEvaluate(const Node &n) {
  if (n.op() == OpKind::Constant || !n.regions().empty() || !isDeterministic(n.op())) return false;
  bool anyInput = false;
  for (Value *v : n.inputs()) {
    if (!v) continue;
    if (!constantValue(v)) return false;
    anyInput = true;
  }
  if (!anyInput) return false;
  for (Value *out : n.outputs()) {
    if (!out->type().isTensor()) return false;
    std::optional<Shape64> dims = staticShapeOf(out);
    if (dims && numelOf(*dims) > kMaxFoldedElements) return false;
  }
  return true;
}

// The node's outputs computed by its kernel, or nothing when it cannot be
// (no kernel, a kernel error, a non-tensor or too large result).
std::optional<std::vector<Tensor>> evaluate(const Node &n) {
  KernelFn kernel = kernelTable().find(n.op());
  if (!kernel) return std::nullopt;
  std::vector<RtValue> held;
  held.reserve(n.numInputs());
  std::vector<const RtValue *> inputs;
  for (Value *v : n.inputs()) {
    if (!v) {
      inputs.push_back(nullptr);
      continue;
    }
    held.emplace_back(*constantValue(v));
    inputs.push_back(&held.back());
  }
  Interpreter interp;
  InterpOptions options;
  Environment env;
  KernelContext ctx(n, std::move(inputs), interp, options, env);
  try {
    if (!kernel(ctx).ok()) return std::nullopt;
  } catch (const std::exception &) { // oversized or unallocatable results
    return std::nullopt;
  }
  std::vector<Tensor> results;
  for (RtValue &v : ctx.takeOutputs()) {
    if (!v.isTensor() || !v.tensor.defined() || v.tensor.numel() > kMaxFoldedElements)
      return std::nullopt;
    results.push_back(std::move(v.tensor));
  }
  return results;
}

void replaceWithConstants(Graph &top, Node &n, std::vector<Tensor> values) {
  Graph &g = *n.owner();
  for (int i = 0; i < n.numOutputs(); ++i) {
    Node *c = g.addNode(OpKind::Constant, {}, 1, n.name());
    Value *out = c->output(0);
    out->setName(n.output(i)->name());
    out->setType(Type::tensor(values[i].dtype(), Shape::fromStatic(values[i].shape())));
    c->setAttr("value", Attribute::ofTensor(std::move(values[i])));
    replaceAllUsesWith(top, n.output(i), out);
  }
  g.eraseNode(&n);
}

bool foldGraph(Graph &top, Graph &graph) {
  bool changed = false;
  std::vector<Node *> order;
  for (auto &n : graph.nodes()) order.push_back(n.get());
  for (Node *n : order) {
    for (Graph *r : n->regions()) changed |= foldGraph(top, *r);
    std::optional<std::vector<Tensor>> values;
    if (std::optional<Tensor> t = foldFromType(*n))
      values = std::vector<Tensor>{std::move(*t)};
    else if (mayEvaluate(*n))
      values = evaluate(*n);
    if (!values) continue;
    replaceWithConstants(top, *n, std::move(*values));
    changed = true;
  }
  return changed;
}

class FoldConstantsPass : public Pass {
public:
  std::string_view name() const override { return "fold-constants"; }
  Expected<bool> run(Model &model) override {
    if (!foldGraph(*model.graph, *model.graph)) return false;
    Status sorted = Status::success();
    model.graph->walk([&](Graph &g) {
      if (Status s = g.sortTopologically(); !s.ok() && sorted.ok()) sorted = s;
    });
    if (!sorted.ok()) return sorted.error();
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createFoldConstantsPass() {
  return std::make_unique<FoldConstantsPass>();
}

} // namespace kiln
