// Legalization: turning one ONNX node (at the model's opset) into kiln
// nodes in the one canonical form of ir/ops/*.def. Most ops map one to one;
// the legalizers registered here handle what changed between opsets 7 and 23
// (attributes that became inputs, renamed or retired ops, changed semantics).
//
// A legalizer receives the node as a draft (ONNX op type, inputs already
// resolved to kiln values, attributes converted) and emits kiln nodes through
// a GraphBuilder; it returns the values that stand for the ONNX node's
// outputs.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::onnx_import {

struct NodeDraft {
  std::string opType;
  std::string domain;
  std::string name;
  int64_t opset = 0; // version of the node's domain in the model
  std::vector<Value *> inputs;
  std::map<std::string, Attribute> attrs;
  int numOutputs = 0;

  Value *input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  bool has(const std::string &a) const { return attrs.count(a) != 0; }
  // Removes and returns an attribute (null when absent).
  std::optional<Attribute> take(const std::string &a);
};

class GraphBuilder {
public:
  explicit GraphBuilder(Graph &g) : graph_(g) {}
  Graph &graph() { return graph_; }

  // Emits a node with the given attributes; checks arity and attributes
  // against the op table so that legalizers cannot produce invalid IR.
  Expected<Node *> emit(OpKind op, std::vector<Value *> inputs,
                        std::map<std::string, Attribute> attrs, int numOutputs,
                        const std::string &name);
  // A Constant node holding `t`, named after `nameHint`.
  Value *constant(Tensor t, const std::string &nameHint);
  Value *constantInts(const std::vector<int64_t> &v, const std::string &nameHint);

private:
  Graph &graph_;
};

using Legalizer = Expected<std::vector<Value *>> (*)(NodeDraft &, GraphBuilder &);

// The legalizer for an ONNX op type (domain ""), or null for the default
// one-to-one mapping.
Legalizer findLegalizer(const std::string &opType);

// The default: same op name, attributes as they are, outputs one to one.
Expected<std::vector<Value *>> legalizeDirect(NodeDraft &draft, GraphBuilder &b);

// Whether an ONNX op type at this opset can be imported (used to list every
// unsupported op at once before importing anything).
bool isSupportedOnnxOp(const std::string &domain, const std::string &opType);

} // namespace kiln::onnx_import
