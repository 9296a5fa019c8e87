// recognize-layernorm: turns a decomposed layer normalization back into one
// LayerNormalization op.
//
// Before: a verified, topologically sorted model.
// After:  every
//           d = x - ReduceMean(x, A)           A = the trailing axes [k, rank)
//           v = ReduceMean(d^2, A)             (Pow(d, 2) or d * d)
//           n = d / Sqrt(v + eps)              (or d * Reciprocal(Sqrt(...)))
//         with keepdims, static normalized dims, a one-element constant eps
//         and inner values nothing else reads, is
//         n = LayerNormalization(x, ones) {axis = k, epsilon = eps}. Then a
//         LayerNormalization whose only reader multiplies it by a constant g
//         or adds a constant b takes them in: Scale *= g, Bias = Bias*g (Mul)
//         or Bias += b (Add), when g or b has one element or the normalized
//         dims (after leading 1s) and a rank not above x's. So the usual
//         ...Div -> Mul(gamma) -> Add(beta) becomes one op. Results keep their
//         names; the model stays sorted and valid.
//
// Algorithm: three patterns, run to a fixpoint by the pattern driver, which
// visits the Div before the Mul and the Add after it:
//  1. layernorm-core (Div, Mul): match the chain above from its last node,
//     checking axes, keepdims, exponent 2 and use counts; replace it.
//  2. layernorm-scale (Mul) and layernorm-shift (Add): one operand is a
//     LayerNormalization read only here, whose Scale (and Bias) are
//     constants; the other a constant of the normalized shape; fold it into
//     new Scale/Bias constants and move the uses to the LayerNormalization.
#include "passes/match.h"
#include "passes/rewrite.h"

