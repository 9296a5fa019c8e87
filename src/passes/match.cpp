#include "passes/match.h"

#include <algorithm>
#include <cmath>

namespace kiln {

std::optional<double> scalarOf(const Value *v) {
  const Tensor *t = constantOf(v);
  if (!t || t->numel() != 1 || !isNumeric(t->dtype())) return std::nullopt;
  return t->getDouble(0);
}

std::optional<std::vector<int64_t>> intsOf(const Value *v) {
  const Tensor *t = constantOf(v);
  if (!t || !isInt(t->dtype())) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) out[i] = t->getInt(i);
  return out;
}

bool isScalarFor(const Value *c, const Value *x, double value, double tol) {
  std::optional<double> v = scalarOf(c);
  std::optional<int64_t> rank = rankOf(x);
  return v && rank && near(*v, value, tol) && constantOf(c)->rank() <= *rank;
}

bool isSplat(const Value *v, double x) {
  const Tensor *t = constantOf(v);
  if (!t || !(isNumeric(t->dtype()) || t->dtype() == DType::Bool)) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (t->getDouble(i) != x) return false;
  return true;
}

Node *producedBy(const Value *v, OpKind op) {
  if (!v || !v->producer() || v->producer()->op() != op) return nullptr;
  return v->producer();
}

double constantTolerance(DType t) {
  switch (t) {
  case DType::F16:
    return 1e-3; // 11-bit significand: half an ulp is 2^-11 ~ 4.9e-4
  case DType::BF16:
    return 8e-3; // 8-bit significand: 2^-8 ~ 3.9e-3
  default:
    return 1e-5;
  }
}

bool near(double a, double b, double tol) {
  return std::fabs(a - b) <= tol * std::max(std::fabs(a), std::fabs(b));
}

bool sameDim(const Dim &a, const Dim &b) {
  if (a.isStatic() || b.isStatic()) return a.isStatic() && b.isStatic() && a.value() == b.value();
  return a.isSymbol() && b.isSymbol() && a.symbolName() == b.symbolName();
}

bool sameShape(const Shape &a, const Shape &b) {
  if (!a.rankKnown || !b.rankKnown || a.rank() != b.rank()) return false;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (!sameDim(a.dims[i], b.dims[i])) return false;
  return true;
}

bool broadcastsInto(const Shape64 &small, const Shape &big) {
  if (!big.rankKnown || static_cast<int64_t>(small.size()) > big.rank()) return false;
  const size_t offset = big.dims.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i) {
    if (small[i] == 1) continue;
    const Dim &d = big.dims[offset + i];
    if (!d.isStatic() || d.value() != small[i]) return false;
  }
  return true;
}

std::optional<int64_t> rankOf(const Value *v) {
  if (!v || !v->type().isTensor() || !v->type().shape().rankKnown) return std::nullopt;
  return v->type().shape().rank();
}

std::optional<std::vector<int64_t>> normalizedAxes(const Value *axes, int64_t rank) {
  std::optional<std::vector<int64_t>> a = intsOf(axes);
  if (!a) return std::nullopt;
  for (int64_t &x : *a) {
    if (x < -rank || x >= rank) return std::nullopt;
    if (x < 0) x += rank;
  }
  std::sort(a->begin(), a->end());
  return a;
}

std::string suffixed(const std::string &name, const char *suffix) {
  return name.empty() ? name : name + suffix;
}

namespace {

void collectProduct(Value *v, const Node &root, const Rewriter &rw, Product &p, bool isRoot) {
  if (!isRoot) {
    if (std::optional<double> c = scalarOf(v)) {
      p.constant *= *c;
      p.constants.push_back(v);
      return;
    }
  }
  Node *n = v->producer();
  bool own = isRoot || (n && rw.hasOneUse(v) && n->owner() == root.owner());
  if (own && n && n->op() == OpKind::Mul) {
    collectProduct(n->input(0), root, rw, p, false);
    collectProduct(n->input(1), root, rw, p, false);
    return;
  }
  if (own && n && n->op() == OpKind::Div) {
    std::optional<double> d = scalarOf(n->input(1));
    if (d && *d != 0) {
      collectProduct(n->input(0), root, rw, p, false);
      p.constant /= *d;
      p.constants.push_back(n->input(1));
      return;
    }
  }
  p.factors.push_back(v);
}

} // namespace

Product productOf(Value *v, const Rewriter &rw) {
  Product p;
  if (v->producer())
    collectProduct(v, *v->producer(), rw, p, true);
  else
    p.factors.push_back(v);
  return p;
}

bool constantsBroadcastInto(const Product &p, const Value *x) {
  std::optional<int64_t> rank = rankOf(x);
  if (!rank) return false;
  for (const Value *c : p.constants) {
    const Tensor *t = constantOf(c);
    if (t->rank() > *rank || t->dtype() != x->type().dtype()) return false;
  }
  return true;
}

} // namespace kiln
