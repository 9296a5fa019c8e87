// recognize-attention: turns scaled dot-product attention, as torch exports
// it, into one Fused(kind = "attention") node (attention_region.h), which
// the CPU backend runs as one flash-style kernel (kernels/attention.h).
//
// Before: a verified, topologically sorted model.
// After:  every
//           s = MatMul(Q', K')             Q' = Q or Q * c1, K' = K or K * c2
//           t = s * c3 or s / c3 ...        any chain of scalings (or none)
//           u = t + mask or mask + t        optional
//           y = MatMul(Softmax(u, last axis), V)
//         with one-element constants c, f32 operands of known rank >= 2, an
//         f32 mask (it stays whatever subgraph made it: Cast/Sub/Mul of
//         attention_mask, a Trilu/Where causal mask, a constant; its shape
//         is broadcast at run time), and inner values nothing else reads,
//         is y = Fused attention(Q, K, V[, mask]) with scale
//         c1 * c2 * c3 ... The result keeps its name; the model stays sorted
//         and valid. The multi-head Reshape/Transpose around Q, K and V stay
//         as they are, so [B, H, S, D] and torch's 3-D [B*H, S, D] both match.
//
// Algorithm: one pattern on MatMul, run by the pattern driver:
//  1. input 0 is a Softmax over the last axis read only here (of x, or of
//     x minus its own row max, which is the same);
//  2. its input is an Add with a mask (either side) or the scaled scores;
//  3. the scaled scores are a chain of Mul/Div by one-element constants
//     over a MatMul, and Q and K may each be scaled the same way;
//  4. replace the root's result with a new Fused attention node; the
//     driver erases the old chain.
// A MatMul inside an attention region is never a root (it would nest).
#include "passes/attention_region.h"
#include "passes/match.h"
#include "passes/rewrite.h"

