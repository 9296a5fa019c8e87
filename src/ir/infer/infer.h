// Per-op type and shape inference. Every op has an inference function that
// sets the type of each output from the types of its inputs (and from the
// values of inputs produced by Constant nodes, e.g. a Reshape's target shape).
// Shapes stay symbolic where inputs are symbolic: Add of [batch,3] and [1,3]
// is [batch,3]; a dim that cannot be known is "?", a rank that cannot be
// known is "*".
//
// Each op family registers its functions in its own file (infer/*.cpp)
// through a register*Inference(InferTable&) function listed in infer.cpp.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

#include <array>
#include <optional>

namespace kiln {

class InferContext {
public:
  explicit InferContext(Node &node) : node_(node) {}

  const Node &node() const { return node_; }
  int numInputs() const { return node_.numInputs(); }
  int numOutputs() const { return node_.numOutputs(); }
  bool has(int i) const { return node_.input(i) != nullptr; }
  // The type of input i; an absent input reads as an f32 tensor of unknown
  // rank, so inference code never dereferences a missing value.
  const Type &inputType(int i) const;
  DType inputDType(int i) const { return inputType(i).dtype(); }
  const Shape &inputShape(int i) const { return inputType(i).shape(); }
  // The value of input i when a Constant node produces it, else null.
  const Tensor *constantInput(int i) const;
  // Constant input i as int64 values (for shapes, axes, pads...).
  std::optional<std::vector<int64_t>> constantInts(int i) const;

  void setOutput(int i, Type t) {
    if (Value *v = node_.output(i)) v->setType(std::move(t));
  }
  void setOutput(int i, DType d, Shape s) { setOutput(i, Type::tensor(d, std::move(s))); }

  template <class... Args> Error error(const Args &...args) const {
    return makeError(node_.describe(), ": ", args...);
  }

private:
  Node &node_;
};

using InferFn = Status (*)(InferContext &);

class InferTable {
public:
  void add(OpKind op, InferFn fn) { fns_[static_cast<size_t>(op)] = fn; }
  InferFn find(OpKind op) const { return fns_[static_cast<size_t>(op)]; }

private:
  std::array<InferFn, static_cast<size_t>(OpKind::NumOps)> fns_{};
};

const InferTable &inferTable();

// Infers the output types of one node. Ops without an inference function get
// outputs of unknown rank whose dtype is that of input 0 (or f32).
Status inferNode(Node &node);
// Infers every node of the graph in order (the graph must be topologically
// sorted). Regions are inferred by their parent op's inference function,
// which first sets the region input types.
Status inferGraph(Graph &graph);

// ---- helpers shared by inference functions ----------------------------------

// Numpy-style broadcast of symbolic shapes; error when two static dims clash.
Expected<Shape> broadcastShapes(const Shape &a, const Shape &b);
// Resolves a possibly negative axis against a rank; error when out of range.
Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank);
// Product of dims when all static.
std::optional<int64_t> staticNumel(const Shape &s);

} // namespace kiln
