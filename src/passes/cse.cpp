// cse: common subexpression elimination.
//
// Before: a verified, topologically sorted model.
// After:  no two nodes in one scope compute the same thing: where a node has
//         the same op, the same inputs (by value, absent ones included), the
//         same number of outputs and identical attributes as a node before
//         it (in its graph or, for region nodes, in an enclosing graph before
//         the node holding the region), its outputs' uses go to the earlier
//         node's outputs and it is erased. Constants with identical tensors
//         (dtype, shape and bytes) merge this way. Nodes with regions and
//         random ops are never merged. Graph outputs keep their names: the
//         earlier node's result takes the name of an output it replaces, and
//         where it cannot (it is an output too, or a value of another graph)
//         both nodes stay. The model stays sorted and valid.
//
// Algorithm:
//  1. Walk the top-level graph in order with a stack of scopes, each a hash
//     table from (op, inputs, attribute names and small-tensor bytes) to the
//     nodes seen so far.
//  2. For each node, look for an equal node in the innermost scope, then in
//     the enclosing ones; if one is found, replace all uses and erase the
//     node, else record it.
//  3. On a node with regions, walk each region with a fresh scope pushed.
//     Merging in order means chains merge in one pass: once two producers
//     merge, their consumers have equal inputs.
#include "passes/pass.h"
#include "passes/rewrite.h"

#include <cstring>
#include <functional>
#include <unordered_map>

namespace kiln {
namespace {

bool sameBits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool sameFloats(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!sameBits(a[i], b[i])) return false;
  return true;
}

bool sameAttribute(const Attribute &a, const Attribute &b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
  case AttrKind::Int:
    return a.i == b.i;
  case AttrKind::Float:
    return sameBits(a.f, b.f);
  case AttrKind::String:
    return a.s == b.s;
  case AttrKind::Tensor:
    return a.t.identical(b.t);
  case AttrKind::Graph:
    return false; // regions are never merged
  case AttrKind::Ints:
    return a.ints == b.ints;
  case AttrKind::Floats:
    return sameFloats(a.floats, b.floats);
  case AttrKind::Strings:
    return a.strings == b.strings;
  case AttrKind::Type:
    return a.type == b.type;
  }
  return false;
}

bool equivalent(const Node &a, const Node &b) {
  if (a.op() != b.op() || a.inputs() != b.inputs() || a.numOutputs() != b.numOutputs() ||
      a.attrs().size() != b.attrs().size())
    return false;
  for (auto ia = a.attrs().begin(), ib = b.attrs().begin(); ia != a.attrs().end(); ++ia, ++ib)
    if (ia->first != ib->first || !sameAttribute(ia->second, ib->second)) return false;
  return true;
}

size_t mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

size_t hashNode(const Node &n) {
  size_t h = std::hash<int>()(static_cast<int>(n.op()));
  for (Value *v : n.inputs()) h = mix(h, std::hash<const void *>()(v));
  for (auto &[name, a] : n.attrs()) {
    h = mix(h, std::hash<std::string>()(name));
    // Constants differ mostly by their bytes: hash a prefix of them.
    if (a.kind == AttrKind::Tensor && a.t.defined() && a.t.dtype() != DType::String) {
      size_t bytes = std::min<size_t>(a.t.byteSize(), 64);
      h = mix(h, std::hash<std::string_view>()(
                     std::string_view(static_cast<const char *>(a.t.raw()), bytes)));
    }
  }
  return h;
}

bool mergeable(const Node &n) {
  return n.regions().empty() && isDeterministic(n.op());
}

using Scope = std::unordered_multimap<size_t, Node *>;

class Cse {
public:
  explicit Cse(Graph &top) : top_(top) {}

  bool runOn(Graph &graph) {
    scopes_.emplace_back();
    std::vector<Node *> order;
    for (auto &n : graph.nodes()) order.push_back(n.get());
    for (Node *n : order) {
      for (Graph *r : n->regions()) runOn(*r);
      if (!mergeable(*n)) continue;
      size_t h = hashNode(*n);
      Node *same = find(*n, h);
      if (same && keepsOutputNames(*n, *same)) {
        for (int i = 0; i < n->numOutputs(); ++i)
          replaceKeepingOutputName(top_, n->output(i), same->output(i));
        graph.eraseNode(n);
        changed_ = true;
      } else {
        scopes_.back().emplace(h, n);
      }
    }
    scopes_.pop_back();
    return changed_;
  }

private:
  // Two graph outputs cannot become one value: they would lose a name.
  bool keepsOutputNames(const Node &n, const Node &same) {
    for (int i = 0; i < n.numOutputs(); ++i)
      if (!outputNameKept(top_, n.output(i), same.output(i))) return false;
    return true;
  }

  Node *find(const Node &n, size_t h) {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      auto [lo, hi] = scope->equal_range(h);
      for (auto it = lo; it != hi; ++it)
        if (equivalent(*it->second, n)) return it->second;
    }
    return nullptr;
  }

  Graph &top_;
  std::vector<Scope> scopes_;
  bool changed_ = false;
};

class CsePass : public Pass {
public:
  std::string_view name() const override { return "cse"; }
  Expected<bool> run(Model &model) override { return Cse(*model.graph).runOn(*model.graph); }
};

} // namespace

std::unique_ptr<Pass> createCsePass() {
  return std::make_unique<CsePass>();
}

} // namespace kiln
