// Type and shape inference for the ops of ir/ops/elementwise.def. Unary ops
// keep their input's type; broadcasting ops take the numpy broadcast of their
// inputs' (possibly symbolic) shapes, which fails only when two static dims
// clash; comparisons, logic and the IsNaN/IsInf tests give bool; Cast and
// CastLike change only the dtype; Identity passes any type through.
#include "ir/infer/families.h"
#include "ir/infer/infer.h"

namespace kiln {

namespace {

// The broadcast of inputs [first, numInputs), skipping absent ones.
Expected<Shape> broadcastInputs(const InferContext &ctx, int first) {
  std::optional<Shape> shape;
  for (int i = first; i < ctx.numInputs(); ++i) {
    if (!ctx.has(i)) continue;
    if (!shape) {
      shape = ctx.inputShape(i);
      continue;
    }
    auto s = broadcastShapes(*shape, ctx.inputShape(i));
    if (!s.ok()) return ctx.error(s.error().message);
    shape = std::move(*s);
  }
  return shape ? *shape : Shape::unranked();
}

// Output 0 has input 0's dtype and shape.
Status sameAsInput(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), ctx.inputShape(0));
  return Status::success();
}

// Output 0 is bool with input 0's shape.
Status boolOfInputShape(InferContext &ctx) {
  ctx.setOutput(0, DType::Bool, ctx.inputShape(0));
  return Status::success();
}

// Output 0 is the broadcast of all inputs, with input 0's dtype.
Status broadcastLikeInput0(InferContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Shape s, broadcastInputs(ctx, 0));
  ctx.setOutput(0, ctx.inputDType(0), std::move(s));
  return Status::success();
}

// Output 0 is the broadcast of all inputs, bool.
Status broadcastBool(InferContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Shape s, broadcastInputs(ctx, 0));
  ctx.setOutput(0, DType::Bool, std::move(s));
  return Status::success();
}

Status inferWhere(InferContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Shape s, broadcastInputs(ctx, 0));
  ctx.setOutput(0, ctx.inputDType(1), std::move(s));
  return Status::success();
}

Status inferCast(InferContext &ctx) {
  int64_t code = ctx.node().getInt("to");
  std::optional<DType> to = dtypeFromOnnx(static_cast<int>(code));
  if (!to) return ctx.error("cast to ONNX dtype ", code, " is not supported");
  ctx.setOutput(0, *to, ctx.inputShape(0));
  return Status::success();
}

Status inferCastLike(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(1), ctx.inputShape(0));
  return Status::success();
}

// Identity passes sequences and optionals through as well as tensors.
Status inferIdentity(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputType(0));
  return Status::success();
}

Status inferDropout(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), ctx.inputShape(0));
  if (ctx.numOutputs() > 1) ctx.setOutput(1, DType::Bool, ctx.inputShape(0));
  return Status::success();
}

} // namespace

void registerElementwiseInference(InferTable &t) {
  for (OpKind op :
       {OpKind::Abs,       OpKind::Neg,        OpKind::Floor,      OpKind::Ceil,
        OpKind::Round,     OpKind::Sqrt,       OpKind::Reciprocal, OpKind::Exp,
        OpKind::Log,       OpKind::Sin,        OpKind::Cos,        OpKind::Tan,
        OpKind::Asin,      OpKind::Acos,       OpKind::Atan,       OpKind::Sinh,
        OpKind::Cosh,      OpKind::Asinh,      OpKind::Acosh,      OpKind::Atanh,
        OpKind::Sigmoid,   OpKind::Tanh,       OpKind::Erf,        OpKind::Sign,
        OpKind::Not,       OpKind::BitwiseNot, OpKind::Relu,       OpKind::LeakyRelu,
        OpKind::Elu,       OpKind::Selu,       OpKind::Celu,       OpKind::HardSigmoid,
        OpKind::HardSwish, OpKind::Softplus,   OpKind::Softsign,   OpKind::ThresholdedRelu,
        OpKind::Shrink,    OpKind::Mish,       OpKind::Gelu,       OpKind::Clip})
    t.add(op, sameAsInput);
  t.add(OpKind::IsNaN, boolOfInputShape);
  t.add(OpKind::IsInf, boolOfInputShape);
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Mod,
                    OpKind::BitShift, OpKind::BitwiseAnd, OpKind::BitwiseOr, OpKind::BitwiseXor,
                    OpKind::PRelu, OpKind::Max, OpKind::Min, OpKind::Sum, OpKind::Mean})
    t.add(op, broadcastLikeInput0);
  for (OpKind op : {OpKind::And, OpKind::Or, OpKind::Xor, OpKind::Equal, OpKind::Greater,
                    OpKind::GreaterOrEqual, OpKind::Less, OpKind::LessOrEqual})
    t.add(op, broadcastBool);
  t.add(OpKind::Where, inferWhere);
  t.add(OpKind::Cast, inferCast);
  t.add(OpKind::CastLike, inferCastLike);
  t.add(OpKind::Identity, inferIdentity);
  t.add(OpKind::Dropout, inferDropout);
}

} // namespace kiln
