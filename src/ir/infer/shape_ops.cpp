// Type and shape inference for the shape and data-movement ops of
// ir/ops/tensor.def: Constant, ConstantOfShape, Reshape, Flatten, Squeeze,
// Unsqueeze, Transpose, Expand, Tile, Shape, Size, Concat, Split, Slice and
// Pad. Shape inputs are traced through the shape-computing subgraph
// (shape_value.h), so Reshape(x, Concat(Shape(x)[0], -1)) keeps x's
// symbolic batch dim. Nothing here rejects a model over a value it cannot
// see: what is not known becomes an unknown dim (or an unknown rank).
#include "ir/infer/families.h"
#include "ir/infer/infer.h"
#include "ir/infer/shape_value.h"

#include <algorithm>
#include <set>

namespace kiln {

namespace {

// Resolves an axis against a rank; the error names the node.
Expected<int64_t> resolveAxis(const InferContext &ctx, int64_t axis, int64_t rank) {
  auto r = normalizeAxis(axis, rank);
  if (!r.ok()) return ctx.error(r.error().message);
  return *r;
}

// Input i's values when constant or computed from constants.
std::optional<std::vector<int64_t>> knownInts(const InferContext &ctx, int i) {
  return traceKnownInts(ctx.node().input(i));
}

// `n` unknown dims (an unknown rank if n is negative, which only an
// invalid model can ask for).
Shape unknownDims(int64_t n) {
  return n < 0 ? Shape::unranked() : Shape(std::vector<Dim>(n, Dim::unknown()));
}

// A size computed from values: unknown when negative (an invalid model,
// which the kernel reports at run time).
Dim sizeDim(int64_t v) {
  return v >= 0 ? Dim(v) : Dim::unknown();
}

// Product of dims: static when all are; a lone symbol times static 1s stays
// that symbol; otherwise unknown.
Dim dimProduct(const std::vector<Dim> &dims) {
  int64_t product = 1;
  const Dim *symbol = nullptr;
  for (const Dim &d : dims) {
    if (d.isStatic()) {
      product *= d.value();
    } else if (d.isSymbol() && !symbol) {
      symbol = &d;
    } else {
      return Dim::unknown();
    }
  }
  if (!symbol || product == 0) return Dim(product);
  return product == 1 ? *symbol : Dim::unknown();
}

// Merges two dims that must be equal at run time (the more precise wins).
Dim mergeDims(const Dim &a, const Dim &b) {
  if (a.isStatic()) return a;
  if (b.isStatic()) return b;
  return a.isSymbol() ? a : b;
}

Status inferConstant(InferContext &ctx) {
  const Tensor &t = ctx.node().getTensor("value");
  if (!t.defined()) return ctx.error("has no value attribute");
  ctx.setOutput(0, t.dtype(), Shape::fromStatic(t.shape()));
  return Status::success();
}

Status inferConstantOfShape(InferContext &ctx) {
  DType dtype = ctx.node().hasAttr("value") ? ctx.node().getTensor("value").dtype() : DType::F32;
  auto dims = shapeInputDims(ctx.node().input(0));
  ctx.setOutput(0, dtype, dims ? Shape(*dims) : Shape::unranked());
  return Status::success();
}

// Solves Reshape's -1: input numel divided by the other output dims, where
// the symbols on both sides cancel.
Dim inferredReshapeDim(const Shape &in, const std::vector<Dim> &others) {
  if (!in.rankKnown) return Dim::unknown();
  int64_t inProduct = 1, outProduct = 1;
  std::multiset<std::string> symbols;
  for (const Dim &d : in.dims) {
    if (d.isStatic())
      inProduct *= d.value();
    else if (d.isSymbol())
      symbols.insert(d.symbolName());
    else
      return Dim::unknown();
  }
  for (const Dim &d : others) {
    if (d.isStatic()) {
      outProduct *= d.value();
    } else if (d.isSymbol() && symbols.count(d.symbolName())) {
      symbols.erase(symbols.find(d.symbolName()));
    } else {
      return Dim::unknown();
    }
  }
  if (outProduct == 0) return Dim::unknown();
  if (symbols.empty()) return inProduct % outProduct == 0 ? Dim(inProduct / outProduct) : Dim();
  if (symbols.size() == 1 && inProduct == outProduct) return Dim::symbol(*symbols.begin());
  return Dim::unknown();
}

Status inferReshape(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  auto target = traceShapeValue(ctx.node().input(1));
  if (!target) {
    auto dims = shapeInputDims(ctx.node().input(1));
    ctx.setOutput(0, dtype, dims ? Shape(*dims) : Shape::unranked());
    return Status::success();
  }
  bool allowZero = ctx.node().getInt("allowzero") != 0;
  std::vector<Dim> dims, others;
  int64_t inferred = -1;
  for (size_t i = 0; i < target->size(); ++i) {
    const SymInt &t = (*target)[i];
    Dim d = t.toDim();
    if (t.isKnown() && t.value() == 0 && !allowZero)
      d = in.rankKnown && static_cast<int64_t>(i) < in.rank() ? in.dims[i] : Dim::unknown();
    if (t.isKnown() && t.value() == -1)
      inferred = static_cast<int64_t>(i);
    else
      others.push_back(d);
    dims.push_back(d);
  }
  if (inferred >= 0) dims[inferred] = inferredReshapeDim(in, others);
  ctx.setOutput(0, dtype, Shape(dims));
  return Status::success();
}

Status inferFlatten(InferContext &ctx) {
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    ctx.setOutput(0, ctx.inputDType(0), unknownDims(2));
    return Status::success();
  }
  int64_t axis = ctx.node().getInt("axis"); // in [-rank, rank]
  if (axis < -in.rank() || axis > in.rank())
    return ctx.error("axis ", axis, " is out of range for rank ", in.rank());
  if (axis < 0) axis += in.rank();
  std::vector<Dim> outer(in.dims.begin(), in.dims.begin() + axis);
  std::vector<Dim> inner(in.dims.begin() + axis, in.dims.end());
  ctx.setOutput(0, ctx.inputDType(0), Shape({dimProduct(outer), dimProduct(inner)}));
  return Status::success();
}

// The number of entries of an axes-like input from its type, when static.
std::optional<int64_t> staticLength(const InferContext &ctx, int i) {
  const Shape &s = ctx.inputShape(i);
  if (s.rankKnown && s.rank() == 0) return 1;
  if (s.rankKnown && s.rank() == 1 && s.dims[0].isStatic()) return s.dims[0].value();
  return std::nullopt;
}

Status inferSqueeze(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  std::vector<bool> drop(in.rank(), false);
  if (ctx.has(1)) {
    auto axes = knownInts(ctx, 1);
    if (!axes) {
      auto n = staticLength(ctx, 1);
      ctx.setOutput(0, dtype, n ? unknownDims(in.rank() - *n) : Shape::unranked());
      return Status::success();
    }
    for (int64_t a : *axes) {
      KILN_ASSIGN_OR_RETURN(a, resolveAxis(ctx, a, in.rank()));
      drop[a] = true;
    }
  } else {
    // Without axes every size-1 dim goes; a dim that is not static might be 1.
    for (int64_t i = 0; i < in.rank(); ++i) {
      if (!in.dims[i].isStatic()) {
        ctx.setOutput(0, dtype, Shape::unranked());
        return Status::success();
      }
      drop[i] = in.dims[i].value() == 1;
    }
  }
  std::vector<Dim> dims;
  for (int64_t i = 0; i < in.rank(); ++i)
    if (!drop[i]) dims.push_back(in.dims[i]);
  ctx.setOutput(0, dtype, Shape(dims));
  return Status::success();
}

Status inferUnsqueeze(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  auto axes = knownInts(ctx, 1);
  if (!in.rankKnown || !axes) {
    auto n = staticLength(ctx, 1);
    ctx.setOutput(0, dtype, in.rankKnown && n ? unknownDims(in.rank() + *n) : Shape::unranked());
    return Status::success();
  }
  int64_t outRank = in.rank() + static_cast<int64_t>(axes->size());
  std::vector<bool> inserted(outRank, false);
  for (int64_t a : *axes) {
    KILN_ASSIGN_OR_RETURN(a, resolveAxis(ctx, a, outRank));
    if (inserted[a]) return ctx.error("axis ", a, " is repeated");
    inserted[a] = true;
  }
  std::vector<Dim> dims;
  for (int64_t i = 0, k = 0; i < outRank; ++i) dims.push_back(inserted[i] ? Dim(1) : in.dims[k++]);
  ctx.setOutput(0, dtype, Shape(dims));
  return Status::success();
}

Status inferTranspose(InferContext &ctx) {
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    auto perm = ctx.node().getInts("perm");
    bool hasPerm = ctx.node().hasAttr("perm");
    ctx.setOutput(0, ctx.inputDType(0),
                  hasPerm ? unknownDims(static_cast<int64_t>(perm.size())) : Shape::unranked());
    return Status::success();
  }
  std::vector<int64_t> perm = ctx.node().getInts("perm");
  if (!ctx.node().hasAttr("perm"))
    for (int64_t i = in.rank() - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != in.rank())
    return ctx.error("perm has ", perm.size(), " entries for an input of rank ", in.rank());
  std::vector<Dim> dims;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.rank()) return ctx.error("perm entry ", p, " is out of range");
    dims.push_back(in.dims[p]);
  }
  ctx.setOutput(0, ctx.inputDType(0), Shape(dims));
  return Status::success();
}

