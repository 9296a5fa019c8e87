// The Graph IR verifier (rules in ir/verifier.h). It walks graphs in node
// order, keeping for each graph on the current region path the set of values
// defined so far; a use is valid when the value is in one of those sets.
#include "ir/verifier.h"

#include <algorithm>
#include <unordered_set>

namespace kiln {
namespace {

// Deeper nesting than the parser or importer produce means a region that
// contains itself.
constexpr int kMaxVerifyDepth = 256;

std::string_view kindWord(AttrKind k) {
  switch (k) {
  case AttrKind::Int:
    return "int";
  case AttrKind::Float:
    return "float";
  case AttrKind::String:
    return "string";
  case AttrKind::Tensor:
    return "tensor";
  case AttrKind::Graph:
    return "graph";
  case AttrKind::Ints:
    return "ints";
  case AttrKind::Floats:
    return "floats";
  case AttrKind::Strings:
    return "strings";
  case AttrKind::Type:
    return "type";
  }
  return "?";
}

std::string quoted(const Value *v) {
  return "'" + v->name() + "'";
}

// "expected 2", "expected 2 to 3", "expected at least 1".
std::string expectedCount(int min, int max) {
  if (max < 0) return strCat("expected at least ", min);
  if (min == max) return strCat("expected ", min);
  return strCat("expected ", min, " to ", max);
}

Status checkArity(const Node &n) {
  const OpSchema &s = n.schema();
  int ins = n.numInputs(), outs = n.numOutputs();
  if (ins < s.minInputs || (s.maxInputs >= 0 && ins > s.maxInputs))
    return makeError(n.describe(), ": has ", ins, ins == 1 ? " input, " : " inputs, ",
                     expectedCount(s.minInputs, s.maxInputs));
  if (outs < s.minOutputs || (s.maxOutputs >= 0 && outs > s.maxOutputs))
    return makeError(n.describe(), ": has ", outs, outs == 1 ? " output, " : " outputs, ",
                     expectedCount(s.minOutputs, s.maxOutputs));
  // The first minInputs inputs are required: kernels read them unchecked.
  for (int i = 0; i < s.minInputs; ++i)
    if (!n.input(i)) return makeError(n.describe(), ": required input ", i, " is absent");
  return Status::success();
}

Status checkAttributes(const Node &n) {
  const OpSchema &s = n.schema();
  for (const auto &[name, a] : n.attrs()) {
    const AttrSpec *spec = s.findAttr(name);
    if (!spec)
      return makeError(n.describe(), ": attribute '", name, "' is not an attribute of ", s.name);
    if (spec->kind != a.kind)
      return makeError(n.describe(), ": attribute '", name, "' is ", kindWord(a.kind),
                       ", expected ", kindWord(spec->kind));
    if (a.kind == AttrKind::Tensor && !a.t.defined())
      return makeError(n.describe(), ": attribute '", name, "' holds no tensor");
    if (a.kind == AttrKind::Graph && !a.g)
      return makeError(n.describe(), ": attribute '", name, "' holds no graph");
  }
  for (const AttrSpec &spec : s.attrs)
    if (spec.required && !n.hasAttr(spec.name))
      return makeError(n.describe(), ": missing required attribute '", spec.name, "'");
  return Status::success();
}

class Verifier {
public:
  // A root with a parent is a region verified on its own: its ancestors'
  // values are taken as defined.
  explicit Verifier(const Graph &root) {
    for (const Graph *g = root.parent(); g; g = g->parent()) outerGraphs_.insert(g);
  }

  Status graph(const Graph &g, int depth) {
    if (depth > kMaxVerifyDepth)
      return makeError("graph '", g.name(), "': regions nested more than ", kMaxVerifyDepth,
                       " deep (does a region contain itself?)");
    path_.push_back({&g, {}});
    Status s = body(g, depth);
    path_.pop_back();
    return s;
  }

private:
  struct Frame {
    const Graph *graph;
    std::unordered_set<const Value *> defined;
  };

  Status body(const Graph &g, int depth) {
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Value *v = g.inputs()[i];
      if (!v) return makeError("graph '", g.name(), "': input ", i, " is null");
      KILN_RETURN_IF_ERROR(define(v, strCat("graph '", g.name(), "': input ", i)));
    }
    for (const auto &n : g.nodes()) KILN_RETURN_IF_ERROR(node(*n, g, depth));
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const Value *v = g.outputs()[i];
      std::string where = strCat("graph '", g.name(), "': output ", i);
      if (!v) return makeError(where, " is null");
      if (!visible(v)) return makeError(where, " ", quoted(v), " is not defined");
    }
    return Status::success();
  }

  Status node(const Node &n, const Graph &g, int depth) {
    KILN_RETURN_IF_ERROR(checkArity(n));
    KILN_RETURN_IF_ERROR(checkAttributes(n));
    for (int i = 0; i < n.numInputs(); ++i)
      if (const Value *v = n.input(i); v && !visible(v))
        return makeError(n.describe(), ": input ", i, " ", quoted(v), " ", whyNotVisible(v));
    // Regions see what is defined so far, not this node's own results.
    for (const auto &[name, a] : n.attrs()) {
      if (a.kind != AttrKind::Graph || !a.g) continue;
      if (a.g->parent() != &g)
        return makeError(n.describe(), ": region ", name,
                         " does not have the node's graph as its parent");
      if (Status s = graph(*a.g, depth + 1); !s.ok())
        return withContext(n.describe() + ": region " + name, s.error());
    }
    for (int i = 0; i < n.numOutputs(); ++i)
      KILN_RETURN_IF_ERROR(define(n.output(i), strCat(n.describe(), ": output ", i)));
    return Status::success();
  }

  Status define(const Value *v, const std::string &where) {
    if (!everDefined_.insert(v).second)
      return makeError(where, " ", quoted(v),
                       " is defined more than once (is a region held by two nodes?)");
    path_.back().defined.insert(v);
    return Status::success();
  }

  bool visible(const Value *v) const {
    for (const Frame &f : path_)
      if (f.defined.count(v)) return true;
    return outerGraphs_.count(v->owner()) != 0;
  }

  std::string whyNotVisible(const Value *v) const {
    const Graph *owner = v->owner();
    bool onPath =
        std::any_of(path_.begin(), path_.end(), [&](const Frame &f) { return f.graph == owner; });
    if (!onPath)
      return strCat("is defined in graph '", owner ? owner->name() : "?",
                    "', which does not enclose this node");
    bool isInput = owner && std::find(owner->inputs().begin(), owner->inputs().end(), v) !=
                                owner->inputs().end();
    if (!v->producer() && !isInput) return "has no producer (was its node erased?)";
    return "is used before it is defined";
  }

  std::vector<Frame> path_;
  std::unordered_set<const Value *> everDefined_;
  std::unordered_set<const Graph *> outerGraphs_;
};

} // namespace

Status verifyGraph(const Graph &graph) {
  return Verifier(graph).graph(graph, 0);
}

Status verifyModel(const Model &model) {
  if (!model.graph) return makeError("model has no graph");
  return verifyGraph(*model.graph);
}

} // namespace kiln
