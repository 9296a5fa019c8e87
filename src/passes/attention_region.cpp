#include "passes/attention_region.h"

#include "passes/match.h"

namespace kiln {

Node *buildAttentionNode(Graph &g, const AttentionOperands &a, const std::string &name) {
  auto body = std::make_shared<Graph>(name + ".attention", &g);
  auto input = [&](Value *v, const char *what) {
    return v ? body->addInput(name + ".attention." + what, v->type()) : nullptr;
  };
  Value *q = input(a.q, "q"), *kt = input(a.kt, "kt"), *v = input(a.v, "v");
  Value *mask = input(a.mask, "mask");
  auto node = [&](OpKind op, std::vector<Value *> in, const char *what, const Type &type,
                  const std::string &nodeName = "") {
    const std::string valueName = name + ".attention." + what;
    Node *n = body->addNode(op, std::move(in), 1, nodeName);
    n->output(0)->setName(valueName);
    n->output(0)->setType(type);
    return n->output(0);
  };
  Tensor scale(DType::F32, {});
  scale.setDouble(0, a.scale);
  Value *c = node(OpKind::Constant, {}, "scale", Type::tensor(DType::F32, Shape::fromStatic({})));
  c->producer()->setAttr("value", Attribute::ofTensor(std::move(scale)));
  Value *s = node(OpKind::MatMul, {q, kt}, "scores", a.scores, a.scoresName);
  s = node(OpKind::Mul, {s, c}, "scaled", a.scores);
  if (mask) s = node(OpKind::Add, {s, mask}, "masked", a.probs);
  Value *p = node(OpKind::Softmax, {s}, "probs", a.probs, a.softmaxName);
  p->producer()->setAttr("axis", Attribute::ofInt(-1));
  body->setOutputs({node(OpKind::MatMul, {p, v}, "out", a.out, a.outName)});

  std::vector<Value *> inputs{a.q, a.kt, a.v};
  if (a.mask) inputs.push_back(a.mask);
  Node *fused = g.addNode(OpKind::Fused, inputs, 1, name);
  fused->setAttr("body", Attribute::ofGraph(std::move(body)));
  fused->setAttr("kind", Attribute::ofString(kAttentionKind));
  fused->output(0)->setType(a.out);
  return fused;
}

std::optional<AttentionForm> attentionFormOf(const Node &node) {
  if (node.op() != OpKind::Fused || node.getString("kind") != kAttentionKind) return std::nullopt;
  const Graph *body = node.getGraph("body");
  if (!body) return std::nullopt;
  const int numInputs = static_cast<int>(body->inputs().size());
  if ((numInputs != 3 && numInputs != 4) || node.numInputs() != numInputs ||
      body->outputs().size() != 1 || node.numOutputs() != 1)
    return std::nullopt;
  const std::vector<Value *> &in = body->inputs();
  // Walk back from the output: MatMul(p, v), Softmax, [Add(t, mask)], Mul(s, c), MatMul(q, kt).
  Node *out = producedBy(body->outputs()[0], OpKind::MatMul);
  if (!out || out->input(1) != in[2]) return std::nullopt;
  Node *softmax = producedBy(out->input(0), OpKind::Softmax);
  std::optional<int64_t> rank = softmax ? rankOf(softmax->input(0)) : std::nullopt;
  if (!rank || (softmax->getInt("axis") != -1 && softmax->getInt("axis") != *rank - 1))
    return std::nullopt;
  Value *t = softmax->input(0);
  AttentionForm form;
  form.hasMask = numInputs == 4;
  if (form.hasMask) {
    Node *add = producedBy(t, OpKind::Add);
    if (!add || add->input(1) != in[3]) return std::nullopt;
    t = add->input(0);
  }
  Node *mul = producedBy(t, OpKind::Mul);
  std::optional<double> scale = mul ? scalarOf(mul->input(1)) : std::nullopt;
  Node *scores = mul ? producedBy(mul->input(0), OpKind::MatMul) : nullptr;
  if (!scale || !scores || scores->input(0) != in[0] || scores->input(1) != in[1] ||
      body->nodes().size() != size_t(form.hasMask ? 6 : 5))
    return std::nullopt;
  form.scale = static_cast<float>(*scale);
  return form;
}

} // namespace kiln
