#include "passes/rewrite.h"

#include <algorithm>

namespace kiln {

int replaceAllUsesWith(Graph &graph, Value *from, Value *to) {
  int replaced = 0;
  graph.walk([&](Graph &g) {
    for (auto &n : g.nodes())
      for (int i = 0; i < n->numInputs(); ++i)
        if (n->input(i) == from) {
          n->setInput(i, to);
          ++replaced;
        }
    std::vector<Value *> outs = g.outputs();
    bool changed = false;
    for (Value *&v : outs)
      if (v == from) {
        v = to;
        changed = true;
        ++replaced;
      }
    if (changed) g.setOutputs(std::move(outs));
  });
  return replaced;
}

namespace {

// The rule of outputNameKept. Only the top graph's outputs have names that
// mean something outside: a region's outputs are matched by position, so
// any value visible there may take one's place.
bool nameKept(const Graph &top, const Value *from, bool fromIsOutput, const Value *to,
              bool toIsOutput) {
  if (!fromIsOutput) return true;
  if (from->owner() != &top) return false;
  if (!to) return true;
  return to->owner() == &top && to->producer() && !toIsOutput;
}

bool isOutputOf(const Graph &g, const Value *v) {
  return v && std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

} // namespace

bool outputNameKept(const Graph &top, const Value *from, const Value *to) {
  return nameKept(top, from, isOutputOf(top, from), to, isOutputOf(top, to));
}

bool replaceKeepingOutputName(Graph &top, Value *from, Value *to) {
  if (!outputNameKept(top, from, to)) return false;
  if (isOutputOf(top, from)) to->setName(from->name());
  replaceAllUsesWith(top, from, to);
  return true;
}

bool isDeterministic(OpKind op) {
  switch (op) {
  case OpKind::RandomUniformLike:
  case OpKind::RandomNormalLike:
  case OpKind::Bernoulli:
    return false;
  default:
    return true;
  }
}

// ---- Rewriter -------------------------------------------------------------------

Rewriter::Rewriter(Graph &top) : top_(top) {
  addUses(top);
}

void Rewriter::addUses(Graph &g) {
  for (auto &n : g.nodes()) addNodeUses(*n);
  for (int i = 0; i < static_cast<int>(g.outputs().size()); ++i)
    uses_[g.outputs()[i]].push_back({nullptr, &g, i});
}

void Rewriter::addNodeUses(Node &n) {
  for (int i = 0; i < n.numInputs(); ++i)
    if (Value *v = n.input(i)) uses_[v].push_back({&n, nullptr, i});
  for (Graph *r : n.regions()) addUses(*r);
}

int Rewriter::numUses(const Value *v) const {
  auto it = uses_.find(v);
  return it == uses_.end() ? 0 : static_cast<int>(it->second.size());
}

bool Rewriter::isGraphOutput(const Value *v) const {
  return isOutputOf(top_, v);
}

std::vector<Node *> Rewriter::users(const Value *v) const {
  std::vector<Node *> out;
  if (auto it = uses_.find(v); it != uses_.end())
    for (const Use &u : it->second)
      if (u.node) out.push_back(u.node);
  return out;
}

Node *Rewriter::create(Graph &g, OpKind op, std::vector<Value *> inputs, std::string name,
                       int numOutputs) {
  Node *n = g.addNode(op, std::move(inputs), numOutputs, std::move(name));
  // The allocator may hand out the address of a node erased earlier: this
  // one is alive (a stale sweep entry with that address now names it, which
  // is harmless: it is a live node of that graph).
  erased_.erase(n);
  addNodeUses(*n);
  return n;
}

void Rewriter::track(Node &n) {
  erased_.erase(&n); // see create()
  addNodeUses(n);
}

Value *Rewriter::constant(Graph &g, Tensor t, std::string name) {
  Node *c = create(g, OpKind::Constant, {});
  Value *out = c->output(0);
  out->setName(std::move(name));
  out->setType(Type::tensor(t.dtype(), Shape::fromStatic(t.shape())));
  c->setAttr("value", Attribute::ofTensor(std::move(t)));
  return out;
}

void Rewriter::dropUse(Value *v, const Node *node, const Graph *graph, int index) {
  auto it = uses_.find(v);
  if (it == uses_.end()) return;
  auto &list = it->second;
  auto u = std::find_if(list.begin(), list.end(), [&](const Use &use) {
    return use.node == node && use.graph == graph && use.index == index;
  });
  if (u != list.end()) list.erase(u);
  if (list.empty()) uses_.erase(it);
}

void Rewriter::setInput(Node &n, int i, Value *v) {
  if (Value *old = n.input(i)) {
    dropUse(old, &n, nullptr, i);
    if (old->producer()) leftovers_.push_back(old->producer());
  }
  n.setInput(i, v);
  if (v) uses_[v].push_back({&n, nullptr, i});
}

bool Rewriter::canReplace(const Value *from, const Value *to) const {
  return outputNameKept(top_, from, to);
}

bool Rewriter::replace(Value *from, Value *to) {
  if (from == to || !canReplace(from, to)) return false;
  if (isGraphOutput(from) || to->name().empty()) to->setName(from->name());
  if (from->producer()) leftovers_.push_back(from->producer());
  auto it = uses_.find(from);
  if (it == uses_.end()) return true;
  std::vector<Use> moved = std::move(it->second);
  uses_.erase(it);
  for (const Use &u : moved) {
    if (u.node) {
      u.node->setInput(u.index, to);
    } else {
      std::vector<Value *> outs = u.graph->outputs();
      outs[u.index] = to;
      u.graph->setOutputs(std::move(outs));
    }
    uses_[to].push_back(u);
  }
  return true;
}

void Rewriter::dropNodeUses(Node &n, std::vector<Value *> &read) {
  for (int i = 0; i < n.numInputs(); ++i)
    if (Value *v = n.input(i)) {
      dropUse(v, &n, nullptr, i);
      read.push_back(v);
    }
  for (Graph *r : n.regions()) {
    for (auto &inner : r->nodes()) dropNodeUses(*inner, read);
    for (int i = 0; i < static_cast<int>(r->outputs().size()); ++i) {
      dropUse(r->outputs()[i], nullptr, r, i);
      read.push_back(r->outputs()[i]);
    }
  }
}

void Rewriter::eraseIfDead(Node *root) {
  std::vector<Node *> work{root};
  while (!work.empty()) {
    Node *n = work.back();
    work.pop_back();
    if (erased(n)) continue;
    bool used = false;
    for (Value *v : n->outputs()) used |= numUses(v) > 0;
    if (used) continue;
    std::vector<Value *> read;
    dropNodeUses(*n, read);
    // Values defined inside n's regions die with them; only outer ones'
    // producers may have lost their last use.
    std::unordered_set<const Graph *> inner;
    for (Graph *r : n->regions()) r->walk([&](Graph &g) { inner.insert(&g); });
    for (Value *v : read)
      if (!inner.count(v->owner()) && v->producer()) work.push_back(v->producer());
    erased_.insert(n);
    n->owner()->eraseNode(n);
  }
}

void Rewriter::eraseDeadLeftovers() {
  std::vector<Node *> nodes = std::move(leftovers_);
  leftovers_.clear();
  for (Node *n : nodes) eraseIfDead(n);
}

// ---- the driver -----------------------------------------------------------------

namespace {

// A bound, not a budget: patterns shrink or simplify the graph, so a healthy
// set converges in a few sweeps.
constexpr int kMaxSweeps = 32;

using PatternIndex = std::vector<std::vector<const Pattern *>>;

bool sweep(Graph &graph, const PatternIndex &byOp, Rewriter &rw, bool unusedToo) {
  bool changed = false;
  std::vector<Node *> order;
  for (auto &n : graph.nodes()) order.push_back(n.get());
  for (Node *n : order) {
    if (rw.erased(n)) continue;
    for (Graph *r : n->regions()) changed |= sweep(*r, byOp, rw, unusedToo);
    if (rw.erased(n)) continue;
    bool used = false;
    for (Value *v : n->outputs()) used |= rw.numUses(v) > 0;
    if (!used && !unusedToo) continue;
    for (auto *list : {&byOp[static_cast<size_t>(n->op())], &byOp.back()}) {
      bool applied = false;
      for (const Pattern *p : *list)
        if (p->apply(*n, rw)) {
          applied = true;
          break;
        }
      if (applied) {
        changed = true;
        rw.eraseIfDead(n);
        rw.eraseDeadLeftovers();
        break;
      }
    }
  }
  return changed;
}

class PatternPass : public Pass {
public:
  explicit PatternPass(const PatternSet &set) : set_(set) {}
  std::string_view name() const override { return set_.name; }
  Expected<bool> run(Model &model) override { return applyPatterns(model, set_); }

private:
  const PatternSet &set_;
};

} // namespace

Expected<bool> applyPatterns(Model &model, const PatternSet &set) {
  // byOp[op] for patterns rooted at op; the last entry for "every op".
  PatternIndex byOp(static_cast<size_t>(OpKind::NumOps) + 1);
  for (const Pattern &p : set.patterns) byOp[static_cast<size_t>(p.root)].push_back(&p);
  Rewriter rw(*model.graph);
  bool changed = false;
  for (int i = 0; i < kMaxSweeps; ++i) {
    rw.forgetErased();
    if (!sweep(*model.graph, byOp, rw, set.rewriteUnusedNodes)) break;
    changed = true;
    Status sorted = Status::success();
    model.graph->walk([&](Graph &g) {
      if (Status s = g.sortTopologically(); !s.ok() && sorted.ok()) sorted = s;
    });
    if (!sorted.ok()) return makeError(set.name, ": ", sorted.error().message);
  }
  return changed;
}

std::unique_ptr<Pass> makePatternPass(const PatternSet &set) {
  return std::make_unique<PatternPass>(set);
}

} // namespace kiln
