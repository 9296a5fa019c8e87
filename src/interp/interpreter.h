// The reference interpreter: runs a Graph node by node with one plain kernel
// per op. It is the oracle every compiled path is checked against, so it
// favours obviously-right code over speed. Values are freed after their last
// use so that real models fit in memory.
#pragma once

#include "interp/kernel.h"
#include "support/value.h"
#include "ir/graph.h"
#include "support/status.h"

#include <functional>
#include <unordered_map>
#include <vector>

namespace kiln {

// The values of one graph's scope; regions chain to their enclosing scope.
class Environment {
public:
  explicit Environment(const Environment *parent = nullptr) : parent_(parent) {}
  const RtValue *lookup(const Value *v) const;
  void set(const Value *v, RtValue value) { values_[v] = std::move(value); }
  void erase(const Value *v) { values_.erase(v); }

private:
  const Environment *parent_;
  std::unordered_map<const Value *, RtValue> values_;
};

class Interpreter {
public:
  explicit Interpreter(InterpOptions options = {}) : options_(options) {}

  // Runs the top-level graph; inputs are in graph-input order. Checks each
  // input against the declared dtype and (static or symbolic) shape.
  Expected<std::vector<RtValue>> run(const Graph &graph, std::vector<RtValue> inputs);

  // Runs a region (an If branch, a Loop or Scan body) with the given inputs;
  // values defined outside the region are looked up in `outer`.
  Expected<std::vector<RtValue>> runRegion(const Graph &region, std::vector<RtValue> inputs,
                                           const Environment &outer);

  // Called after every node of the top-level graph with its outputs (used by
  // per-layer comparison). Region nodes are not reported.
  using Observer = std::function<void(const Node &, const std::vector<RtValue> &)>;
  void setObserver(Observer o) { observer_ = std::move(o); }

  const InterpOptions &options() const { return options_; }

private:
  Expected<std::vector<RtValue>> runGraph(const Graph &graph, std::vector<RtValue> inputs,
                                          const Environment *outer, bool topLevel);

  InterpOptions options_;
  Observer observer_;
};

// Checks a run-time input against a graph input's declared type: dtype, rank
// and every static dim, and that one symbol takes one value across inputs
// (`bindings` collects symbol -> size). The message names the input.
Status checkInputAgainstType(const Value &input, const RtValue &value,
                             std::unordered_map<std::string, int64_t> &bindings);

} // namespace kiln
