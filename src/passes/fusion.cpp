#include "passes/fusion.h"

#include "passes/rewrite.h"

#include <algorithm>
#include <unordered_set>

namespace kiln::fusion {

UseInfo::UseInfo(Graph &graph) {
  for (auto &n : graph.nodes()) {
    for (Value *v : n->inputs())
      if (v) users_[v].push_back(n.get());
    for (Graph *r : n->regions())
      r->walk([&](Graph &g) {
        for (auto &inner : g.nodes())
          for (Value *v : inner->inputs())
            if (v) escaping_[v] = true;
        for (Value *v : g.outputs()) escaping_[v] = true;
      });
  }
  for (Value *v : graph.outputs()) escaping_[v] = true;
}

const std::vector<Node *> &UseInfo::users(const Value *v) const {
  auto it = users_.find(v);
  return it == users_.end() ? none_ : it->second;
}

bool UseInfo::hasSingleUse(const Value *v) const {
  return !escapes(v) && users(v).size() == 1;
}

namespace {

// Names already used anywhere in the model, so region values get fresh
// ones (the text form resolves names through enclosing scopes).
std::unordered_set<std::string> namesIn(Graph &top) {
  std::unordered_set<std::string> names;
  top.walk([&](Graph &g) {
    for (Value *v : g.inputs()) names.insert(v->name());
    for (auto &n : g.nodes())
      for (Value *v : n->outputs())
        if (v) names.insert(v->name());
  });
  return names;
}

std::string fresh(std::unordered_set<std::string> &used, const std::string &base) {
  std::string name = base;
  for (int i = 2; used.count(name); ++i) name = base + "_" + std::to_string(i);
  used.insert(name);
  return name;
}

Graph &topOf(Graph &g) {
  Graph *t = &g;
  while (t->parent()) t = t->parent();
  return *t;
}

} // namespace

std::vector<Graph *> graphsToFuse(Graph &top) {
  std::vector<Graph *> graphs{&top};
  for (size_t i = 0; i < graphs.size(); ++i)
    for (auto &n : graphs[i]->nodes())
      if (n->op() != OpKind::Fused)
        for (Graph *r : n->regions()) graphs.push_back(r);
  return graphs;
}

Node *fuseNodes(Graph &graph, const std::vector<Node *> &nodes, const std::string &kind) {
  std::unordered_set<const Node *> inGroup(nodes.begin(), nodes.end());
  UseInfo uses(graph);

  std::vector<Value *> inputs, outputs;
  std::unordered_set<const Value *> produced;
  for (Node *n : nodes)
    for (Value *v : n->outputs())
      if (v) produced.insert(v);
  for (Node *n : nodes)
    for (Value *v : n->inputs())
      if (v && !produced.count(v) && std::find(inputs.begin(), inputs.end(), v) == inputs.end())
        inputs.push_back(v);
  for (Node *n : nodes)
    for (Value *v : n->outputs()) {
      if (!v) continue;
      bool outside = uses.escapes(v);
      for (Node *u : uses.users(v)) outside |= !inGroup.count(u);
      if (outside) outputs.push_back(v);
    }

  std::unordered_set<std::string> names = namesIn(topOf(graph));
  const std::string base = fresh(names, "fused." + nodes.front()->name());
  auto body = std::make_shared<Graph>(base, &graph);
  std::unordered_map<const Value *, Value *> map;
  for (size_t i = 0; i < inputs.size(); ++i)
    map[inputs[i]] = body->addInput(fresh(names, base + ".in" + std::to_string(i)),
                                    inputs[i]->type());
  for (Node *n : nodes) {
    std::vector<Value *> in;
    for (Value *v : n->inputs()) in.push_back(v ? map.at(v) : nullptr);
    Node *copy = body->addNode(n->op(), in, n->numOutputs(), n->name());
    for (const auto &[name, attr] : n->attrs()) copy->setAttr(name, attr);
    for (int i = 0; i < n->numOutputs(); ++i) {
      Value *o = n->output(i);
      Value *c = copy->output(i);
      if (!o) continue;
      c->setType(o->type());
      c->setName(fresh(names, base + "." + o->name()));
      map[o] = c;
    }
  }
  std::vector<Value *> bodyOutputs;
  for (Value *o : outputs) bodyOutputs.push_back(map.at(o));
  body->setOutputs(bodyOutputs);

  Node *fused = graph.addNode(OpKind::Fused, inputs, static_cast<int>(outputs.size()), base);
  fused->setAttr("body", Attribute::ofGraph(body));
  fused->setAttr("kind", Attribute::ofString(kind));
  for (size_t i = 0; i < outputs.size(); ++i) {
    Value *old = outputs[i];
    Value *now = fused->output(static_cast<int>(i));
    now->setType(old->type());
    std::string name = old->name();
    old->setName(fresh(names, name + ".unfused"));
    now->setName(name);
    replaceAllUsesWith(graph, old, now);
  }
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) graph.eraseNode(*it);
  (void)graph.sortTopologically();
  return fused;
}

} // namespace kiln::fusion
