// Type and shape inference for the index-driven ops of ir/ops/tensor.def:
// Gather, GatherElements, GatherND, ScatterElements, ScatterND, Range,
// OneHot, NonZero, Compress, Trilu, ReverseSequence, Unique, EyeLike and the
// random ops. (The shape and data-movement ops are in shape_ops.cpp.) Output
// sizes that depend on data (NonZero, Compress, Unique) are unknown dims.
#include "ir/infer/families.h"
#include "ir/infer/infer.h"
#include "ir/infer/shape_value.h"

#include <cmath>

namespace kiln {

namespace {

// Resolves an axis against a rank; the error names the node.
Expected<int64_t> resolveAxis(const InferContext &ctx, int64_t axis, int64_t rank) {
  auto r = normalizeAxis(axis, rank);
  if (!r.ok()) return ctx.error(r.error().message);
  return *r;
}

// `n` unknown dims (an unknown rank if n is negative, which only an
// invalid model can ask for).
Shape unknownDims(int64_t n) {
  return n < 0 ? Shape::unranked() : Shape(std::vector<Dim>(n, Dim::unknown()));
}

Status inferGather(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &data = ctx.inputShape(0), &idx = ctx.inputShape(1);
  if (!data.rankKnown || !idx.rankKnown) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), data.rank()));
  std::vector<Dim> dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), idx.dims.begin(), idx.dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  ctx.setOutput(0, dtype, Shape(dims));
  return Status::success();
}

Status inferGatherElements(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), ctx.inputShape(1));
  return Status::success();
}

Status inferGatherNd(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &data = ctx.inputShape(0), &idx = ctx.inputShape(1);
  int64_t batchDims = ctx.node().getInt("batch_dims");
  if (!data.rankKnown || !idx.rankKnown || idx.rank() < 1 || !idx.dims.back().isStatic()) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  if (batchDims < 0 || batchDims >= std::min(data.rank(), idx.rank()))
    return ctx.error("batch_dims ", batchDims, " must be in [0, min(rank(data) ",
                     data.rank(), ", rank(indices) ", idx.rank(), "))");
  int64_t k = idx.dims.back().value();
  if (batchDims + k > data.rank())
    return ctx.error("index tuples of length ", k, " with batch_dims ", batchDims,
                     " do not fit data of rank ", data.rank());
  std::vector<Dim> dims(idx.dims.begin(), idx.dims.end() - 1);
  dims.insert(dims.end(), data.dims.begin() + batchDims + k, data.dims.end());
  ctx.setOutput(0, dtype, Shape(dims));
  return Status::success();
}

// Output 0 has the type of input 0 (scatters, Trilu, ReverseSequence).
Status inferSameAsInput(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputType(0));
  return Status::success();
}

// The length of a Range: ceil((limit - start) / delta), or the limit's
// symbol for Range(0, n, 1).
Dim rangeLength(const InferContext &ctx) {
  const Tensor *s = ctx.constantInput(0), *l = ctx.constantInput(1), *d = ctx.constantInput(2);
  if (s && l && d && s->numel() == 1 && l->numel() == 1 && d->numel() == 1) {
    double count = std::ceil((l->getDouble(0) - s->getDouble(0)) / d->getDouble(0));
    if (!(count < 1e12)) return Dim::unknown(); // NaN, inf, or absurd
    return Dim(count > 0 ? static_cast<int64_t>(count) : 0);
  }
  auto start = traceShapeValue(ctx.node().input(0));
  auto limit = traceShapeValue(ctx.node().input(1));
  auto delta = traceShapeValue(ctx.node().input(2));
  if (!start || !limit || !delta || start->size() != 1 || limit->size() != 1 || delta->size() != 1)
    return Dim::unknown();
  const SymInt &a = (*start)[0], &b = (*limit)[0], &c = (*delta)[0];
  if (a.isKnown() && a.value() == 0 && c.isKnown() && c.value() == 1 && b.isSymbol())
    return b.toDim();
  if (a.isKnown() && b.isKnown() && c.isKnown() && c.value() != 0) {
    // In 128 bits: limit - start and the rounding cannot overflow there.
    __int128 diff = __int128(b.value()) - a.value(), step = c.value();
    if ((diff > 0) != (step > 0) || diff == 0) return Dim(0);
    __int128 count = (diff + step + (step > 0 ? -1 : 1)) / step;
    return count <= INT64_MAX ? Dim(static_cast<int64_t>(count)) : Dim::unknown();
  }
  return Dim::unknown();
}

