// Compile-time tracing of shape-computing subgraphs (see shape_value.h).
// A traced value is a small tensor (a static shape and its elements, each a
// known integer, a symbol or unknown); the ops that exporters use to build
// shapes, pads and axes are evaluated on it with numpy semantics. The walk is
// bounded in depth and in the number of elements, so a pathological graph
// costs little; anything unfamiliar ends the trace with nullopt, which
// callers turn into unknown dims.
#include "ir/infer/shape_value.h"

#include "ir/infer/infer.h"

#include <algorithm>
#include <unordered_map>

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

SliceRange clampSliceRange(int64_t start, int64_t end, int64_t step, int64_t dim) {
  SliceRange r;
  if (dim <= 0) return r;
  // Negative positions count from the back; then starts and ends clamp into
  // range, which for negative steps allows end = -1 ("before the first").
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp(start, int64_t(0), dim);
    end = std::clamp(end, int64_t(0), dim);
    // Written so that huge steps (INT64_MAX) cannot overflow.
    r.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp(start, int64_t(0), dim - 1);
    end = std::clamp(end, int64_t(-1), dim - 1);
    r.count = start > end ? (start - end - 1) / -std::max(step, -INT64_MAX) + 1 : 0;
  }
  r.start = start;
  return r;
}

namespace {

struct Traced {
  Shape64 shape;
  std::vector<SymInt> elems; // row-major, numelOf(shape) of them
};
using MaybeTraced = std::optional<Traced>;

constexpr int kMaxDepth = 64;
constexpr int64_t kMaxElems = 256; // shapes and pads are short; bigger tensors are data

// One trace: remembers what it has evaluated (a shared subexpression is
// traced once) and stops after a budget of nodes.
struct Tracer {
  std::unordered_map<const Value *, MaybeTraced> memo;
  int budget = 4096;
  int depth = 0;
};

MaybeTraced trace(const Value *v, Tracer &t);

// Every traced shape keeps its dims non-negative and the product of its
// non-zero dims within kMaxElems, so that no product of its dims (outer
// sizes, strides, element counts) can overflow, even with a 0 dim.
bool boundedShape(const Shape64 &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxElems) return false;
    n *= std::max<int64_t>(d, 1);
    if (n > kMaxElems) return false;
  }
  return true;
}

// A traced value whose elements are all known, as int64 values.
std::optional<std::vector<int64_t>> knownValues(const MaybeTraced &t) {
  if (!t) return std::nullopt;
  std::vector<int64_t> out;
  for (const SymInt &e : t->elems) {
    if (!e.isKnown()) return std::nullopt;
    out.push_back(e.value());
  }
  return out;
}

std::optional<std::vector<int64_t>> knownInput(const Node &n, int i, Tracer &t) {
  return knownValues(trace(n.input(i), t));
}

std::optional<int64_t> normAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

// The elements of `src` picked by `offsets`, as a value of `shape`.
Traced pick(const Traced &src, Shape64 shape, const std::vector<int64_t> &offsets) {
  Traced out{std::move(shape), {}};
  for (int64_t o : offsets) out.elems.push_back(src.elems[o]);
  return out;
}

// Calls f(multi-index, linear index) for every element of `shape`.
template <class F> void forEachIndex(const Shape64 &shape, F &&f) {
  int64_t n = numelOf(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(idx, k);
    for (int64_t a = static_cast<int64_t>(shape.size()) - 1; a >= 0; --a) {
      if (++idx[a] < shape[a]) break;
      idx[a] = 0;
    }
  }
}

MaybeTraced traceConstant(const Node &n) {
  const Tensor &t = n.getTensor("value");
  if (!t.defined() || t.numel() > kMaxElems) return std::nullopt;
  if (!isInt(t.dtype()) && !isFloat(t.dtype())) return std::nullopt;
  Traced out{t.shape(), {}};
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isInt(t.dtype())) {
      out.elems.push_back(SymInt::known(t.getInt(i)));
      continue;
    }
    double d = t.getDouble(i);
    // Float constants take part only when integral (e.g. Cast to float, *2).
    if (!(d >= -9.2e18 && d <= 9.2e18) || d != static_cast<double>(static_cast<int64_t>(d)))
      return std::nullopt;
    out.elems.push_back(SymInt::known(static_cast<int64_t>(d)));
  }
  return out;
}

