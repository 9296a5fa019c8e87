// canonicalize: removes ops that do nothing and gives view ops one form.
//
// Before: a verified, topologically sorted model.
// After:  the same computation with
//           - no Identity, no inference-mode Dropout (training_mode absent or
//             false, mask unused), no Cast to the dtype it already has;
//           - no Reshape of a Reshape (when the outer target has no 0 that
//             would copy a dim), no Transpose of a Transpose (perms composed;
//             an identity perm removes the Transpose), no Squeeze/Unsqueeze
//             pair on the same constant axes, no Reshape to the same shape;
//           - no x+0, 0+x, x-0, x*1, 1*x, x/1, and no Expand, where the
//             constant provably leaves x's shape unchanged by broadcasting
//             (every dim of the constant is 1 or equal to x's static dim);
//           - no Concat of one input; Pow(x, 2) as Mul(x, x);
//           - Flatten, Squeeze, Unsqueeze and Reshape whose result shape is
//             static but for at most one dim become Reshape by a constant
//             target (the free dim as -1), so later stages see one view op
//             and shape-computing chains lose their last use.
//         The model's outputs keep their names: a removal that would rename
//         one (the replacement is a model input or another output) does not
//         happen; region outputs are positional and may become any visible
//         value. Nodes left unused are erased.
//
// Algorithm: the patterns below, run to a fixpoint by the pattern driver
// (rewrite.h):
//  1. Each pattern matches its root op and the constants it needs; the
//     removals replace the root's result by its input (Rewriter::replace,
//     which keeps output names or refuses).
//  2. Merges rewire the root to read the inner node's input (the inner node
//     dies with its last use); Transpose perms compose as
//     perm[i] = inner[outer[i]].
//  3. View ops are rebuilt as Reshape(x, constant) typed as the old result.
#include "passes/match.h"
#include "passes/rewrite.h"

#include <algorithm>
#include <numeric>

