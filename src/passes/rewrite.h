// Rewriting machinery shared by graph passes: replacing every use of a value,
// questions several passes ask about ops, and the pattern driver that runs
// local rewrites (STYLE.md habit 3).
//
// A local rewrite is a Pattern: a function tried on one node (its root) that
// either returns false having changed nothing, or rewrites the IR through a
// Rewriter and returns true. Patterns come in named PatternSets; one driver,
// applyPatterns, runs a set to a fixpoint. A pass made of local rewrites is
// just a set: makePatternPass gives it the set's name.
//
// The Rewriter keeps a use list of every value of the model (node inputs in
// any graph, regions included, and graph outputs), so patterns can ask "is
// this the only use?" without scanning, and so the driver can erase what a
// rewrite leaves unused the moment it does. Patterns must mutate the IR only
// through it (create, setInput, replace), or the use lists go stale.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln {

// Makes every node input and graph output that refers to `from` refer to `to`
// instead, in `graph` and every region below it. Regions may read values of
// enclosing graphs, so callers pass the graph that owns `from` (or the top).
// Returns the number of references replaced. Graph outputs change names with
// this; passes that must keep them use outputNameKept first.
int replaceAllUsesWith(Graph &graph, Value *from, Value *to);

// Whether moving the uses of `from` to `to` keeps the model's output names:
// true when `from` is no output of the top-level graph, or when `to` is made
// by a node of the top-level graph and is no output itself (then `to` can
// take the name over). A null `to` stands for the output of a node about to
// be created in from's graph. The top-level outputs' names are the model's
// interface (run results, artifact manifests), so a rewrite that cannot keep
// them must not happen. Region outputs are matched by position: any value
// visible there may take their place.
bool outputNameKept(const Graph &top, const Value *from, const Value *to);
// replaceAllUsesWith(top, from, to) when outputNameKept holds, `to` taking
// from's name if `from` is a top-level output; else changes nothing.
// Returns whether it replaced.
bool replaceKeepingOutputName(Graph &top, Value *from, Value *to);

// False for ops whose result differs from run to run (random draws): they may
// be neither merged nor folded.
bool isDeterministic(OpKind op);

// ---- the pattern driver --------------------------------------------------------

class Rewriter;

struct Pattern {
  std::string_view name;
  // The op of the nodes the pattern is tried on; OpKind::NumOps: every node.
  OpKind root;
  bool (*apply)(Node &root, Rewriter &rw);
};

struct PatternSet {
  std::string_view name; // the pass name when the set is a pass
  std::vector<Pattern> patterns;
  // Legalizing sets (decompose) rewrite every node, even one whose results
  // nothing reads (at -O0 no DCE has run, and the backend compiles what is
  // there); optimizing sets leave dead nodes to dce.
  bool rewriteUnusedNodes = false;
};

class Rewriter {
public:
  explicit Rewriter(Graph &top);

  // Uses: node inputs in any graph (a node using a value twice counts twice)
  // plus graph outputs (regions' included).
  int numUses(const Value *v) const;
  bool hasOneUse(const Value *v) const { return numUses(v) == 1; }
  // An output of the top-level graph.
  bool isGraphOutput(const Value *v) const;
  // The nodes reading `v` (a node reading it twice is listed twice).
  std::vector<Node *> users(const Value *v) const;

  // A new node in `g`, appended (the driver re-sorts); its outputs are
  // unnamed until replace() hands them a name, and untyped: set them.
  Node *create(Graph &g, OpKind op, std::vector<Value *> inputs, std::string name = "",
               int numOutputs = 1);
  // Takes in a node a helper appended to `g` directly (one built with its
  // regions, such as a Fused node), as create() does for the nodes it makes.
  void track(Node &n);
  // A Constant node in `g` holding `t`, its output typed and named `name`.
  Value *constant(Graph &g, Tensor t, std::string name);
  void setInput(Node &n, int i, Value *v);

  // See outputNameKept; patterns ask before they change anything.
  bool canReplace(const Value *from, const Value *to = nullptr) const;
  // Moves every use of `from` to `to`. When `from` is a top-level output or
  // `to` has no name yet, `to` takes from's name. Returns false and changes
  // nothing when canReplace(from, to) does not hold.
  bool replace(Value *from, Value *to);

  // Erases `n` when none of its outputs is used, then the producers of its
  // inputs (and of outer values its regions read) that this leaves unused.
  void eraseIfDead(Node *n);
  // Erases, as eraseIfDead does, the producers of values that setInput and
  // replace took uses from; the driver calls it after every rewrite, so
  // patterns never clean up after themselves.
  void eraseDeadLeftovers();
  // Whether the node was erased since the last forgetErased().
  bool erased(const Node *n) const { return erased_.count(n) != 0; }
  void forgetErased() { erased_.clear(); }

private:
  struct Use {
    Node *node;   // the reading node, or null for a graph output
    Graph *graph; // for graph outputs: the graph
    int index;    // input or output position
  };
  void addUses(Graph &g);
  void addNodeUses(Node &n);
  // Drops the uses `n` (and its regions) make; collects the values read.
  void dropNodeUses(Node &n, std::vector<Value *> &read);
  void dropUse(Value *v, const Node *node, const Graph *graph, int index);

  Graph &top_;
  std::unordered_map<const Value *, std::vector<Use>> uses_;
  std::unordered_set<const Node *> erased_;
  std::vector<Node *> leftovers_; // producers that lost a use
};

// Runs `set` on every node of the model, regions included, in topological
// order, again and again until a sweep changes nothing (or a bound on sweeps
// is reached). Nodes whose outputs are all unused are skipped (dce's work);
// what a rewrite leaves unused is erased at once, so a dead remainder of one
// match can never match again. Graphs are re-sorted after each sweep that
// changed something. Returns whether anything changed.
Expected<bool> applyPatterns(Model &model, const PatternSet &set);

// A pass that runs one pattern set (which must outlive it); its name is the
// set's name.
std::unique_ptr<Pass> makePatternPass(const PatternSet &set);

} // namespace kiln
