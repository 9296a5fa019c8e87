// The Graph IR: a graph owns values and nodes; a node has an op, named
// attributes, and input and output values; some attributes hold regions
// (graphs nested in If/Loop/Scan bodies) that may read values of the
// enclosing graphs. Values are owned by the graph that defines them and are
// referred to by pointer; a missing optional input is a null pointer.
//
// Nodes are kept in a list that passes may reorder; sortTopologically() gives
// the order every consumer (interpreter, printer) relies on, and the verifier
// checks it.
#pragma once

#include "ir/op.h"
#include "support/tensor.h"
#include "ir/type.h"
#include "support/status.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class Graph;
class Node;

struct Attribute {
  AttrKind kind = AttrKind::Int;
  int64_t i = 0;
  float f = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  Type type;

  static Attribute ofInt(int64_t v);
  static Attribute ofFloat(float v);
  static Attribute ofString(std::string v);
  static Attribute ofTensor(Tensor v);
  static Attribute ofGraph(std::shared_ptr<Graph> v);
  static Attribute ofInts(std::vector<int64_t> v);
  static Attribute ofFloats(std::vector<float> v);
  static Attribute ofStrings(std::vector<std::string> v);
  static Attribute ofType(Type v);
};

class Value {
public:
  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  const Type &type() const { return type_; }
  void setType(Type t) { type_ = std::move(t); }
  Node *producer() const { return producer_; }
  int producerIndex() const { return producerIndex_; }
  Graph *owner() const { return owner_; }

private:
  friend class Graph;
  friend class Node;
  std::string name_;
  Type type_;
  Node *producer_ = nullptr; // null for graph inputs
  int producerIndex_ = -1;
  Graph *owner_ = nullptr;
};

class Node {
public:
  OpKind op() const { return op_; }
  const OpSchema &schema() const { return opSchema(op_); }
  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  Graph *owner() const { return owner_; }

  const std::vector<Value *> &inputs() const { return inputs_; }
  const std::vector<Value *> &outputs() const { return outputs_; }
  int numInputs() const { return static_cast<int>(inputs_.size()); }
  int numOutputs() const { return static_cast<int>(outputs_.size()); }
  // Null when absent (optional input left out or index past the end).
  Value *input(int i) const { return i < numInputs() ? inputs_[i] : nullptr; }
  Value *output(int i) const { return i < numOutputs() ? outputs_[i] : nullptr; }
  void setInput(int i, Value *v);
  void addInput(Value *v) { inputs_.push_back(v); }

  // Attributes, sorted by name so printing is deterministic.
  const std::map<std::string, Attribute> &attrs() const { return attrs_; }
  bool hasAttr(const std::string &n) const { return attrs_.count(n) != 0; }
  const Attribute *attr(const std::string &n) const;
  void setAttr(const std::string &n, Attribute a) { attrs_[n] = std::move(a); }
  void removeAttr(const std::string &n) { attrs_.erase(n); }

  // Typed accessors that fall back to the op table's default. Asking for an
  // attribute that is absent and has no default is a programming error in
  // kernels: use hasAttr first for optional ones.
  int64_t getInt(const std::string &n) const;
  float getFloat(const std::string &n) const;
  std::string getString(const std::string &n) const;
  std::vector<int64_t> getInts(const std::string &n) const; // empty when absent
  std::vector<float> getFloats(const std::string &n) const;
  std::vector<std::string> getStrings(const std::string &n) const;
  const Tensor &getTensor(const std::string &n) const;
  Graph *getGraph(const std::string &n) const;

  // Regions held by attributes, in attribute-name order.
  std::vector<Graph *> regions() const;

  // "node 'conv1' (Conv)" for error messages.
  std::string describe() const;

private:
  friend class Graph;
  OpKind op_ = OpKind::Identity;
  std::string name_;
  std::vector<Value *> inputs_;
  std::vector<Value *> outputs_;
  std::map<std::string, Attribute> attrs_;
  Graph *owner_ = nullptr;
};

class Graph {
public:
  explicit Graph(std::string name = "main", Graph *parent = nullptr)
      : name_(std::move(name)), parent_(parent) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  // The enclosing graph for regions; null for the top level.
  Graph *parent() const { return parent_; }
  void setParent(Graph *p) { parent_ = p; }

  Value *addInput(std::string name, Type type);
  // Creates a node with fresh output values; outputs are named by the caller.
  Node *addNode(OpKind op, std::vector<Value *> inputs, int numOutputs, std::string name = "");
  void addOutput(Value *v) { outputs_.push_back(v); }
  void setOutputs(std::vector<Value *> outs) { outputs_ = std::move(outs); }
  // Removes a node whose outputs are unused (the caller ensures it).
  void eraseNode(Node *n);

  const std::vector<Value *> &inputs() const { return inputs_; }
  const std::vector<Value *> &outputs() const { return outputs_; }
  const std::vector<std::unique_ptr<Node>> &nodes() const { return nodes_; }
  size_t numValues() const { return values_.size(); }

  // Orders nodes so that each comes after the producers of its inputs
  // (including values its regions read from this graph). Fails on a cycle,
  // naming a node on it.
  Status sortTopologically();

  // Calls f on this graph and every region below it, outer first.
  template <class F> void walk(F &&f) {
    f(*this);
    for (auto &n : nodes_)
      for (Graph *r : n->regions()) r->walk(f);
  }

private:
  Value *newValue(Node *producer, int index);

  std::string name_;
  Graph *parent_;
  std::vector<Value *> inputs_;
  std::vector<Value *> outputs_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
};

// A whole model: the top-level graph plus what the source file said about it.
// The tensor of the Constant node that makes `v`, else null (also for a
// null `v`).
const Tensor *constantOf(const Value *v);

struct Model {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  std::string producer;                // e.g. "pytorch 2.1"
  std::map<std::string, int64_t> opsets; // domain ("" = ai.onnx) -> version
};

} // namespace kiln
