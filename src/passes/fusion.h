// Shared machinery of the fusion passes (fuse-epilogues, fuse-elementwise):
// who uses a value, and turning a set of nodes into one Fused node whose
// region holds them (ops/compiler.def).
#pragma once

#include "ir/graph.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::fusion {

// Uses of each value of one graph: the nodes reading it directly, and
// whether anything else (a graph output, a region of any node) reads it.
class UseInfo {
public:
  explicit UseInfo(Graph &graph);
  const std::vector<Node *> &users(const Value *v) const;
  // Read by a graph output or from inside some region.
  bool escapes(const Value *v) const { return escaping_.count(v) != 0; }
  // Exactly one reader, a node of this graph reading it once.
  bool hasSingleUse(const Value *v) const;

private:
  std::unordered_map<const Value *, std::vector<Node *>> users_;
  std::unordered_map<const Value *, bool> escaping_;
  std::vector<Node *> none_;
};

// `top` and every region below it except those of Fused nodes (a fused
// region is one kernel already: nothing is fused inside it), outer first.
std::vector<Graph *> graphsToFuse(Graph &top);

// Replaces `nodes` (in topological order, all in `graph`, none with
// regions) by one Fused node of the given kind. Its inputs are the values
// the group reads from outside (first use order), its outputs the values
// read outside the group (they keep their names). The graph is left
// topologically sorted. Returns the new node.
Node *fuseNodes(Graph &graph, const std::vector<Node *> &nodes, const std::string &kind);

} // namespace kiln::fusion
