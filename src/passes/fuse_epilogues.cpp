// fuse-epilogues: gives Conv and MatMul the elementwise work that follows
// them, as Fused(kind = "conv" | "matmul") nodes whose region is the
// producer followed by its epilogue. The CPU backend applies the epilogue
// to each output tile while it is still in cache (kernels/epilogue.h), so
// the activation never makes a second pass over memory.
//
// Before: a verified, topologically sorted model.
// After:  each Conv (constant weights, f32, 1-D or 2-D) and MatMul
//         (constant 2-D right-hand side, f32) that is followed by at least
//         one epilogue node is a Fused node; names of the values read
//         outside are kept.
//
// Algorithm: starting from the producer's output v, repeatedly absorb the
// single consumer of v (v must have no other reader) when it is
//   - Add/Mul of v and a constant that varies at most along the channel
//     (conv: [K,1,1], [1,K,1,1], [K,1] or a scalar; matmul: [N] or [1,N]),
//   - Relu, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, or Clip with
//     constant bounds,
//   - Add of v and another tensor of exactly v's shape (a residual),
// or when v has exactly two readers Sigmoid(v) = s and Mul(v, s): SiLU.
// The epilogue stops at the first node that is none of these.
#include "passes/fusion.h"
#include "passes/pass.h"

namespace kiln {
namespace {

using fusion::UseInfo;

bool isF32(const Value *v) { return v && v->type().isTensor() && v->type().dtype() == DType::F32; }

bool sameStaticShape(const Shape &a, const Shape &b) {
  if (!a.rankKnown || !b.rankKnown || a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (a.dims[i].isUnknown() || !(a.dims[i] == b.dims[i])) return false;
  return true;
}

// A constant that broadcasts along v's channel dim only (conv: dim 1,
// matmul: the last dim), or a scalar.
bool isChannelConstant(const Value *c, const Value *v, bool conv) {
  const Tensor *t = constantOf(c);
  if (!t || t->dtype() != DType::F32) return false;
  if (t->numel() == 1) return true;
  const Shape &s = v->type().shape();
  if (!s.rankKnown) return false;
  const int rank = s.rank();
  const int channelDim = conv ? 1 : rank - 1;
  const Dim &channels = s.dims[channelDim];
  if (!channels.isStatic() || t->numel() != channels.value()) return false;
  // Right-aligned: the constant's dims line up with v's trailing dims.
  const int offset = rank - static_cast<int>(t->rank());
  if (offset < 0) return false;
  for (int i = 0; i < t->rank(); ++i)
    if (t->dim(i) != 1 && i + offset != channelDim) return false;
  return true;
}

bool isActivation(const Node &n) {
  switch (n.op()) {
  case OpKind::Relu: case OpKind::LeakyRelu: case OpKind::Sigmoid: case OpKind::Tanh:
  case OpKind::HardSigmoid: case OpKind::HardSwish: case OpKind::Gelu:
    return true;
  case OpKind::Clip:
    return (!n.input(1) || constantOf(n.input(1))) &&
           (!n.input(2) || constantOf(n.input(2)));
  default:
    return false;
  }
}

// The nodes of v's epilogue (step list of the header), in order.
std::vector<Node *> epilogueOf(Value *v, const UseInfo &uses, bool conv) {
  std::vector<Node *> chain;
  for (;;) {
    if (uses.escapes(v)) break;
    const std::vector<Node *> &users = uses.users(v);
    if (users.size() == 2) { // SiLU: Sigmoid(v) and Mul(v, sigmoid)
      Node *sig = users[0]->op() == OpKind::Sigmoid ? users[0] : users[1];
      Node *mul = sig == users[0] ? users[1] : users[0];
      if (sig->op() != OpKind::Sigmoid || mul->op() != OpKind::Mul) break;
      Value *s = sig->output(0);
      if (!uses.hasSingleUse(s) || uses.users(s)[0] != mul) break;
      if (!((mul->input(0) == v && mul->input(1) == s) || (mul->input(0) == s && mul->input(1) == v)))
        break;
      chain.push_back(sig);
      chain.push_back(mul);
      v = mul->output(0);
      continue;
    }
    if (users.size() != 1) break;
    Node *u = users[0];
    int uses_of_v = 0;
    for (Value *in : u->inputs()) uses_of_v += in == v;
    if (uses_of_v != 1 || !isF32(u->output(0))) break;
    bool ok = false;
    if (isActivation(*u) && u->input(0) == v) {
      ok = true;
    } else if (u->op() == OpKind::Add || u->op() == OpKind::Mul) {
      Value *other = u->input(0) == v ? u->input(1) : u->input(0);
      if (isChannelConstant(other, v, conv)) ok = true;
      else if (u->op() == OpKind::Add && isF32(other) &&
               sameStaticShape(other->type().shape(), v->type().shape()) &&
               sameStaticShape(u->output(0)->type().shape(), v->type().shape()))
        ok = true;
    }
    if (!ok) break;
    chain.push_back(u);
    v = u->output(0);
  }
  return chain;
}

bool isFusableProducer(const Node &n) {
  if (n.op() == OpKind::Conv) {
    const Value *x = n.input(0);
    return isF32(x) && isF32(n.output(0)) && constantOf(n.input(1)) &&
           (!n.input(2) || constantOf(n.input(2))) && x->type().shape().rankKnown &&
           (x->type().shape().rank() == 3 || x->type().shape().rank() == 4);
  }
  if (n.op() == OpKind::MatMul) {
    const Tensor *w = constantOf(n.input(1));
    return isF32(n.input(0)) && w && w->rank() == 2 && w->dtype() == DType::F32;
  }
  return false;
}

class FuseEpiloguesPass : public Pass {
public:
  std::string_view name() const override { return "fuse-epilogues"; }
  Expected<bool> run(Model &model) override {
    bool changed = false;
    for (Graph *g : fusion::graphsToFuse(*model.graph)) {
      std::vector<Node *> producers;
      for (auto &n : g->nodes())
        if (isFusableProducer(*n)) producers.push_back(n.get());
      for (Node *p : producers) {
        UseInfo uses(*g); // rebuilt: the previous fusion changed the graph
        const bool conv = p->op() == OpKind::Conv;
        std::vector<Node *> chain = epilogueOf(p->output(0), uses, conv);
        if (chain.empty()) continue;
        chain.insert(chain.begin(), p);
        fusion::fuseNodes(*g, chain, conv ? "conv" : "matmul");
        changed = true;
      }
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createFuseEpiloguesPass() { return std::make_unique<FuseEpiloguesPass>(); }

} // namespace kiln
