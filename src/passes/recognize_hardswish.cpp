// recognize-hardswish: turns a decomposed HardSwish back into one op.
//
// Before: a verified, topologically sorted model.
// After:  every product (a tree of Mul, and Div by one-element constants)
//         whose inner values nothing else reads and that equals
//           x * HardSigmoid(x) {alpha ~ 1/6, beta ~ 0.5}    or
//           x * Clip(x + 3, 0, 6) / 6  (also * (1/6), any order)
//         is HardSwish(x). Paddle's hardsigmoid (alpha 0.2) is a different
//         function and stays; so does x * HardSigmoid(y), the squeeze-and-
//         excitation gate, whose operands differ. Constants must have one
//         element, x's dtype and a rank not above x's, so the result has x's
//         shape. The result keeps its name; the model stays sorted and valid.
//
// Algorithm: one pattern on Mul and Div, run by the pattern driver:
//  1. Flatten the root's product (productOf): two factors.
//  2. Take either factor as x; with a constant of ~1, the other must be
//     HardSigmoid(x) with hardswish's alpha and beta; with ~1/6, it must be
//     Clip(Add(x, 3), 0, 6); read only here.
//  3. Replace the root's result with HardSwish(x).
#include "passes/match.h"
#include "passes/rewrite.h"

namespace kiln {
namespace {

bool isHardSigmoidOf(Value *h, Value *x, const Rewriter &rw) {
  Node *n = producedBy(h, OpKind::HardSigmoid);
  return n && rw.hasOneUse(h) && n->input(0) == x && near(n->getFloat("alpha"), 1.0 / 6) &&
         near(n->getFloat("beta"), 0.5);
}

bool isRelu6OfXPlus3(Value *c, Value *x, const Rewriter &rw) {
  Node *clip = producedBy(c, OpKind::Clip);
  if (!clip || !rw.hasOneUse(c) || !isScalarFor(clip->input(1), x, 0) ||
      !isScalarFor(clip->input(2), x, 6))
    return false;
  Value *a = clip->input(0);
  Node *add = producedBy(a, OpKind::Add);
  if (!add || !rw.hasOneUse(a)) return false;
  for (int k = 0; k < 2; ++k)
    if (add->input(k) == x && isScalarFor(add->input(1 - k), x, 3)) return true;
  return false;
}

bool recognizeHardSwish(Node &root, Rewriter &rw) {
  Value *out = root.output(0);
  Product p = productOf(out, rw);
  if (p.factors.size() != 2 || !rw.canReplace(out)) return false;
  for (int k = 0; k < 2; ++k) {
    Value *x = p.factors[k], *g = p.factors[1 - k];
    if (!x->type().isTensor() || !isFloat(x->type().dtype()) || !constantsBroadcastInto(p, x))
      continue;
    bool matched = (near(p.constant, 1) && isHardSigmoidOf(g, x, rw)) ||
                   (near(p.constant, 1.0 / 6) && isRelu6OfXPlus3(g, x, rw));
    if (!matched) continue;
    Node *hs = rw.create(*root.owner(), OpKind::HardSwish, {x}, root.name());
    hs->output(0)->setType(out->type());
    return rw.replace(out, hs->output(0));
  }
  return false;
}

const PatternSet &recognizeHardSwishPatterns() {
  static const PatternSet set{"recognize-hardswish",
                              {
                                  {"hardswish-from-mul", OpKind::Mul, recognizeHardSwish},
                                  {"hardswish-from-div", OpKind::Div, recognizeHardSwish},
                              }};
  return set;
}

} // namespace

std::unique_ptr<Pass> createRecognizeHardSwishPass() {
  return makePatternPass(recognizeHardSwishPatterns());
}

} // namespace kiln
