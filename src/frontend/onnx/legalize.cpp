#include "frontend/onnx/legalize.h"

#include "frontend/onnx/legalize_rules.h"
#include "ir/infer/infer.h"

#include <unordered_map>

namespace kiln::onnx_import {

std::optional<Attribute> NodeDraft::take(const std::string &a) {
  auto it = attrs.find(a);
  if (it == attrs.end()) return std::nullopt;
  Attribute out = std::move(it->second);
  attrs.erase(it);
  return out;
}

namespace {

// ONNX writes some float attributes as ints and vice versa in hand-made
// models; accept the lossless direction only.
bool coerceAttr(Attribute &a, AttrKind want) {
  if (a.kind == want) return true;
  if (want == AttrKind::Float && a.kind == AttrKind::Int) {
    a.f = static_cast<float>(a.i);
    a.kind = AttrKind::Float;
    return true;
  }
  if (want == AttrKind::Floats && a.kind == AttrKind::Ints) {
    a.floats.assign(a.ints.begin(), a.ints.end());
    a.kind = AttrKind::Floats;
    return true;
  }
  // An empty list arrives without a kind we can tell apart.
  if ((want == AttrKind::Ints || want == AttrKind::Floats || want == AttrKind::Strings) &&
      (a.kind == AttrKind::Ints || a.kind == AttrKind::Floats || a.kind == AttrKind::Strings) &&
      a.ints.empty() && a.floats.empty() && a.strings.empty()) {
    a.kind = want;
    return true;
  }
  return false;
}

} // namespace

Expected<Node *> GraphBuilder::emit(OpKind op, std::vector<Value *> inputs,
                                    std::map<std::string, Attribute> attrs, int numOutputs,
                                    const std::string &name) {
  const OpSchema &schema = opSchema(op);
  std::string where = "node '" + name + "' (" + std::string(schema.name) + ")";
  // Trailing absent inputs carry no meaning; drop them so arity checks hold.
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
  int nin = static_cast<int>(inputs.size());
  if (nin < schema.minInputs || (schema.maxInputs >= 0 && nin > schema.maxInputs))
    return makeError(where, ": has ", nin, " inputs, the op takes ", schema.minInputs, " to ",
                     schema.maxInputs < 0 ? std::string("any number") : std::to_string(schema.maxInputs));
  // Inputs below minInputs are required (Loop's optional trip count and
  // condition are filled in by its legalization rule before this point).
  for (int i = 0; i < std::min(nin, schema.minInputs); ++i)
    if (!inputs[i]) return makeError(where, ": required input ", i, " is missing");
  if (numOutputs < schema.minOutputs || (schema.maxOutputs >= 0 && numOutputs > schema.maxOutputs))
    return makeError(where, ": has ", numOutputs, " outputs, the op gives ", schema.minOutputs,
                     " to ", schema.maxOutputs);
  for (auto &[attrName, attr] : attrs) {
    const AttrSpec *spec = schema.findAttr(attrName);
    if (!spec) return makeError(where, ": attribute '", attrName, "' is not supported");
    if (!coerceAttr(attr, spec->kind))
      return makeError(where, ": attribute '", attrName, "' should be of kind ",
                       attrKindName(spec->kind), ", got ", attrKindName(attr.kind));
  }
  for (const AttrSpec &spec : schema.attrs)
    if (spec.required && !attrs.count(spec.name))
      return makeError(where, ": required attribute '", spec.name, "' is missing");
  Node *n = graph_.addNode(op, std::move(inputs), numOutputs, name);
  for (auto &[attrName, attr] : attrs) n->setAttr(attrName, std::move(attr));
  // Types are inferred as nodes are made, so later legalizers can look at
  // their inputs' ranks and dtypes.
  KILN_RETURN_IF_ERROR(inferNode(*n));
  return n;
}

Value *GraphBuilder::constant(Tensor t, const std::string &nameHint) {
  Node *n = graph_.addNode(OpKind::Constant, {}, 1, nameHint);
  n->output(0)->setName(nameHint);
  n->output(0)->setType(Type::tensor(t.dtype(), Shape::fromStatic(t.shape())));
  n->setAttr("value", Attribute::ofTensor(std::move(t)));
  return n->output(0);
}

Value *GraphBuilder::constantInts(const std::vector<int64_t> &v, const std::string &nameHint) {
  return constant(Tensor::fromVector(v, {static_cast<int64_t>(v.size())}), nameHint);
}

Expected<std::vector<Value *>> legalizeDirect(NodeDraft &d, GraphBuilder &b) {
  auto op = opFromName(d.opType);
  if (!op || isCompilerOp(*op)) return makeError("node '", d.name, "': op ", d.opType, " is not supported");
  KILN_ASSIGN_OR_RETURN(Node * n, b.emit(*op, d.inputs, std::move(d.attrs), d.numOutputs, d.name));
  return n->outputs();
}

Legalizer findLegalizer(const std::string &opType) {
  static const auto *table = [] {
    auto *m = new std::unordered_map<std::string, Legalizer>();
    registerOpsetRules(*m);
    return m;
  }();
  auto it = table->find(opType);
  return it == table->end() ? nullptr : it->second;
}

bool isSupportedOnnxOp(const std::string &domain, const std::string &opType) {
  if (!domain.empty() && domain != "ai.onnx") return false;
  auto op = opFromName(opType);
  return (op && !isCompilerOp(*op)) || findLegalizer(opType) != nullptr;
}

} // namespace kiln::onnx_import
