#include "ir/graph.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

Attribute Attribute::ofInt(int64_t v) {
  Attribute a;
  a.kind = AttrKind::Int;
  a.i = v;
  return a;
}
Attribute Attribute::ofFloat(float v) {
  Attribute a;
  a.kind = AttrKind::Float;
  a.f = v;
  return a;
}
Attribute Attribute::ofString(std::string v) {
  Attribute a;
  a.kind = AttrKind::String;
  a.s = std::move(v);
  return a;
}
Attribute Attribute::ofTensor(Tensor v) {
  Attribute a;
  a.kind = AttrKind::Tensor;
  a.t = std::move(v);
  return a;
}
Attribute Attribute::ofGraph(std::shared_ptr<Graph> v) {
  Attribute a;
  a.kind = AttrKind::Graph;
  a.g = std::move(v);
  return a;
}
Attribute Attribute::ofInts(std::vector<int64_t> v) {
  Attribute a;
  a.kind = AttrKind::Ints;
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::ofFloats(std::vector<float> v) {
  Attribute a;
  a.kind = AttrKind::Floats;
  a.floats = std::move(v);
  return a;
}
Attribute Attribute::ofStrings(std::vector<std::string> v) {
  Attribute a;
  a.kind = AttrKind::Strings;
  a.strings = std::move(v);
  return a;
}
Attribute Attribute::ofType(Type v) {
  Attribute a;
  a.kind = AttrKind::Type;
  a.type = std::move(v);
  return a;
}

// ---- Node -------------------------------------------------------------------

void Node::setInput(int i, Value *v) {
  if (i >= numInputs()) inputs_.resize(i + 1, nullptr);
  inputs_[i] = v;
}

const Attribute *Node::attr(const std::string &n) const {
  auto it = attrs_.find(n);
  return it == attrs_.end() ? nullptr : &it->second;
}

namespace {
const AttrSpec &specOrDie(const Node &node, const std::string &n) {
  const AttrSpec *spec = node.schema().findAttr(n);
  assert(spec && "attribute not declared in the op table");
  if (!spec) std::abort();
  return *spec;
}
} // namespace

int64_t Node::getInt(const std::string &n) const {
  if (const Attribute *a = attr(n)) return a->i;
  const AttrSpec &spec = specOrDie(*this, n);
  assert(spec.defaultText && "integer attribute has no default");
  return spec.defaultText ? std::strtoll(spec.defaultText->c_str(), nullptr, 10) : 0;
}

float Node::getFloat(const std::string &n) const {
  if (const Attribute *a = attr(n)) return a->f;
  const AttrSpec &spec = specOrDie(*this, n);
  assert(spec.defaultText && "float attribute has no default");
  return spec.defaultText ? std::strtof(spec.defaultText->c_str(), nullptr) : 0.0f;
}

std::string Node::getString(const std::string &n) const {
  if (const Attribute *a = attr(n)) return a->s;
  const AttrSpec &spec = specOrDie(*this, n);
  return spec.defaultText.value_or("");
}

std::vector<int64_t> Node::getInts(const std::string &n) const {
  const Attribute *a = attr(n);
  return a ? a->ints : std::vector<int64_t>{};
}
std::vector<float> Node::getFloats(const std::string &n) const {
  const Attribute *a = attr(n);
  return a ? a->floats : std::vector<float>{};
}
std::vector<std::string> Node::getStrings(const std::string &n) const {
  const Attribute *a = attr(n);
  return a ? a->strings : std::vector<std::string>{};
}
const Tensor &Node::getTensor(const std::string &n) const {
  static const Tensor kEmpty;
  const Attribute *a = attr(n);
  return a ? a->t : kEmpty;
}
Graph *Node::getGraph(const std::string &n) const {
  const Attribute *a = attr(n);
  return a ? a->g.get() : nullptr;
}

std::vector<Graph *> Node::regions() const {
  std::vector<Graph *> out;
  for (auto &[name, a] : attrs_)
    if (a.kind == AttrKind::Graph && a.g) out.push_back(a.g.get());
  return out;
}

std::string Node::describe() const {
  return "node '" + name_ + "' (" + std::string(opName(op_)) + ")";
}

// ---- Graph ------------------------------------------------------------------

Value *Graph::newValue(Node *producer, int index) {
  auto v = std::make_unique<Value>();
  v->producer_ = producer;
  v->producerIndex_ = index;
  v->owner_ = this;
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value *Graph::addInput(std::string name, Type type) {
  Value *v = newValue(nullptr, -1);
  v->name_ = std::move(name);
  v->type_ = std::move(type);
  inputs_.push_back(v);
  return v;
}

Node *Graph::addNode(OpKind op, std::vector<Value *> inputs, int numOutputs, std::string name) {
  auto n = std::make_unique<Node>();
  n->op_ = op;
  n->name_ = std::move(name);
  n->inputs_ = std::move(inputs);
  n->owner_ = this;
  for (int i = 0; i < numOutputs; ++i) n->outputs_.push_back(newValue(n.get(), i));
  nodes_.push_back(std::move(n));
  return nodes_.back().get();
}

void Graph::eraseNode(Node *n) {
  auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](auto &p) { return p.get() == n; });
  if (it == nodes_.end()) return;
  for (Value *v : n->outputs_) v->producer_ = nullptr;
  nodes_.erase(it);
}

