// Compile-time tracing of shape-computing subgraphs (see shape_value.h). The
// walk is bounded in depth and in the number of elements, so a pathological
// graph costs little; anything unfamiliar ends the trace with nullopt, which
// callers turn into unknown dims.
#include "ir/infer/shape_value.h"

#include "ir/infer/infer.h"

#include <algorithm>

namespace kiln {

SymInt SymInt::fromDim(const Dim &d) {
  if (d.isStatic()) return known(d.value());
  SymInt s;
  if (d.isSymbol()) {
    s.kind_ = Kind::Symbol;
    s.symbol_ = d.symbolName();
  }
  return s;
}

Dim SymInt::toDim() const {
  if (isKnown() && value_ >= 0) return Dim(value_);
  if (isSymbol()) return Dim::symbol(symbol_);
  return Dim::unknown();
}

namespace {

using Elems = std::vector<SymInt>;
using Traced = std::optional<Elems>;

constexpr int kMaxDepth = 64;
constexpr int64_t kMaxElems = 64; // shapes are short; bigger tensors are data

Traced trace(const Value *v, int depth);

// A constant input as int64 values (integer dtypes only).
std::optional<std::vector<int64_t>> constInts(const Value *v) {
  if (!v || !v->producer() || v->producer()->op() != OpKind::Constant) return std::nullopt;
  const Tensor &t = v->producer()->getTensor("value");
  if (!t.defined() || !isInt(t.dtype()) || t.numel() > kMaxElems) return std::nullopt;
  std::vector<int64_t> out(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = t.getInt(i);
  return out;
}

Traced traceConstant(const Node &n) {
  const Tensor &t = n.getTensor("value");
  if (!t.defined() || t.numel() > kMaxElems || t.rank() > 1) return std::nullopt;
  if (!isInt(t.dtype()) && !isFloat(t.dtype())) return std::nullopt;
  Elems out;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double d = t.getDouble(i);
    // Float constants take part only when integral (e.g. Cast to float, *2).
    if (d != static_cast<double>(static_cast<int64_t>(d))) return std::nullopt;
    out.push_back(SymInt::known(static_cast<int64_t>(d)));
  }
  return out;
}

Traced traceShape(const Node &n) {
  const Shape &s = n.input(0)->type().shape();
  if (!s.rankKnown) return std::nullopt;
  int64_t rank = s.rank();
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  int64_t start = clampAxis(n.getInt("start"));
  int64_t end = n.hasAttr("end") ? clampAxis(n.getInt("end")) : rank;
  Elems out;
  for (int64_t i = start; i < end; ++i) out.push_back(SymInt::fromDim(s.dims[i]));
  return out;
}

Traced traceGather(const Node &n, int depth) {
  if (n.getInt("axis") != 0) return std::nullopt;
  Traced data = trace(n.input(0), depth + 1);
  auto idx = constInts(n.input(1));
  if (!data || !idx) return std::nullopt;
  int64_t size = static_cast<int64_t>(data->size());
  Elems out;
  for (int64_t i : *idx) {
    if (i < -size || i >= size) return std::nullopt;
    out.push_back((*data)[i < 0 ? i + size : i]);
  }
  return out;
}

Traced traceConcat(const Node &n, int depth) {
  Elems out;
  for (Value *in : n.inputs()) {
    Traced part = trace(in, depth + 1);
    if (!part) return std::nullopt;
    out.insert(out.end(), part->begin(), part->end());
  }
  if (static_cast<int64_t>(out.size()) > kMaxElems) return std::nullopt;
  return out;
}

Traced traceSlice(const Node &n, int depth) {
  Traced data = trace(n.input(0), depth + 1);
  auto starts = constInts(n.input(1)), ends = constInts(n.input(2));
  if (!data || !starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  int64_t step = 1;
  if (n.input(4)) {
    auto steps = constInts(n.input(4));
    if (!steps || steps->size() != 1 || (*steps)[0] == 0) return std::nullopt;
    step = (*steps)[0];
  }
  if (n.input(3)) {
    auto axes = constInts(n.input(3));
    if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1)) return std::nullopt;
  }
  int64_t dim = static_cast<int64_t>(data->size());
  int64_t s = (*starts)[0], e = (*ends)[0];
  if (s < 0) s += dim;
  if (e < 0) e += dim;
  Elems out;
  if (step > 0) {
    s = std::clamp(s, int64_t(0), dim);
    e = std::clamp(e, int64_t(0), dim);
    for (int64_t i = s; i < e; i += step) out.push_back((*data)[i]);
  } else if (dim > 0) {
    s = std::clamp(s, int64_t(0), dim - 1);
    e = std::clamp(e, int64_t(-1), dim - 1);
    for (int64_t i = s; i > e; i += step) out.push_back((*data)[i]);
  }
  return out;
}

// Elementwise integer arithmetic; a length-1 side broadcasts.
Traced traceArith(const Node &n, int depth) {
  Traced a = trace(n.input(0), depth + 1), b = trace(n.input(1), depth + 1);
  if (!a || !b) return std::nullopt;
  size_t len = std::max(a->size(), b->size());
  if ((a->size() != len && a->size() != 1) || (b->size() != len && b->size() != 1))
    return std::nullopt;
  Elems out;
  for (size_t i = 0; i < len; ++i) {
    const SymInt &x = (*a)[a->size() == 1 ? 0 : i], &y = (*b)[b->size() == 1 ? 0 : i];
    OpKind op = n.op();
    if (x.isKnown() && y.isKnown()) {
      int64_t u = x.value(), w = y.value();
      if (op == OpKind::Div && w == 0) return std::nullopt;
      int64_t r = op == OpKind::Add   ? u + w
                  : op == OpKind::Sub ? u - w
                  : op == OpKind::Mul ? u * w
                                      : u / w;
      out.push_back(SymInt::known(r));
    } else if ((op == OpKind::Mul || op == OpKind::Div) && y.isKnown() && y.value() == 1) {
      out.push_back(x);
    } else if (op == OpKind::Mul && x.isKnown() && x.value() == 1) {
      out.push_back(y);
    } else if ((op == OpKind::Add || op == OpKind::Sub) && y.isKnown() && y.value() == 0) {
      out.push_back(x);
    } else if (op == OpKind::Add && x.isKnown() && x.value() == 0) {
      out.push_back(y);
    } else {
      out.push_back(SymInt());
    }
  }
  return out;
}

Traced trace(const Value *v, int depth) {
  if (!v || !v->producer() || depth > kMaxDepth) return std::nullopt;
  const Node &n = *v->producer();
  switch (n.op()) {
  case OpKind::Constant: return traceConstant(n);
  case OpKind::Shape: return traceShape(n);
  case OpKind::Size: {
    auto numel = staticNumel(n.input(0)->type().shape());
    return Elems{numel ? SymInt::known(*numel) : SymInt()};
  }
  case OpKind::Gather: return traceGather(n, depth);
  case OpKind::Concat: return traceConcat(n, depth);
  case OpKind::Slice: return traceSlice(n, depth);
  // These keep the elements and their order; only the rank changes.
  case OpKind::Identity:
  case OpKind::Cast:
  case OpKind::Unsqueeze:
  case OpKind::Squeeze:
  case OpKind::Reshape:
  case OpKind::Flatten: return trace(n.input(0), depth + 1);
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div: return traceArith(n, depth);
  default: return std::nullopt;
  }
}

} // namespace

std::optional<std::vector<SymInt>> traceShapeValue(const Value *v) { return trace(v, 0); }

std::optional<std::vector<Dim>> shapeInputDims(const Value *v) {
  if (!v) return std::nullopt;
  if (auto elems = traceShapeValue(v)) {
    std::vector<Dim> dims;
    for (const SymInt &e : *elems) dims.push_back(e.toDim());
    return dims;
  }
  const Shape &s = v->type().shape();
  if (s.rankKnown && s.rank() == 1 && s.dims[0].isStatic())
    return std::vector<Dim>(s.dims[0].value(), Dim::unknown());
  return std::nullopt;
}

} // namespace kiln
