// Type and shape inference for the ops of ir/ops/reduce.def: reductions over
// axes, arg-reductions, the softmax family, CumSum, TopK and the two loss ops.
// Where a result depends on a run-time value (non-constant Reduce axes or TopK
// k) the affected dims, or the rank, become unknown rather than guessed.
#include "ir/infer/families.h"
#include "ir/infer/infer.h"

namespace kiln {

namespace {

Expected<int64_t> axisFor(const InferContext &ctx, int64_t axis, int64_t rank) {
  auto a = normalizeAxis(axis, rank);
  if (!a.ok()) return ctx.error(a.error().message);
  return *a;
}

// ---- Reduce* -------------------------------------------------------------------

// The output when the axes are not known before run time: with keepdims the
// rank stays and each dim is 1 or unchanged (1 only where it already is 1);
// without, the rank drops by the number of axes when the axes input's length
// is static.
Shape reduceShapeUnknownAxes(const InferContext &ctx, const Shape &in, bool keepdims) {
  if (!in.rankKnown) return Shape::unranked();
  if (keepdims) {
    Shape out = in;
    for (Dim &d : out.dims)
      if (!(d.isStatic() && d.value() == 1)) d = Dim::unknown();
    return out;
  }
  const Shape &axesShape = ctx.inputShape(1);
  if (axesShape.rankKnown && axesShape.rank() == 1 && axesShape.dims[0].isStatic() &&
      axesShape.dims[0].value() > 0 && axesShape.dims[0].value() <= in.rank())
    return Shape(std::vector<Dim>(in.rank() - axesShape.dims[0].value(), Dim::unknown()));
  return Shape::unranked();
}

Status inferReduce(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  bool keepdims = ctx.node().getInt("keepdims") != 0;
  bool noop = ctx.node().getInt("noop_with_empty_axes") != 0;
  std::vector<int64_t> axes;
  if (ctx.has(1)) {
    auto constAxes = ctx.constantInts(1);
    const Shape &axesShape = ctx.inputShape(1);
    bool staticallyEmpty = axesShape.rankKnown && axesShape.rank() == 1 &&
                           axesShape.dims[0].isStatic() && axesShape.dims[0].value() == 0;
    if (!constAxes && !staticallyEmpty) {
      ctx.setOutput(0, dtype, reduceShapeUnknownAxes(ctx, in, keepdims));
      return Status::success();
    }
    if (constAxes) axes = *constAxes;
  }
  if (axes.empty() && noop) {
    ctx.setOutput(0, dtype, in);
    return Status::success();
  }
  if (!in.rankKnown) {
    // Reducing everything without keepdims gives a scalar whatever the rank.
    ctx.setOutput(0, dtype, axes.empty() && !keepdims ? Shape() : Shape::unranked());
    return Status::success();
  }
  std::vector<bool> reduced(in.rank(), axes.empty());
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t ax, axisFor(ctx, a, in.rank()));
    reduced[ax] = true;
  }
  Shape out;
  for (int64_t i = 0; i < in.rank(); ++i) {
    if (!reduced[i])
      out.dims.push_back(in.dims[i]);
    else if (keepdims)
      out.dims.push_back(Dim(1));
  }
  ctx.setOutput(0, dtype, std::move(out));
  return Status::success();
}

// ---- ArgMax / ArgMin, softmax family, CumSum ------------------------------------

Status inferArgReduce(InferContext &ctx) {
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    ctx.setOutput(0, DType::I64, Shape::unranked());
    return Status::success();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, axisFor(ctx, ctx.node().getInt("axis"), in.rank()));
  Shape out = in;
  if (ctx.node().getInt("keepdims") != 0)
    out.dims[axis] = Dim(1);
  else
    out.dims.erase(out.dims.begin() + axis);
  ctx.setOutput(0, DType::I64, std::move(out));
  return Status::success();
}

// Softmax, LogSoftmax, Hardmax: the input's type; the axis must exist.
Status inferAlongAxis(InferContext &ctx) {
  const Shape &in = ctx.inputShape(0);
  if (in.rankKnown) KILN_RETURN_IF_ERROR(axisFor(ctx, ctx.node().getInt("axis"), in.rank()));
  ctx.setOutput(0, ctx.inputType(0));
  return Status::success();
}

Status inferCumSum(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputType(0));
  return Status::success();
}

// ---- TopK --------------------------------------------------------------------------

Status inferTopK(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    ctx.setOutput(0, dtype, Shape::unranked());
    ctx.setOutput(1, DType::I64, Shape::unranked());
    return Status::success();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, axisFor(ctx, ctx.node().getInt("axis"), in.rank()));
  Shape out = in;
  auto k = ctx.constantInts(1);
  if (k && k->size() == 1) {
    Dim d = in.dims[axis];
    if ((*k)[0] < 0 || (d.isStatic() && (*k)[0] > d.value()))
      return ctx.error("k = ", (*k)[0], " is out of range for axis ", axis, " of size ", d.str());
    out.dims[axis] = Dim((*k)[0]);
  } else {
    out.dims[axis] = Dim::unknown();
  }
  ctx.setOutput(0, dtype, out);
  ctx.setOutput(1, DType::I64, out);
  return Status::success();
}

// ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ----------------------------

// The loss: scalar unless reduction is "none", where it has the target's
// shape ([N, d1..dk], also derivable from the input by dropping the class dim).
Shape lossShape(const InferContext &ctx) {
  if (ctx.node().getString("reduction") != "none") return Shape();
  const Shape &target = ctx.inputShape(1);
  if (target.rankKnown) return target;
  Shape in = ctx.inputShape(0);
  if (!in.rankKnown || in.rank() < 2) return Shape::unranked();
  in.dims.erase(in.dims.begin() + 1);
  return in;
}

Status inferNllLoss(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), lossShape(ctx));
  return Status::success();
}

Status inferSceLoss(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), lossShape(ctx));
  if (ctx.numOutputs() > 1) ctx.setOutput(1, ctx.inputType(0)); // log_prob
  return Status::success();
}

} // namespace

void registerReduceInference(InferTable &t) {
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin,
                    OpKind::ReduceProd, OpKind::ReduceL1, OpKind::ReduceL2, OpKind::ReduceLogSum,
                    OpKind::ReduceLogSumExp, OpKind::ReduceSumSquare})
    t.add(op, inferReduce);
  t.add(OpKind::ArgMax, inferArgReduce);
  t.add(OpKind::ArgMin, inferArgReduce);
  t.add(OpKind::Softmax, inferAlongAxis);
  t.add(OpKind::LogSoftmax, inferAlongAxis);
  t.add(OpKind::Hardmax, inferAlongAxis);
  t.add(OpKind::CumSum, inferCumSum);
  t.add(OpKind::TopK, inferTopK);
  t.add(OpKind::NegativeLogLikelihoodLoss, inferNllLoss);
  t.add(OpKind::SoftmaxCrossEntropyLoss, inferSceLoss);
}

} // namespace kiln
