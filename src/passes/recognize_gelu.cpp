// recognize-gelu: turns a decomposed GELU back into one Gelu op.
//
// Before: a verified, topologically sorted model.
// After:  every product (a tree of Mul, and Div by one-element constants)
//         that equals, with the tree's inner values read by nothing else,
//           0.5 * x * (1 + Erf(x * c))               c ~ 1/sqrt(2) (or / sqrt(2))
//         is Gelu(x); and every one that equals
//           0.5 * x * (1 + Tanh(k * (x + a * x^3)))  k ~ sqrt(2/pi), a ~ 0.044715
//         (x^3 as Pow(x, 3) or as products of x) is Gelu(x) {approximate =
//         "tanh"}. The factors may come in any order and grouping, which
//         covers what PyTorch, TensorFlow and Paddle export. Constants
//         must have one element, x's dtype (a float one) and a rank not above
//         x's, so the result has x's shape; "~" is within the precision of
//         x's dtype (an f16 model's 1/sqrt(2) is 1e-4 off). The result keeps its name; the
//         decomposition is erased; the model stays sorted and valid.
//
// Algorithm: one pattern on Mul and Div (the possible roots of the product),
// run by the pattern driver:
//  1. Flatten the root's product (productOf): two factors and 0.5.
//  2. Take either factor as x; the other must be Add(1, Erf(z)) or
//     Add(1, Tanh(u)), read only here.
//  3. Erf: z's product is x times ~1/sqrt(2). Tanh: u's product is one
//     factor times ~sqrt(2/pi), that factor is Add(x, q), and q's product is
//     x^3 times ~0.044715.
//  4. Replace the root's result with Gelu(x).
#include "passes/match.h"
#include "passes/rewrite.h"

#include <algorithm>
#include <cmath>

namespace kiln {
namespace {

// The operand of `a` = Add(v, c) or Add(c, v) where c is a constant ~ `c`
// that does not broadcast x up.
Value *addendOf(Value *a, double c, const Value *x, const Rewriter &rw) {
  Node *add = producedBy(a, OpKind::Add);
  if (!add || !rw.hasOneUse(a)) return nullptr;
  for (int k = 0; k < 2; ++k)
    if (isScalarFor(add->input(k), x, c)) return add->input(1 - k);
  return nullptr;
}

// The input of `v` = op(input) when `v` is read by nothing else.
Value *ownInputOf(Value *v, OpKind op, const Rewriter &rw) {
  Node *n = producedBy(v, op);
  return n && rw.hasOneUse(v) ? n->input(0) : nullptr;
}

// Relative tolerance of the form's constants in x's dtype.
double toleranceFor(const Value *x, double atLeast = 0) {
  return std::max(atLeast, constantTolerance(x->type().dtype()));
}

bool isScaledX(Value *z, Value *x, double scale, const Rewriter &rw) {
  if (!z || !rw.hasOneUse(z)) return false;
  Product p = productOf(z, rw);
  return p.factors == std::vector<Value *>{x} && near(p.constant, scale, toleranceFor(x)) &&
         constantsBroadcastInto(p, x);
}

bool matchesErfForm(Value *x, Value *a, const Rewriter &rw) {
  Value *z = ownInputOf(addendOf(a, 1.0, x, rw), OpKind::Erf, rw);
  return isScaledX(z, x, M_SQRT1_2, rw);
}

// q = a * x^3, with x^3 as Pow(x, 3) or x*x*x in any grouping.
bool isCubicTerm(Value *q, Value *x, const Rewriter &rw) {
  if (!q || !rw.hasOneUse(q)) return false;
  Product p = productOf(q, rw);
  if (!near(p.constant, 0.044715, toleranceFor(x, 1e-4)) || !constantsBroadcastInto(p, x))
    return false;
  int power = 0;
  for (Value *f : p.factors) {
    Node *pow = producedBy(f, OpKind::Pow);
    if (f == x) {
      ++power;
    } else if (pow && pow->input(0) == x && rw.hasOneUse(f) && isScalarFor(pow->input(1), x, 3)) {
      power += 3;
    } else {
      return false;
    }
  }
  return power == 3;
}

bool matchesTanhForm(Value *x, Value *a, const Rewriter &rw) {
  Value *u = ownInputOf(addendOf(a, 1.0, x, rw), OpKind::Tanh, rw);
  if (!u || !rw.hasOneUse(u)) return false;
  Product pu = productOf(u, rw);
  if (pu.factors.size() != 1 || !near(pu.constant, std::sqrt(2 / M_PI), toleranceFor(x, 1e-4)) ||
      !constantsBroadcastInto(pu, x))
    return false;
  Node *sum = producedBy(pu.factors[0], OpKind::Add);
  if (!sum || !rw.hasOneUse(pu.factors[0])) return false;
  for (int k = 0; k < 2; ++k)
    if (sum->input(k) == x && isCubicTerm(sum->input(1 - k), x, rw)) return true;
  return false;
}

bool recognizeGelu(Node &root, Rewriter &rw) {
  Value *out = root.output(0);
  Product p = productOf(out, rw);
  if (p.factors.size() != 2 || !near(p.constant, 0.5) || !rw.canReplace(out)) return false;
  for (int k = 0; k < 2; ++k) {
    Value *x = p.factors[k], *a = p.factors[1 - k];
    if (!x->type().isTensor() || !isFloat(x->type().dtype()) || !constantsBroadcastInto(p, x))
      continue;
    const char *approximate = matchesErfForm(x, a, rw)    ? "none"
                              : matchesTanhForm(x, a, rw) ? "tanh"
                                                          : nullptr;
    if (!approximate) continue;
    Node *gelu = rw.create(*root.owner(), OpKind::Gelu, {x}, root.name());
    if (std::string(approximate) != "none")
      gelu->setAttr("approximate", Attribute::ofString(approximate));
    gelu->output(0)->setType(out->type());
    return rw.replace(out, gelu->output(0));
  }
  return false;
}

const PatternSet &recognizeGeluPatterns() {
  static const PatternSet set{"recognize-gelu",
                              {
                                  {"gelu-from-mul", OpKind::Mul, recognizeGelu},
                                  {"gelu-from-div", OpKind::Div, recognizeGelu},
                              }};
  return set;
}

} // namespace

std::unique_ptr<Pass> createRecognizeGeluPass() {
  return makePatternPass(recognizeGeluPatterns());
}

} // namespace kiln