namespace {
// Values a node depends on from its own graph: its inputs plus whatever its
// regions (transitively) read from outside themselves.
void collectDeps(const Node &n, std::vector<Value *> &deps) {
  for (Value *v : n.inputs())
    if (v) deps.push_back(v);
  for (Graph *r : n.regions())
    for (auto &inner : r->nodes()) collectDeps(*inner, deps);
}
} // namespace

Status Graph::sortTopologically() {
  std::unordered_map<const Node *, size_t> index;
  for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].get()] = i;

  // Iterative DFS post-order; state 1 = on stack, 2 = done.
  std::vector<uint8_t> state(nodes_.size(), 0);
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(nodes_.size());
  std::vector<std::vector<size_t>> depsOf(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<Value *> deps;
    collectDeps(*nodes_[i], deps);
    for (Value *v : deps)
      if (v->owner_ == this && v->producer_) {
        auto it = index.find(v->producer_);
        if (it != index.end()) depsOf[i].push_back(it->second);
      }
  }
  std::vector<std::pair<size_t, size_t>> stack; // node, next dep position
  std::vector<size_t> order;
  for (size_t root = 0; root < nodes_.size(); ++root) {
    if (state[root]) continue;
    stack.push_back({root, 0});
    state[root] = 1;
    while (!stack.empty()) {
      auto &[n, pos] = stack.back();
      if (pos < depsOf[n].size()) {
        size_t d = depsOf[n][pos++];
        if (state[d] == 1)
          return makeError("graph '", name_, "' has a cycle through ", nodes_[d]->describe());
        if (state[d] == 0) {
          state[d] = 1;
          stack.push_back({d, 0});
        }
        continue;
      }
      state[n] = 2;
      order.push_back(n);
      stack.pop_back();
    }
  }
  for (size_t i : order) sorted.push_back(std::move(nodes_[i]));
  nodes_ = std::move(sorted);
  for (auto &n : nodes_)
    for (Graph *r : n->regions()) KILN_RETURN_IF_ERROR(r->sortTopologically());
  return Status::success();
}

const Tensor *constantOf(const Value *v) {
  if (!v || !v->producer() || v->producer()->op() != OpKind::Constant) return nullptr;
  const Attribute *a = v->producer()->attr("value");
  return a && a->kind == AttrKind::Tensor && a->t.defined() ? &a->t : nullptr;
}

} // namespace kiln