Status inferExpand(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  auto dims = shapeInputDims(ctx.node().input(1));
  if (!dims) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  auto out = broadcastShapes(ctx.inputShape(0), Shape(*dims));
  // A clash means the traced shape was wrong or the model is; let the run
  // time decide.
  if (!out.ok()) {
    int64_t rank = std::max<int64_t>(static_cast<int64_t>(dims->size()), ctx.inputShape(0).rank());
    ctx.setOutput(0, dtype, unknownDims(rank));
    return Status::success();
  }
  ctx.setOutput(0, dtype, *out);
  return Status::success();
}

Status inferTile(InferContext &ctx) {
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    ctx.setOutput(0, ctx.inputDType(0), Shape::unranked());
    return Status::success();
  }
  auto repeats = knownInts(ctx, 1);
  std::vector<Dim> dims(in.rank(), Dim::unknown());
  if (repeats && static_cast<int64_t>(repeats->size()) == in.rank())
    for (int64_t i = 0; i < in.rank(); ++i) {
      int64_t r = (*repeats)[i];
      if (r == 1)
        dims[i] = in.dims[i];
      else if (int64_t d = 0; in.dims[i].isStatic() && r >= 0 &&
                              !__builtin_mul_overflow(in.dims[i].value(), r, &d))
        dims[i] = Dim(d);
    }
  ctx.setOutput(0, ctx.inputDType(0), Shape(dims));
  return Status::success();
}