MaybeTraced traceShape(const Node &n) {
  const Shape &s = n.input(0)->type().shape();
  if (!s.rankKnown) return std::nullopt;
  int64_t rank = s.rank();
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  int64_t start = clampAxis(n.getInt("start"));
  int64_t end = n.hasAttr("end") ? clampAxis(n.getInt("end")) : rank;
  Traced out;
  for (int64_t i = start; i < end; ++i) out.elems.push_back(SymInt::fromDim(s.dims[i]));
  out.shape = {static_cast<int64_t>(out.elems.size())};
  return out;
}

MaybeTraced traceConstantOfShape(const Node &n, Tracer &t) {
  auto shape = knownInput(n, 0, t);
  if (!shape) return std::nullopt;
  for (int64_t d : *shape)
    if (d < 0) return std::nullopt;
  if (numelOf(*shape) > kMaxElems) return std::nullopt;
  int64_t value = 0;
  if (n.hasAttr("value")) {
    const Tensor &v = n.getTensor("value");
    if (v.numel() != 1 || !isInt(v.dtype())) return std::nullopt;
    value = v.getInt(0);
  }
  return Traced{*shape, std::vector<SymInt>(numelOf(*shape), SymInt::known(value))};
}

// Reshape-like ops: same elements, new shape.
MaybeTraced traceReshape(const Node &n, Tracer &t) {
  MaybeTraced data = trace(n.input(0), t);
  auto target = knownInput(n, 1, t);
  if (!data || !target) return std::nullopt;
  Shape64 shape(target->size());
  int64_t inferred = -1, known = 1;
  bool allowZero = n.getInt("allowzero") != 0;
  for (size_t i = 0; i < target->size(); ++i) {
    int64_t d = (*target)[i];
    if (d == 0 && !allowZero) {
      if (i >= data->shape.size()) return std::nullopt;
      d = data->shape[i];
    }
    if (d == -1) {
      if (inferred >= 0) return std::nullopt;
      inferred = static_cast<int64_t>(i);
      continue;
    }
    if (d < 0 || __builtin_mul_overflow(known, d, &known)) return std::nullopt;
    shape[i] = d;
  }
  int64_t numel = static_cast<int64_t>(data->elems.size());
  if (inferred >= 0) {
    if (known == 0 || numel % known) return std::nullopt;
    shape[inferred] = numel / known;
  }
  if (numelOf(shape) != numel) return std::nullopt;
  data->shape = shape;
  return data;
}

MaybeTraced traceUnsqueeze(const Node &n, Tracer &t) {
  MaybeTraced data = trace(n.input(0), t);
  auto axes = knownInput(n, 1, t);
  if (!data || !axes) return std::nullopt;
  int64_t outRank = static_cast<int64_t>(data->shape.size() + axes->size());
  std::vector<bool> inserted(outRank, false);
  for (int64_t a : *axes) {
    auto r = normAxis(a, outRank);
    if (!r || inserted[*r]) return std::nullopt;
    inserted[*r] = true;
  }
  Shape64 shape;
  for (int64_t i = 0, k = 0; i < outRank; ++i) shape.push_back(inserted[i] ? 1 : data->shape[k++]);
  data->shape = shape;
  return data;
}

MaybeTraced traceSqueeze(const Node &n, Tracer &t) {
  MaybeTraced data = trace(n.input(0), t);
  if (!data) return std::nullopt;
  int64_t rank = static_cast<int64_t>(data->shape.size());
  std::vector<bool> drop(rank, false);
  if (n.input(1)) {
    auto axes = knownInput(n, 1, t);
    if (!axes) return std::nullopt;
    for (int64_t a : *axes) {
      auto r = normAxis(a, rank);
      if (!r || data->shape[*r] != 1) return std::nullopt;
      drop[*r] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) drop[i] = data->shape[i] == 1;
  }
  Shape64 shape;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i]) shape.push_back(data->shape[i]);
  data->shape = shape;
  return data;
}

MaybeTraced traceFlatten(const Node &n, Tracer &t) {
  MaybeTraced data = trace(n.input(0), t);
  if (!data) return std::nullopt;
  int64_t rank = static_cast<int64_t>(data->shape.size()), axis = n.getInt("axis");
  if (axis < -rank || axis > rank) return std::nullopt;
  if (axis < 0) axis += rank;
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= data->shape[i];
  data->shape = {outer, static_cast<int64_t>(data->elems.size()) / std::max<int64_t>(outer, 1)};
  if (outer == 0) data->shape[1] = 0;
  return data;
}