Status inferRange(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), Shape({rangeLength(ctx)}));
  return Status::success();
}

Status inferOneHot(InferContext &ctx) {
  DType dtype = ctx.inputDType(2);
  const Shape &idx = ctx.inputShape(0);
  if (!idx.rankKnown) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), idx.rank() + 1));
  Dim depth;
  if (const Tensor *d = ctx.constantInput(1);
      d && d->numel() == 1 && d->getDouble(0) >= 1 && d->getDouble(0) < 1e9)
    depth = Dim(static_cast<int64_t>(d->getDouble(0)));
  else if (auto v = traceKnownInts(ctx.node().input(1)); v && v->size() == 1 && (*v)[0] > 0)
    depth = Dim((*v)[0]);
  std::vector<Dim> dims = idx.dims;
  dims.insert(dims.begin() + axis, depth);
  ctx.setOutput(0, dtype, Shape(dims));
  return Status::success();
}

Status inferNonZero(InferContext &ctx) {
  const Shape &in = ctx.inputShape(0);
  Dim rank = in.rankKnown ? Dim(std::max<int64_t>(1, in.rank())) : Dim::unknown();
  ctx.setOutput(0, DType::I64, Shape({rank, Dim::unknown()}));
  return Status::success();
}

Status inferCompress(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  if (!ctx.node().hasAttr("axis")) {
    ctx.setOutput(0, dtype, unknownDims(1));
    return Status::success();
  }
  if (!in.rankKnown) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), in.rank()));
  Shape out = in;
  out.dims[axis] = Dim::unknown();
  ctx.setOutput(0, dtype, out);
  return Status::success();
}

Status inferUnique(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  Shape y = unknownDims(1);
  Dim items = Dim::unknown(); // length of inverse_indices
  if (!ctx.node().hasAttr("axis")) {
    if (auto n = staticNumel(in)) items = Dim(*n);
  } else if (in.rankKnown) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), in.rank()));
    y = in;
    y.dims[axis] = Dim::unknown();
    items = in.dims[axis];
  } else {
    y = Shape::unranked();
  }
  ctx.setOutput(0, dtype, y);
  ctx.setOutput(1, DType::I64, unknownDims(1));
  ctx.setOutput(2, DType::I64, Shape({items}));
  ctx.setOutput(3, DType::I64, unknownDims(1));
  return Status::success();
}

// The dtype attribute (an ONNX type code), or the input's dtype.
DType dtypeAttrOr(const InferContext &ctx, DType fallback) {
  if (!ctx.node().hasAttr("dtype")) return fallback;
  return dtypeFromOnnx(static_cast<int>(ctx.node().getInt("dtype"))).value_or(fallback);
}

// EyeLike and the random *Like ops: the input's shape, the dtype attribute.
Status inferLike(InferContext &ctx) {
  ctx.setOutput(0, dtypeAttrOr(ctx, ctx.inputDType(0)), ctx.inputShape(0));
  return Status::success();
}

} // namespace

void registerTensorInference(InferTable &t) {
  t.add(OpKind::Gather, inferGather);
  t.add(OpKind::GatherElements, inferGatherElements);
  t.add(OpKind::GatherND, inferGatherNd);
  t.add(OpKind::ScatterElements, inferSameAsInput);
  t.add(OpKind::ScatterND, inferSameAsInput);
  t.add(OpKind::Range, inferRange);
  t.add(OpKind::OneHot, inferOneHot);
  t.add(OpKind::NonZero, inferNonZero);
  t.add(OpKind::Compress, inferCompress);
  t.add(OpKind::Trilu, inferSameAsInput);
  t.add(OpKind::ReverseSequence, inferSameAsInput);
  t.add(OpKind::Unique, inferUnique);
  t.add(OpKind::EyeLike, inferLike);
  t.add(OpKind::RandomUniformLike, inferLike);
  t.add(OpKind::RandomNormalLike, inferLike);
  t.add(OpKind::Bernoulli, inferLike);
}

} // namespace kiln