Status inferShape(InferContext &ctx) {
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    ctx.setOutput(0, DType::I64, unknownDims(1));
    return Status::success();
  }
  int64_t rank = in.rank();
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  int64_t start = clampAxis(ctx.node().getInt("start"));
  int64_t end = ctx.node().hasAttr("end") ? clampAxis(ctx.node().getInt("end")) : rank;
  ctx.setOutput(0, DType::I64, Shape({Dim(std::max<int64_t>(0, end - start))}));
  return Status::success();
}

Status inferSize(InferContext &ctx) {
  ctx.setOutput(0, DType::I64, Shape());
  return Status::success();
}

// Whether input i is a 1-d empty placeholder that Concat skips (see the
// kernel): static [0] next to inputs of another rank.
bool isConcatPlaceholder(const Shape &s, int64_t rank) {
  return rank != 1 && s.rankKnown && s.rank() == 1 && s.dims[0] == Dim(0);
}

Status inferConcat(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  int64_t rank = -1;
  for (int i = 0; i < ctx.numInputs(); ++i)
    if (ctx.has(i) && ctx.inputShape(i).rankKnown && !isConcatPlaceholder(ctx.inputShape(i), -1))
      rank = std::max(rank, ctx.inputShape(i).rank());
  if (rank < 0) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), rank));
  std::vector<Dim> dims(rank, Dim::unknown());
  bool first = true, axisKnown = true;
  int64_t axisSum = 0;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.has(i)) continue;
    const Shape &s = ctx.inputShape(i);
    if (isConcatPlaceholder(s, rank)) continue;
    if (!s.rankKnown || s.rank() != rank) {
      axisKnown = false;
      continue;
    }
    for (int64_t a = 0; a < rank; ++a)
      if (a != axis) dims[a] = first ? s.dims[a] : mergeDims(dims[a], s.dims[a]);
    first = false;
    if (s.dims[axis].isStatic())
      axisSum += s.dims[axis].value();
    else
      axisKnown = false;
  }
  // A lone input keeps its (possibly symbolic) axis dim.
  if (ctx.numInputs() == 1 && ctx.inputShape(0).rankKnown)
    dims[axis] = ctx.inputShape(0).dims[axis];
  else
    dims[axis] = axisKnown ? Dim(axisSum) : Dim::unknown();
  ctx.setOutput(0, dtype, Shape(dims));
  return Status::success();
}