MaybeTraced traceTranspose(const Node &n, Tracer &t) {
  MaybeTraced data = trace(n.input(0), t);
  if (!data) return std::nullopt;
  int64_t rank = static_cast<int64_t>(data->shape.size());
  std::vector<int64_t> perm = n.getInts("perm");
  if (!n.hasAttr("perm"))
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != rank) return std::nullopt;
  Shape64 strides = stridesOf(data->shape), shape(rank);
  for (int64_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank) return std::nullopt;
    shape[i] = data->shape[perm[i]];
  }
  std::vector<int64_t> offsets;
  forEachIndex(shape, [&](const std::vector<int64_t> &idx, int64_t) {
    int64_t off = 0;
    for (int64_t i = 0; i < rank; ++i) off += idx[i] * strides[perm[i]];
    offsets.push_back(off);
  });
  return pick(*data, shape, offsets);
}

MaybeTraced traceConcat(const Node &n, Tracer &t) {
  std::vector<Traced> parts;
  for (Value *in : n.inputs()) {
    MaybeTraced part = trace(in, t);
    if (!part) return std::nullopt;
    parts.push_back(std::move(*part));
  }
  if (parts.empty()) return std::nullopt;
  int64_t rank = static_cast<int64_t>(parts[0].shape.size());
  auto axis = normAxis(n.getInt("axis"), rank);
  if (!axis) return std::nullopt;
  Traced out{parts[0].shape, {}};
  out.shape[*axis] = 0;
  for (const Traced &p : parts) {
    if (static_cast<int64_t>(p.shape.size()) != rank) return std::nullopt;
    out.shape[*axis] += p.shape[*axis];
  }
  if (numelOf(out.shape) > kMaxElems) return std::nullopt;
  int64_t outer = 1;
  for (int64_t i = 0; i < *axis; ++i) outer *= out.shape[i];
  for (int64_t o = 0; o < outer; ++o)
    for (const Traced &p : parts) {
      int64_t chunk = outer ? static_cast<int64_t>(p.elems.size()) / outer : 0;
      out.elems.insert(out.elems.end(), p.elems.begin() + o * chunk,
                       p.elems.begin() + (o + 1) * chunk);
    }
  if (static_cast<int64_t>(out.elems.size()) != numelOf(out.shape)) return std::nullopt;
  return out;
}

MaybeTraced traceGather(const Node &n, Tracer &t) {
  MaybeTraced data = trace(n.input(0), t);
  MaybeTraced indices = trace(n.input(1), t);
  auto idx = knownValues(indices);
  if (!data || !idx) return std::nullopt;
  int64_t rank = static_cast<int64_t>(data->shape.size());
  auto axis = normAxis(n.getInt("axis"), rank);
  if (!axis) return std::nullopt;
  int64_t dim = data->shape[*axis], inner = 1, outer = 1;
  for (int64_t i = 0; i < *axis; ++i) outer *= data->shape[i];
  for (int64_t i = *axis + 1; i < rank; ++i) inner *= data->shape[i];
  Shape64 shape(data->shape.begin(), data->shape.begin() + *axis);
  shape.insert(shape.end(), indices->shape.begin(), indices->shape.end());
  shape.insert(shape.end(), data->shape.begin() + *axis + 1, data->shape.end());
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : *idx) {
      if (i < -dim || i >= dim) return std::nullopt;
      for (int64_t j = 0; j < inner; ++j)
        offsets.push_back((o * dim + (i < 0 ? i + dim : i)) * inner + j);
    }
  return pick(*data, shape, offsets);
}

MaybeTraced traceSlice(const Node &n, Tracer &t) {
  MaybeTraced data = trace(n.input(0), t);
  auto starts = knownInput(n, 1, t), ends = knownInput(n, 2, t);
  if (!data || !starts || !ends || starts->size() != ends->size()) return std::nullopt;
  int64_t rank = static_cast<int64_t>(data->shape.size());
  std::vector<int64_t> axes, steps(starts->size(), 1);
  if (n.input(3)) {
    auto a = knownInput(n, 3, t);
    if (!a) return std::nullopt;
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (n.input(4)) {
    auto s = knownInput(n, 4, t);
    if (!s) return std::nullopt;
    steps = *s;
  }
  if (axes.size() != starts->size() || steps.size() != starts->size()) return std::nullopt;
  // Per axis: first index, step, count (numpy clamping).
  Shape64 first(rank, 0), step(rank, 1), shape = data->shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    auto a = normAxis(axes[i], rank);
    if (!a || steps[i] == 0) return std::nullopt;
    SliceRange r = clampSliceRange((*starts)[i], (*ends)[i], steps[i], data->shape[*a]);
    first[*a] = r.start;
    step[*a] = steps[i];
    shape[*a] = r.count;
  }
  Shape64 strides = stridesOf(data->shape);
  std::vector<int64_t> offsets;
  forEachIndex(shape, [&](const std::vector<int64_t> &idx, int64_t) {
    int64_t off = 0;
    for (int64_t a = 0; a < rank; ++a) off += (first[a] + idx[a] * step[a]) * strides[a];
    offsets.push_back(off);
  });
  return pick(*data, shape, offsets);
}