namespace kiln {
namespace {

bool isF32Matrix(const Value *v) {
  std::optional<int64_t> rank = rankOf(v);
  return v && v->type().isTensor() && v->type().dtype() == DType::F32 && rank && *rank >= 2;
}

// Peels Mul/Div by one-element constants off `v` while the value peeled is
// read only by the next node of the chain (so the scaling node dies with
// the chain); multiplies their factors into `scale`. Returns the innermost
// value.
Value *peelScaling(Value *v, double &scale, const Rewriter &rw) {
  while (rw.hasOneUse(v) && isF32Matrix(v)) {
    Node *n = v->producer();
    if (!n || n->numOutputs() != 1) break;
    const std::optional<int64_t> rank = rankOf(v);
    // A one-element constant whose rank does not grow v's.
    auto scalar = [&](const Value *c) -> std::optional<double> {
      const std::optional<int64_t> r = rankOf(c);
      return r && *r <= *rank ? scalarOf(c) : std::nullopt;
    };
    Value *inner = nullptr;
    double factor = 1;
    if (n->op() == OpKind::Mul) {
      for (int k = 0; k < 2 && !inner; ++k)
        if (std::optional<double> c = scalar(n->input(1 - k))) inner = n->input(k), factor = *c;
    } else if (n->op() == OpKind::Div) {
      std::optional<double> c = scalar(n->input(1));
      if (c && *c != 0) inner = n->input(0), factor = 1 / *c;
    }
    if (!inner || !isF32Matrix(inner)) break;
    scale *= factor;
    v = inner;
  }
  return v;
}

// Whether `mask` can be the additive mask: an f32 tensor. Its shape need
// not be known: the step broadcasts it at run time, batch dims either way
// and its last two against (Sq, Sk), growing a one-row Q or one-column K^T
// the way the unfused Add would grow the scores.
bool maskFits(const Value *mask) {
  return mask->type().isTensor() && mask->type().dtype() == DType::F32;
}

// x without a subtraction of its own row max: torchaudio's attention
// computes Softmax(x - ReduceMax(x, last axis)), which is Softmax(x) (the
// Softmax subtracts the max again, then of a row already shifted to 0).
// Null when x is not that, or the max is read elsewhere.
Value *withoutRowMax(Value *x, int64_t rank, const Rewriter &rw) {
  Node *sub = producedBy(x, OpKind::Sub);
  Node *max = sub ? producedBy(sub->input(1), OpKind::ReduceMax) : nullptr;
  if (!max || max->input(0) != sub->input(0) || max->getInt("keepdims") != 1 || !max->input(1) ||
      !rw.hasOneUse(sub->input(1)) || rw.numUses(sub->input(0)) != 2)
    return nullptr;
  std::optional<std::vector<int64_t>> axes = normalizedAxes(max->input(1), rank);
  if (!axes || *axes != std::vector<int64_t>{rank - 1}) return nullptr;
  return sub->input(0);
}

// The scores MatMul under `t` (scaled or not), filling q, kt and the scale.
Node *matchScores(Value *t, AttentionOperands &a, const Rewriter &rw) {
  a.scale = 1;
  Value *s = peelScaling(t, a.scale, rw);
  Node *mm = producedBy(s, OpKind::MatMul);
  if (!mm || (s != t && !rw.hasOneUse(s))) return nullptr;
  a.q = mm->input(0);
  a.kt = mm->input(1);
  // A scaling of Q or K read by the MatMul alone folds in too.
  a.q = peelScaling(a.q, a.scale, rw);
  a.kt = peelScaling(a.kt, a.scale, rw);
  a.scores = s->type();
  a.scoresName = mm->name();
  return mm;
}

bool insideAttentionRegion(const Node &n) {
  const Graph *g = n.owner();
  if (!g || !g->parent()) return false;
  for (const auto &p : g->parent()->nodes())
    if (p->op() == OpKind::Fused && p->getGraph("body") == g)
      return p->getString("kind") == kAttentionKind;
  return false;
}

bool recognizeAttention(Node &root, Rewriter &rw) {
  Value *probs = root.input(0);
  Node *softmax = producedBy(probs, OpKind::Softmax);
  if (!softmax || !rw.hasOneUse(probs) || insideAttentionRegion(root)) return false;
  Value *x = softmax->input(0);
  std::optional<int64_t> rank = rankOf(x);
  const int64_t axis = softmax->getInt("axis");
  if (!rank || (axis != -1 && axis != *rank - 1) || !rw.hasOneUse(x)) return false;
  if (Value *unshifted = withoutRowMax(x, *rank, rw))
    x = unshifted; // read by the dying Sub and max

  AttentionOperands a;
  a.v = root.input(1);
  a.out = root.output(0)->type();
  Node *scores = nullptr;
  Node *add = producedBy(x, OpKind::Add);
  for (int k = 0; add && k < 2 && !scores; ++k) {
    Value *t = add->input(k);
    if (!rw.hasOneUse(t) || !maskFits(add->input(1 - k))) continue;
    scores = matchScores(t, a, rw);
    a.mask = add->input(1 - k);
  }
  if (!scores) {
    a.mask = nullptr;
    scores = matchScores(x, a, rw);
  }
  if (!scores) return false;
  a.probs = x->type();
  a.softmaxName = softmax->name();
  a.outName = root.name();
  for (const Value *v : {a.q, a.kt, a.v, root.output(0)})
    if (!isF32Matrix(v)) return false;
  if (!rw.canReplace(root.output(0))) return false;

  Graph &g = *root.owner();
  Node *fused =
      buildAttentionNode(g, a, root.name().empty() ? root.output(0)->name() : root.name());
  rw.track(*fused);
  return rw.replace(root.output(0), fused->output(0));
}

const PatternSet &recognizeAttentionPatterns() {
  static const PatternSet set{"recognize-attention",
                              {{"attention", OpKind::MatMul, recognizeAttention}}};
  return set;
}

} // namespace

std::unique_ptr<Pass> createRecognizeAttentionPass() {
  return makePatternPass(recognizeAttentionPatterns());
}

} // namespace kiln
