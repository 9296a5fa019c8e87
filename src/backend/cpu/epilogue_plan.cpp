#include "runtime/cpu/epilogue_plan.h"

#include "ir/graph.h"
#include "passes/fusion.h"

#include <limits>
#include <unordered_map>

namespace kiln::cpu {

namespace {

using kernels::EpilogueKind;
using kernels::EpilogueOp;

class Planner {
public:
  Planner(const Node &fused, int64_t channels, bool rowChannels)
      : fused_(fused), body_(*fused.getGraph("body")), channels_(channels), rows_(rowChannels) {
    plan_.channels = channels;
    for (size_t i = 0; i < body_.inputs().size(); ++i) inputIndex_[body_.inputs()[i]] = int(i);
  }

  Expected<EpiloguePlan> run();

private:
  const Tensor *constant(const Value *v) const {
    auto it = inputIndex_.find(v);
    return it == inputIndex_.end() ? nullptr : constantOf(fused_.input(it->second));
  }
  Expected<float> scalar(const Value *v, float absent) const {
    if (!v) return absent;
    const Tensor *t = constant(v);
    if (!t || t->numel() != 1 || t->dtype() != DType::F32) return Error{"bound is not a constant"};
    return t->data<float>()[0];
  }
  // Per-channel data of a constant: its own floats or a scalar expanded.
  Expected<const float *> perChannel(const Tensor &t) {
    if (t.dtype() != DType::F32) return Error{"constant is not f32"};
    if (t.numel() == channels_) return t.data<float>();
    if (t.numel() != 1) return Error{"constant is not per channel"};
    plan_.owned.emplace_back(static_cast<size_t>(channels_), t.data<float>()[0]);
    return plan_.owned.back().data();
  }
  Status push(EpilogueOp op) {
    if (plan_.epilogue.count == kernels::Epilogue::kMaxOps) return Error{"epilogue too long"};
    plan_.epilogue.push(op);
    return Status::success();
  }
  Status addNode(const std::vector<std::unique_ptr<Node>> &nodes, size_t &i, const Value *&v);

  const Node &fused_;
  const Graph &body_;
  int64_t channels_;
  bool rows_;
  std::unordered_map<const Value *, int> inputIndex_;
  EpiloguePlan plan_;
};

Status Planner::addNode(const std::vector<std::unique_ptr<Node>> &nodes, size_t &i,
                        const Value *&v) {
  const Node &n = *nodes[i];
  EpilogueOp op;
  switch (n.op()) {
  case OpKind::Relu: op.kind = EpilogueKind::kRelu; break;
  case OpKind::Tanh: op.kind = EpilogueKind::kTanh; break;
  case OpKind::Gelu: {
    const std::string approximate = n.getString("approximate");
    if (approximate != "none" && approximate != "tanh") return Error{"unknown Gelu approximation"};
    op.kind = approximate == "tanh" ? EpilogueKind::kGeluTanh : EpilogueKind::kGelu;
    break;
  }
  case OpKind::LeakyRelu:
    op.kind = EpilogueKind::kLeakyRelu;
    op.a = n.getFloat("alpha");
    break;
  case OpKind::HardSigmoid:
    op.kind = EpilogueKind::kHardSigmoid;
    op.a = n.getFloat("alpha");
    op.b = n.getFloat("beta");
    break;
  case OpKind::HardSwish:
    op.kind = EpilogueKind::kHardSwish;
    op.a = 1.0f / 6;
    op.b = 0.5f;
    break;
  case OpKind::Clip: {
    op.kind = EpilogueKind::kClip;
    KILN_ASSIGN_OR_RETURN(op.a, scalar(n.input(1), -std::numeric_limits<float>::infinity()));
    KILN_ASSIGN_OR_RETURN(op.b, scalar(n.input(2), std::numeric_limits<float>::infinity()));
    break;
  }
  case OpKind::Sigmoid: {
    // Sigmoid(v) followed by Mul(v, sigmoid) is SiLU.
    const Node *next = i + 1 < nodes.size() ? nodes[i + 1].get() : nullptr;
    const Value *s = n.output(0);
    if (next && next->op() == OpKind::Mul &&
        ((next->input(0) == v && next->input(1) == s) ||
         (next->input(0) == s && next->input(1) == v))) {
      op.kind = EpilogueKind::kSilu;
      ++i;
      v = next->output(0);
      return push(op);
    }
    op.kind = EpilogueKind::kSigmoid;
    break;
  }
  case OpKind::Add:
  case OpKind::Mul: {
    const Value *other = n.input(0) == v ? n.input(1) : n.input(0);
    if (const Tensor *c = constant(other)) {
      KILN_ASSIGN_OR_RETURN(op.data, perChannel(*c));
      if (n.op() == OpKind::Add)
        op.kind = rows_ ? EpilogueKind::kAddRowBias : EpilogueKind::kAddColBias;
      else
        op.kind = rows_ ? EpilogueKind::kMulRowScale : EpilogueKind::kMulColScale;
      break;
    }
    auto it = inputIndex_.find(other);
    if (n.op() != OpKind::Add || it == inputIndex_.end() || plan_.residualOp >= 0)
      return Error{"unsupported epilogue operand"};
    op.kind = EpilogueKind::kAddTensor;
    plan_.residualOp = plan_.epilogue.count;
    plan_.residualInput = it->second;
    break;
  }
  default:
    return makeError(n.describe(), " is not an epilogue op");
  }
  if (n.input(0) != v && !(n.op() == OpKind::Add || n.op() == OpKind::Mul))
    return Error{"epilogue node does not read the running value"};
  v = n.output(0);
  return push(op);
}

Expected<EpiloguePlan> Planner::run() {
  const auto &nodes = body_.nodes();
  if (nodes.empty() || body_.outputs().size() != 1)
    return Error{"fused region must have one output"};
  const Value *v = nodes[0]->output(0);
  for (size_t i = 1; i < nodes.size(); ++i) KILN_RETURN_IF_ERROR(addNode(nodes, i, v));
  if (body_.outputs()[0] != v) return Error{"fused region output is not the epilogue's end"};
  return std::move(plan_);
}

} // namespace

Expected<EpiloguePlan> planEpilogue(const Node &fused, int64_t channels, bool rowChannels) {
  if (fused.op() != OpKind::Fused || !fused.getGraph("body")) return Error{"not a fused node"};
  return Planner(fused, channels, rowChannels).run();
}

} // namespace kiln::cpu