// One element of integer arithmetic; unknown unless an identity applies.
// Integer division as the op computes it, when the result is an integer
// everyone agrees on: exact quotients, or non-negative ones for integer
// dtypes (float Div keeps the fraction; negative integer Div rounding is
// not worth guessing).
SymInt divide(int64_t u, int64_t w, bool floatResult) {
  // INT64_MIN / -1 overflows (and traps); an overflowing value is unknown.
  if (w == 0 || (u == INT64_MIN && w == -1)) return SymInt();
  if (u % w == 0) return SymInt::known(u / w);
  if (!floatResult && u >= 0 && w > 0) return SymInt::known(u / w);
  return SymInt();
}

SymInt arith(OpKind op, const SymInt &x, const SymInt &y, bool floatResult) {
  if (x.isKnown() && y.isKnown()) {
    int64_t u = x.value(), w = y.value(), r = 0;
    // A result that overflows int64 is unknown rather than wrapped.
    switch (op) {
    case OpKind::Add:
      return __builtin_add_overflow(u, w, &r) ? SymInt() : SymInt::known(r);
    case OpKind::Sub:
      return __builtin_sub_overflow(u, w, &r) ? SymInt() : SymInt::known(r);
    case OpKind::Mul:
      return __builtin_mul_overflow(u, w, &r) ? SymInt() : SymInt::known(r);
    case OpKind::Div:
      return divide(u, w, floatResult);
    default:
      return SymInt();
    }
  }
  bool yIs0 = y.isKnown() && y.value() == 0, yIs1 = y.isKnown() && y.value() == 1;
  bool xIs0 = x.isKnown() && x.value() == 0, xIs1 = x.isKnown() && x.value() == 1;
  if ((op == OpKind::Add || op == OpKind::Sub) && yIs0) return x;
  if (op == OpKind::Add && xIs0) return y;
  if ((op == OpKind::Mul || op == OpKind::Div) && yIs1) return x;
  if (op == OpKind::Mul && xIs1) return y;
  return SymInt();
}

// Elementwise binary ops with numpy broadcasting.
MaybeTraced traceBinary(const Node &n, Tracer &t) {
  MaybeTraced a = trace(n.input(0), t), b = trace(n.input(1), t);
  if (!a || !b) return std::nullopt;
  size_t rank = std::max(a->shape.size(), b->shape.size());
  Shape64 shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a->shape.size() >= rank ? a->shape[i + a->shape.size() - rank] : 1;
    int64_t db = i + b->shape.size() >= rank ? b->shape[i + b->shape.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    shape[i] = da == 1 ? db : da;
  }
  if (numelOf(shape) > kMaxElems) return std::nullopt;
  // Offset of an output index in an operand (size-1 dims repeat).
  auto offsetIn = [&](const Shape64 &s, const std::vector<int64_t> &idx) {
    int64_t off = 0;
    for (size_t i = 0; i < s.size(); ++i)
      off = off * s[i] + (s[i] == 1 ? 0 : idx[i + rank - s.size()]);
    return off;
  };
  bool floatResult = n.output(0) && isFloat(n.output(0)->type().dtype());
  Traced out{shape, {}};
  forEachIndex(shape, [&](const std::vector<int64_t> &idx, int64_t) {
    const SymInt &x = a->elems[offsetIn(a->shape, idx)], &y = b->elems[offsetIn(b->shape, idx)];
    if (n.op() == OpKind::Equal) {
      // Equal symbols are equal numbers; anything else needs known values.
      if (x.isKnown() && y.isKnown())
        out.elems.push_back(SymInt::known(x.value() == y.value()));
      else if (x.isSymbol() && x == y)
        out.elems.push_back(SymInt::known(1));
      else
        out.elems.push_back(SymInt());
    } else {
      out.elems.push_back(arith(n.op(), x, y, floatResult));
    }
  });
  return out;
}