namespace kiln {
namespace {

// The first axis of a keepdims mean over trailing axes [k, rank), or nullopt.
std::optional<int64_t> trailingMeanAxis(const Node &mean) {
  std::optional<int64_t> rank = rankOf(mean.input(0));
  if (!rank || mean.getInt("keepdims") != 1 || !mean.input(1)) return std::nullopt;
  std::optional<std::vector<int64_t>> axes = normalizedAxes(mean.input(1), *rank);
  if (!axes || axes->empty()) return std::nullopt;
  for (size_t i = 0; i < axes->size(); ++i)
    if ((*axes)[i] != *rank - static_cast<int64_t>(axes->size() - i)) return std::nullopt;
  return (*axes)[0];
}

// The normalized dims of x from `axis` on, when static.
std::optional<Shape64> normalizedDims(const Value *x, int64_t axis) {
  if (!x->type().isTensor()) return std::nullopt;
  const Shape &s = x->type().shape();
  Shape64 dims;
  for (int64_t i = axis; i < s.rank(); ++i) {
    if (!s.dims[i].isStatic()) return std::nullopt;
    dims.push_back(s.dims[i].value());
  }
  return dims;
}

struct StdDev {
  double eps;
  int squareUses; // how often the square reads d
};

// sd = Sqrt(v + eps), v = ReduceMean(d^2) over the axes of `mean`.
std::optional<StdDev> matchStdDev(Value *sd, Value *d, const Node &mean, const Rewriter &rw) {
  Node *sqrt = producedBy(sd, OpKind::Sqrt);
  Node *add = sqrt ? producedBy(sqrt->input(0), OpKind::Add) : nullptr;
  if (!add || !rw.hasOneUse(sd) || !rw.hasOneUse(sqrt->input(0))) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    std::optional<double> eps = scalarOf(add->input(1 - k));
    Value *v = add->input(k);
    Node *var = producedBy(v, OpKind::ReduceMean);
    if (!eps || !var || !rw.hasOneUse(v) || trailingMeanAxis(*var) != trailingMeanAxis(mean) ||
        !isScalarFor(add->input(1 - k), v, *eps))
      continue;
    Value *sq = var->input(0);
    Node *pow = producedBy(sq, OpKind::Pow), *mul = producedBy(sq, OpKind::Mul);
    if (!rw.hasOneUse(sq)) continue;
    if (pow && pow->input(0) == d && isScalarFor(pow->input(1), d, 2)) return StdDev{*eps, 1};
    if (mul && mul->input(0) == d && mul->input(1) == d) return StdDev{*eps, 2};
  }
  return std::nullopt;
}

bool recognizeCore(Node &root, Rewriter &rw) {
  Value *d = root.input(0), *sd = root.input(1), *out = root.output(0);
  if (root.op() == OpKind::Mul) { // d * Reciprocal(sd)
    Node *rec = producedBy(sd, OpKind::Reciprocal);
    if (!rec || !rw.hasOneUse(sd)) return false;
    sd = rec->input(0);
  }
  Node *sub = producedBy(d, OpKind::Sub);
  Node *mean = sub ? producedBy(sub->input(1), OpKind::ReduceMean) : nullptr;
  if (!mean || mean->input(0) != sub->input(0) || !rw.hasOneUse(sub->input(1))) return false;
  Value *x = sub->input(0);
  std::optional<int64_t> axis = trailingMeanAxis(*mean);
  if (!axis || !isFloat(x->type().dtype()) || !rw.canReplace(out)) return false;
  std::optional<StdDev> dev = matchStdDev(sd, d, *mean, rw);
  if (!dev) return false;
  // d is read by the square (once by Pow, twice by d*d) and by the root.
  if (rw.numUses(d) != dev->squareUses + 1) return false;
  std::optional<Shape64> dims = normalizedDims(x, *axis);
  if (!dims) return false;
  Tensor ones(x->type().dtype(), *dims);
  for (int64_t i = 0; i < ones.numel(); ++i) ones.setDouble(i, 1.0);
  Graph &g = *root.owner();
  Value *scale = rw.constant(g, std::move(ones), out->name() + ".scale");
  Node *ln = rw.create(g, OpKind::LayerNormalization, {x, scale}, root.name());
  ln->setAttr("axis", Attribute::ofInt(*axis));
  ln->setAttr("epsilon", Attribute::ofFloat(static_cast<float>(dev->eps)));
  ln->output(0)->setType(out->type());
  return rw.replace(out, ln->output(0));
}

// `c` as a tensor of the normalized dims: one element broadcast, or the same
// elements with leading 1s; rank not above x's.
std::optional<Tensor> asNormalized(const Value *c, const Value *x, const Shape64 &dims) {
  const Tensor *t = constantOf(c);
  if (!t || t->dtype() != x->type().dtype() || t->rank() > rankOf(x)) return std::nullopt;
  Tensor out(t->dtype(), dims);
  if (t->numel() == 1) {
    for (int64_t i = 0; i < out.numel(); ++i) out.setDouble(i, t->getDouble(0));
    return out;
  }
  Shape64 trimmed = t->shape();
  while (trimmed.size() > dims.size() && trimmed.front() == 1) trimmed.erase(trimmed.begin());
  if (trimmed != dims) return std::nullopt;
  return t->reshaped(dims);
}

bool absorbAffine(Node &root, Rewriter &rw) {
  for (int k = 0; k < 2; ++k) {
    Value *y = root.input(k), *c = root.input(1 - k);
    Node *ln = producedBy(y, OpKind::LayerNormalization);
    if (!ln || !rw.hasOneUse(y) || ln->numOutputs() > 1 || !rw.canReplace(root.output(0), y))
      continue;
    Value *x = ln->input(0);
    std::optional<int64_t> rank = rankOf(x);
    int64_t axis = ln->getInt("axis");
    if (!rank || axis < -*rank || axis >= *rank) continue;
    std::optional<Shape64> dims = normalizedDims(x, axis < 0 ? axis + *rank : axis);
    if (!dims) continue;
    std::optional<Tensor> param = asNormalized(c, x, *dims);
    std::optional<Tensor> scale = asNormalized(ln->input(1), x, *dims);
    std::optional<Tensor> bias;
    if (ln->input(2)) bias = asNormalized(ln->input(2), x, *dims);
    if (!param || !scale || (ln->input(2) && !bias)) continue;
    const bool mul = root.op() == OpKind::Mul;
    if (mul) *scale = scale->clone();
    if (bias)
      *bias = bias->clone();
    else if (!mul)
      bias = Tensor(x->type().dtype(), *dims);
    for (int64_t i = 0; i < param->numel(); ++i) {
      double p = param->getDouble(i);
      if (mul) scale->setDouble(i, scale->getDouble(i) * p);
      if (mul && bias) bias->setDouble(i, bias->getDouble(i) * p);
      if (!mul) bias->setDouble(i, bias->getDouble(i) + p);
    }
    Graph &g = *ln->owner();
    if (mul) rw.setInput(*ln, 1, rw.constant(g, std::move(*scale), c->name()));
    if (bias) {
      std::string name = mul ? ln->input(2)->name() : c->name();
      rw.setInput(*ln, 2, rw.constant(g, std::move(*bias), std::move(name)));
    }
    y->setName(root.output(0)->name()); // y now computes the root's value
    return rw.replace(root.output(0), y);
  }
  return false;
}

const PatternSet &recognizeLayerNormPatterns() {
  static const PatternSet set{"recognize-layernorm",
                              {
                                  {"layernorm-core", OpKind::Div, recognizeCore},
                                  {"layernorm-core-reciprocal", OpKind::Mul, recognizeCore},
                                  {"layernorm-scale", OpKind::Mul, absorbAffine},
                                  {"layernorm-shift", OpKind::Add, absorbAffine},
                              }};
  return set;
}

} // namespace

std::unique_ptr<Pass> createRecognizeLayerNormPass() {
  return makePatternPass(recognizeLayerNormPatterns());
}

} // namespace kiln