Status inferSplit(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  int outputs = ctx.numOutputs();
  if (!in.rankKnown) {
    for (int k = 0; k < outputs; ++k) ctx.setOutput(k, dtype, Shape::unranked());
    return Status::success();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), in.rank()));
  std::vector<Dim> sizes(outputs, Dim::unknown());
  if (ctx.has(1)) {
    if (auto split = knownInts(ctx, 1); split && static_cast<int>(split->size()) == outputs)
      for (int k = 0; k < outputs; ++k) sizes[k] = sizeDim((*split)[k]);
  } else if (in.dims[axis].isStatic()) {
    int64_t dim = in.dims[axis].value(), chunk = (dim + outputs - 1) / outputs, left = dim;
    for (int k = 0; k < outputs; ++k) {
      sizes[k] = Dim(std::min(chunk, left));
      left -= std::min(chunk, left);
    }
  }
  for (int k = 0; k < outputs; ++k) {
    Shape s = in;
    s.dims[axis] = sizes[k];
    ctx.setOutput(k, dtype, s);
  }
  return Status::success();
}

// One sliced axis' output dim.
Dim slicedDim(const Dim &dim, int64_t start, int64_t end, int64_t step) {
  if (dim.isStatic()) return Dim(clampSliceRange(start, end, step, dim.value()).count);
  // The whole axis, however long it is.
  const int64_t big = (int64_t(1) << 31) - 1;
  bool whole =
      (step == 1 && start == 0 && end >= big) || (step == -1 && start == -1 && end <= -big);
  return whole ? dim : Dim::unknown();
}

Status inferSlice(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  auto starts = knownInts(ctx, 1), ends = knownInts(ctx, 2);
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.has(3)) axes = knownInts(ctx, 3);
  if (ctx.has(4)) steps = knownInts(ctx, 4);
  bool axesKnown = !ctx.has(3) || axes;
  std::vector<Dim> dims = in.dims;
  if (!axesKnown || !starts || !ends) {
    // Which axes change is unknown unless the axes are.
    if (axes) {
      for (int64_t a : *axes)
        if (auto r = normalizeAxis(a, in.rank()); r.ok()) dims[*r] = Dim::unknown();
    } else {
      dims.assign(in.rank(), Dim::unknown());
    }
    ctx.setOutput(0, dtype, Shape(dims));
    return Status::success();
  }
  size_t n = starts->size();
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < n; ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (ends->size() != n || axes->size() != n || (steps && steps->size() != n))
    return ctx.error("starts, ends, axes and steps have different lengths");
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t a, resolveAxis(ctx, (*axes)[i], in.rank()));
    int64_t step = steps ? (*steps)[i] : 1;
    if (ctx.has(4) && !steps)
      dims[a] = Dim::unknown();
    else if (step == 0)
      return ctx.error("step on axis ", a, " is 0");
    else
      dims[a] = slicedDim(in.dims[a], (*starts)[i], (*ends)[i], step);
  }
  ctx.setOutput(0, dtype, Shape(dims));
  return Status::success();
}

Status inferPad(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  int64_t rank = in.rank();
  auto pads = knownInts(ctx, 1);
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has(3)) {
    axes = knownInts(ctx, 3);
  } else {
    axes.emplace();
    for (int64_t a = 0; a < rank; ++a) axes->push_back(a);
  }
  std::vector<Dim> dims(rank, Dim::unknown());
  if (pads && axes && pads->size() == 2 * axes->size()) {
    dims = in.dims;
    int64_t n = static_cast<int64_t>(axes->size());
    for (int64_t i = 0; i < n; ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t a, resolveAxis(ctx, (*axes)[i], rank));
      int64_t total = (*pads)[i] + (*pads)[i + n];
      if (total == 0) continue;
      dims[a] = in.dims[a].isStatic() ? sizeDim(in.dims[a].value() + total) : Dim::unknown();
    }
  }
  ctx.setOutput(0, dtype, Shape(dims));
  return Status::success();
}

} // namespace

void registerShapeOpsInference(InferTable &t) {
  t.add(OpKind::Constant, inferConstant);
  t.add(OpKind::ConstantOfShape, inferConstantOfShape);
  t.add(OpKind::Reshape, inferReshape);
  t.add(OpKind::Flatten, inferFlatten);
  t.add(OpKind::Squeeze, inferSqueeze);
  t.add(OpKind::Unsqueeze, inferUnsqueeze);
  t.add(OpKind::Transpose, inferTranspose);
  t.add(OpKind::Expand, inferExpand);
  t.add(OpKind::Tile, inferTile);
  t.add(OpKind::Shape, inferShape);
  t.add(OpKind::Size, inferSize);
  t.add(OpKind::Concat, inferConcat);
  t.add(OpKind::Split, inferSplit);
  t.add(OpKind::Slice, inferSlice);
  t.add(OpKind::Pad, inferPad);
}

} // namespace kiln