// Where(cond, a, b) where cond is known: elementwise choice.
MaybeTraced traceWhere(const Node &n, Tracer &t) {
  auto cond = trace(n.input(0), t);
  MaybeTraced a = trace(n.input(1), t), b = trace(n.input(2), t);
  if (!cond || !a || !b || cond->shape != a->shape || a->shape != b->shape) return std::nullopt;
  Traced out{a->shape, {}};
  for (size_t i = 0; i < a->elems.size(); ++i) {
    const SymInt &c = cond->elems[i];
    out.elems.push_back(!c.isKnown() ? SymInt() : c.value() ? a->elems[i] : b->elems[i]);
  }
  return out;
}

MaybeTraced evaluate(const Node &n, Tracer &t) {
  switch (n.op()) {
  case OpKind::Constant:
    return traceConstant(n);
  case OpKind::Shape:
    return traceShape(n);
  case OpKind::Size: {
    auto numel = staticNumel(n.input(0)->type().shape());
    return Traced{{}, {numel ? SymInt::known(*numel) : SymInt()}};
  }
  case OpKind::ConstantOfShape:
    return traceConstantOfShape(n, t);
  case OpKind::Identity:
  case OpKind::Cast:
    return trace(n.input(0), t);
  case OpKind::Reshape:
    return traceReshape(n, t);
  case OpKind::Unsqueeze:
    return traceUnsqueeze(n, t);
  case OpKind::Squeeze:
    return traceSqueeze(n, t);
  case OpKind::Flatten:
    return traceFlatten(n, t);
  case OpKind::Transpose:
    return traceTranspose(n, t);
  case OpKind::Concat:
    return traceConcat(n, t);
  case OpKind::Gather:
    return traceGather(n, t);
  case OpKind::Slice:
    return traceSlice(n, t);
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Equal:
    return traceBinary(n, t);
  case OpKind::Where:
    return traceWhere(n, t);
  default:
    return std::nullopt;
  }
}

// A value that cannot be evaluated but whose type has a small static shape
// is traced as unknown elements of that shape, so that e.g. a Concat of it
// with known parts still yields the known parts.
MaybeTraced unknownOfType(const Value *v) {
  const Type &type = v->type();
  if (!type.isTensor()) return std::nullopt;
  auto shape = type.shape().staticDims();
  if (!shape || !boundedShape(*shape)) return std::nullopt;
  return Traced{*shape, std::vector<SymInt>(numelOf(*shape))};
}

MaybeTraced trace(const Value *v, Tracer &t) {
  if (!v) return std::nullopt;
  if (!v->producer() || t.depth >= kMaxDepth || t.budget <= 0) return unknownOfType(v);
  if (auto it = t.memo.find(v); it != t.memo.end()) return it->second;
  --t.budget;
  ++t.depth;
  // Only single-output producers are evaluated, so the value is output 0.
  MaybeTraced r = evaluate(*v->producer(), t);
  --t.depth;
  if (r && (static_cast<int64_t>(r->elems.size()) > kMaxElems || !boundedShape(r->shape)))
    r.reset();
  if (!r) r = unknownOfType(v);
  t.memo[v] = r;
  return r;
}

} // namespace

std::optional<std::vector<SymInt>> traceShapeValue(const Value *v) {
  Tracer t;
  MaybeTraced r = trace(v, t);
  if (!r) return std::nullopt;
  return std::move(r->elems);
}

std::optional<std::vector<int64_t>> traceKnownInts(const Value *v) {
  Tracer t;
  return knownValues(trace(v, t));
}

std::optional<std::vector<Dim>> shapeInputDims(const Value *v) {
  if (!v) return std::nullopt;
  if (auto elems = traceShapeValue(v)) {
    std::vector<Dim> dims;
    for (const SymInt &e : *elems) dims.push_back(e.toDim());
    return dims;
  }
  const Shape &s = v->type().shape();
  if (s.rankKnown && s.rank() == 1 && s.dims[0].isStatic() && s.dims[0].value() <= kMaxElems)
    return std::vector<Dim>(s.dims[0].value(), Dim::unknown());
  return std::nullopt;
}

} // namespace kiln
