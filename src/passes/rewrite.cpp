#include "passes/rewrite.h"

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

} // namespace kiln