namespace kiln {
namespace {

bool forwardInput(Node &n, Rewriter &rw, int input = 0) {
  return rw.replace(n.output(0), n.input(input));
}

bool removeIdentity(Node &n, Rewriter &rw) {
  return forwardInput(n, rw);
}

bool removeInferenceDropout(Node &n, Rewriter &rw) {
  if (n.input(2) && !isSplat(n.input(2), 0)) return false; // training_mode: random
  if (n.output(1) && rw.numUses(n.output(1)) > 0) return false;
  return forwardInput(n, rw);
}

bool removeNoopCast(Node &n, Rewriter &rw) {
  const Type &in = n.input(0)->type();
  std::optional<DType> to = dtypeFromOnnx(static_cast<int>(n.getInt("to")));
  if (!in.isTensor() || !to || *to != in.dtype()) return false;
  return forwardInput(n, rw);
}

bool mergeReshapes(Node &n, Rewriter &rw) {
  Node *inner = producedBy(n.input(0), OpKind::Reshape);
  std::optional<std::vector<int64_t>> target = intsOf(n.input(1));
  if (!inner || !target) return false;
  // A 0 copies the dim of the input, which differs between the two inputs.
  if (n.getInt("allowzero") == 0 && std::count(target->begin(), target->end(), 0)) return false;
  rw.setInput(n, 0, inner->input(0));
  return true;
}

bool removeSameShapeReshape(Node &n, Rewriter &rw) {
  if (!sameShape(n.input(0)->type().shape(), n.output(0)->type().shape())) return false;
  return forwardInput(n, rw);
}

std::optional<std::vector<int64_t>> permOf(const Node &n) {
  std::optional<int64_t> rank = rankOf(n.input(0));
  if (!rank) return std::nullopt;
  std::vector<int64_t> perm = n.getInts("perm");
  if (!n.hasAttr("perm")) {
    perm.resize(*rank);
    std::iota(perm.rbegin(), perm.rend(), 0); // the default reverses the axes
  }
  if (static_cast<int64_t>(perm.size()) != *rank) return std::nullopt;
  return perm;
}

bool isIdentityPerm(const std::vector<int64_t> &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool simplifyTranspose(Node &n, Rewriter &rw) {
  std::optional<std::vector<int64_t>> perm = permOf(n);
  if (!perm) return false;
  if (isIdentityPerm(*perm)) return forwardInput(n, rw);
  Node *inner = producedBy(n.input(0), OpKind::Transpose);
  std::optional<std::vector<int64_t>> innerPerm = inner ? permOf(*inner) : std::nullopt;
  if (!innerPerm) return false;
  // Output axis i is inner's axis perm[i], which is x's axis inner[perm[i]].
  std::vector<int64_t> composed(perm->size());
  for (size_t i = 0; i < perm->size(); ++i) composed[i] = (*innerPerm)[(*perm)[i]];
  n.setAttr("perm", Attribute::ofInts(composed));
  rw.setInput(n, 0, inner->input(0));
  return true;
}

// Squeeze(Unsqueeze(x, a), a) and Unsqueeze(Squeeze(x, a), a) are x: the
// axes of both are positions in the larger of the two ranks.
bool cancelSqueezePair(Node &n, Rewriter &rw) {
  const bool squeeze = n.op() == OpKind::Squeeze;
  Node *inner = producedBy(n.input(0), squeeze ? OpKind::Unsqueeze : OpKind::Squeeze);
  if (!inner || !n.input(1) || !inner->input(1)) return false;
  Value *wide = squeeze ? n.input(0) : n.output(0);
  std::optional<int64_t> rank = rankOf(wide);
  if (!rank) return false;
  auto a = normalizedAxes(n.input(1), *rank), b = normalizedAxes(inner->input(1), *rank);
  if (!a || !b || *a != *b) return false;
  return rw.replace(n.output(0), inner->input(0));
}

// The neutral element of a binary op on the side `operand`, if it has one.
std::optional<double> neutral(OpKind op, int operand) {
  switch (op) {
  case OpKind::Add:
    return 0.0;
  case OpKind::Mul:
    return 1.0;
  case OpKind::Sub:
    return operand == 1 ? std::optional<double>(0.0) : std::nullopt;
  case OpKind::Div:
    return operand == 1 ? std::optional<double>(1.0) : std::nullopt;
  default:
    return std::nullopt;
  }
}

bool removeNeutralOperand(Node &n, Rewriter &rw) {
  for (int k = 0; k < 2; ++k) {
    Value *c = n.input(k), *x = n.input(1 - k);
    std::optional<double> e = neutral(n.op(), k);
    const Tensor *t = constantOf(c);
    if (!e || !t || !isSplat(c, *e) || !x->type().isTensor() || t->dtype() != x->type().dtype())
      continue;
    if (broadcastsInto(t->shape(), x->type().shape())) return forwardInput(n, rw, 1 - k);
  }
  return false;
}

// Pow(x, 2) = x * x, exactly (one rounding either way): pow is a libm call
// per element in generated code (8 ns), the product one vector op, and the
// decomposed LayerNorm's variance and the GELU's cube are written as Pow by
// the exporters. The exponent must be a constant splat whose shape does not
// widen x's.
bool squareAsMul(Node &n, Rewriter &rw) {
  Value *x = n.input(0), *e = n.input(1);
  const Tensor *t = constantOf(e);
  if (!t || !isSplat(e, 2.0) || !x->type().isTensor() || !isFloat(x->type().dtype()) ||
      !broadcastsInto(t->shape(), x->type().shape()) || !rw.canReplace(n.output(0)))
    return false;
  Node *m = rw.create(*n.owner(), OpKind::Mul, {x, x}, n.name());
  m->output(0)->setType(n.output(0)->type());
  return rw.replace(n.output(0), m->output(0));
}

bool removeNoopExpand(Node &n, Rewriter &rw) {
  std::optional<std::vector<int64_t>> shape = intsOf(n.input(1));
  if (!shape || !n.input(0)->type().isTensor()) return false;
  if (!broadcastsInto(*shape, n.input(0)->type().shape())) return false;
  return forwardInput(n, rw);
}

bool removeSingleConcat(Node &n, Rewriter &rw) {
  if (n.numInputs() != 1) return false;
  return forwardInput(n, rw);
}

// The Reshape target for a result shape with at most one dim not static.
std::optional<std::vector<int64_t>> reshapeTarget(const Shape &s) {
  if (!s.rankKnown) return std::nullopt;
  std::vector<int64_t> target;
  bool free = false;
  for (const Dim &d : s.dims) {
    if (d.isStatic() && d.value() > 0) {
      target.push_back(d.value());
    } else if (!d.isStatic() && !free) {
      free = true;
      target.push_back(-1);
    } else {
      return std::nullopt; // a second free dim, or a 0 that -1 cannot sit beside
    }
  }
  return target;
}

bool viewAsReshape(Node &n, Rewriter &rw) {
  if (n.op() == OpKind::Reshape && constantOf(n.input(1))) return false; // already canonical
  Value *out = n.output(0);
  if (!out->type().isTensor() || !rw.canReplace(out)) return false;
  std::optional<std::vector<int64_t>> target = reshapeTarget(out->type().shape());
  if (!target) return false;
  Graph &g = *n.owner();
  const int64_t rank = static_cast<int64_t>(target->size());
  Value *shape = rw.constant(g, Tensor::fromVector(*target, {rank}), out->name() + ".shape");
  Node *r = rw.create(g, OpKind::Reshape, {n.input(0), shape}, n.name());
  r->output(0)->setType(out->type());
  return rw.replace(out, r->output(0));
}

const PatternSet &canonicalizePatterns() {
  static const PatternSet set{
      "canonicalize",
      {
          {"remove-identity", OpKind::Identity, removeIdentity},
          {"remove-inference-dropout", OpKind::Dropout, removeInferenceDropout},
          {"remove-noop-cast", OpKind::Cast, removeNoopCast},
          {"merge-reshapes", OpKind::Reshape, mergeReshapes},
          {"remove-same-shape-reshape", OpKind::Reshape, removeSameShapeReshape},
          {"simplify-transpose", OpKind::Transpose, simplifyTranspose},
          {"cancel-squeeze-unsqueeze", OpKind::Squeeze, cancelSqueezePair},
          {"cancel-unsqueeze-squeeze", OpKind::Unsqueeze, cancelSqueezePair},
          {"remove-add-zero", OpKind::Add, removeNeutralOperand},
          {"remove-sub-zero", OpKind::Sub, removeNeutralOperand},
          {"remove-mul-one", OpKind::Mul, removeNeutralOperand},
          {"remove-div-one", OpKind::Div, removeNeutralOperand},
          {"square-as-mul", OpKind::Pow, squareAsMul},
          {"remove-noop-expand", OpKind::Expand, removeNoopExpand},
          {"remove-single-concat", OpKind::Concat, removeSingleConcat},
          {"flatten-as-reshape", OpKind::Flatten, viewAsReshape},
          {"squeeze-as-reshape", OpKind::Squeeze, viewAsReshape},
          {"unsqueeze-as-reshape", OpKind::Unsqueeze, viewAsReshape},
          {"reshape-by-constant", OpKind::Reshape, viewAsReshape},
      }};
  return set;
}

} // namespace

std::unique_ptr<Pass> createCanonicalizePass() {
  return makePatternPass(canonicalizePatterns());
}

} // namespace kiln
