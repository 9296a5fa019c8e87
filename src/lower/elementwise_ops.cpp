#include "lower/elementwise_ops.h"

#include "lower/elementwise_math.h"

#include <cmath>
#include <optional>

namespace kiln::lower {

namespace {

using kir::Opcode;

DType dtypeOf(const Value *v) {
  return v->type().dtype();
}

// Which element types an op's first input takes (the interpreter's
// dispatchFloat / dispatchArith / dispatchInt and binary<Types::...>).
enum class Kinds { Float, Numeric, Int, Unsigned, Bool, Any };

bool inKinds(Kinds k, DType t) {
  switch (k) {
  case Kinds::Float:
    return isFloat(t);
  case Kinds::Numeric:
    return isNumeric(t);
  case Kinds::Int:
    return isInt(t);
  case Kinds::Unsigned:
    return isUnsignedInt(t);
  case Kinds::Bool:
    return t == DType::Bool;
  case Kinds::Any:
    return t != DType::String;
  }
  return false;
}

// The dtype rule of an op: the kinds of input 0, and whether every other
// present input must have input 0's dtype.
struct Rule {
  Kinds kinds;
  bool sameTypes;
};

bool isQuantizeOp(OpKind op) {
  return op == OpKind::QuantizeLinear || op == OpKind::DequantizeLinear;
}

// One value, known now: a per-tensor scale or zero point.
bool isStaticScalar(const Value *v) {
  if (!v || !v->type().isTensor()) return false;
  const Shape &s = v->type().shape();
  if (!s.rankKnown || s.rank() > 1) return false;
  return s.rank() == 0 || (s.dims[0].isStatic() && s.dims[0].value() == 1);
}

bool isQuantizedDType(DType t) {
  return t == DType::U8 || t == DType::I8 || t == DType::U16 || t == DType::I16;
}

std::optional<Rule> ruleOf(OpKind op) {
  switch (op) {
  case OpKind::Floor:
  case OpKind::Ceil:
  case OpKind::Round:
  case OpKind::Sqrt:
  case OpKind::Reciprocal:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Tan:
  case OpKind::Asin:
  case OpKind::Acos:
  case OpKind::Atan:
  case OpKind::Sinh:
  case OpKind::Cosh:
  case OpKind::Asinh:
  case OpKind::Acosh:
  case OpKind::Atanh:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Erf:
  case OpKind::IsNaN:
  case OpKind::IsInf:
  case OpKind::LeakyRelu:
  case OpKind::Elu:
  case OpKind::Selu:
  case OpKind::Celu:
  case OpKind::HardSigmoid:
  case OpKind::HardSwish:
  case OpKind::Softplus:
  case OpKind::Softsign:
  case OpKind::ThresholdedRelu:
  case OpKind::Mish:
  case OpKind::Gelu:
    return Rule{Kinds::Float, true};
  case OpKind::Abs:
  case OpKind::Neg:
  case OpKind::Sign:
  case OpKind::Relu:
  case OpKind::Shrink:
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Mod:
  case OpKind::PRelu:
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Clip:
    return Rule{Kinds::Numeric, true};
  case OpKind::Pow:
    return Rule{Kinds::Numeric, false}; // any numeric exponent
  case OpKind::BitwiseNot:
  case OpKind::BitwiseAnd:
  case OpKind::BitwiseOr:
  case OpKind::BitwiseXor:
    return Rule{Kinds::Int, true};
  case OpKind::BitShift:
    return Rule{Kinds::Unsigned, true};
  case OpKind::Not:
  case OpKind::And:
  case OpKind::Or:
  case OpKind::Xor:
    return Rule{Kinds::Bool, true};
  case OpKind::Equal:
  case OpKind::Greater:
  case OpKind::GreaterOrEqual:
  case OpKind::Less:
  case OpKind::LessOrEqual:
    return Rule{Kinds::Any, true};
  case OpKind::Where:
    return Rule{Kinds::Bool, false}; // x and y checked apart
  case OpKind::Cast:
  case OpKind::CastLike:
  case OpKind::Identity:
  case OpKind::Dropout:
    return Rule{Kinds::Any, false};
  case OpKind::QuantizeLinear:
    return Rule{Kinds::Float, false};
  case OpKind::DequantizeLinear:
    return Rule{Kinds::Int, false};
  default:
    return std::nullopt;
  }
}

Status formError(const Node &n, const std::string &what) {
  return makeError(n.describe(), ": no elementwise lowering for ", what);
}

std::string typesOf(const Node &n) {
  std::string s;
  for (const Value *v : n.inputs())
    if (v) s += (s.empty() ? "" : ", ") + std::string(dtypeName(dtypeOf(v)));
  return s;
}

} // namespace

bool isLowerableDType(DType t) {
  return t != DType::String;
}

bool isElementwiseOp(OpKind op) {
  // Quantize/Dequantize are elementwise only in their per-tensor form (see
  // checkElementwiseForm): alone they keep their own lowering, which takes
  // every form; inside a fused chain the elementwise one saves a pass.
  return ruleOf(op).has_value() && !isQuantizeOp(op);
}

Status checkElementwiseForm(const Node &n) {
  std::optional<Rule> rule = ruleOf(n.op());
  if (!rule) return formError(n, "this op");
  if (!n.input(0) || !n.output(0)) return formError(n, "a node without input 0 or output 0");
  // Dropout's ratio and training_mode are scalars the lowering reads on the
  // host: they need not be lowerable.
  const int operands = n.op() == OpKind::Dropout ? 1 : n.numInputs();
  for (int i = 0; i < operands; ++i)
    if (const Value *v = n.input(i); v && (!v->type().isTensor() || !isLowerableDType(dtypeOf(v))))
      return formError(n, "input " + std::to_string(i) + " of type " + v->type().str());
  for (const Value *v : n.outputs())
    if (v && (!v->type().isTensor() || !isLowerableDType(dtypeOf(v))))
      return formError(n, "an output of type " + v->type().str());
  const DType t = dtypeOf(n.input(0));
  if (!inKinds(rule->kinds, t)) return formError(n, "dtype " + typesOf(n));
  if (rule->sameTypes)
    for (const Value *v : n.inputs())
      if (v && dtypeOf(v) != t) return formError(n, "mixed dtypes " + typesOf(n));
  switch (n.op()) {
  case OpKind::Pow:
    if (!n.input(1) || !isNumeric(dtypeOf(n.input(1)))) return formError(n, "dtypes " + typesOf(n));
    break;
  case OpKind::Where:
    if (!n.input(1) || !n.input(2) || dtypeOf(n.input(1)) != dtypeOf(n.input(2)))
      return formError(n, "dtypes " + typesOf(n));
    break;
  case OpKind::Celu:
    if (n.getFloat("alpha") == 0) return formError(n, "alpha 0");
    break;
  case OpKind::Gelu:
    if (n.getString("approximate") != "none" && n.getString("approximate") != "tanh")
      return formError(n, "approximate '" + n.getString("approximate") + "'");
    break;
  case OpKind::BitShift:
    if (n.getString("direction") != "LEFT" && n.getString("direction") != "RIGHT")
      return formError(n, "direction '" + n.getString("direction") + "'");
    break;
  case OpKind::Identity:
  case OpKind::Dropout:
    if (dtypeOf(n.output(0)) != t)
      return formError(n, "output dtype " + std::string(dtypeName(dtypeOf(n.output(0)))));
    break;
  case OpKind::CastLike:
    if (!n.input(1) || dtypeOf(n.output(0)) != dtypeOf(n.input(1)))
      return formError(n, "output dtype " + std::string(dtypeName(dtypeOf(n.output(0)))));
    break;
  case OpKind::QuantizeLinear:
  case OpKind::DequantizeLinear: {
    // Per tensor only: one scale and zero point, no blocks.
    const Value *scale = n.input(1), *zp = n.input(2);
    if (n.getInt("block_size") > 0 || !isStaticScalar(scale) || !isFloat(dtypeOf(scale)) ||
        (zp && !isStaticScalar(zp)))
      return formError(n, "a scale or zero point that is not one value");
    const bool quantize = n.op() == OpKind::QuantizeLinear;
    const DType q = quantize ? dtypeOf(n.output(0)) : t;
    if (!isQuantizedDType(q) || (zp && dtypeOf(zp) != q) ||
        (!quantize && dtypeOf(n.output(0)) != dtypeOf(scale)))
      return formError(n, "dtypes " + typesOf(n));
    break;
  }
  default:
    break;
  }
  return Status::success();
}

std::vector<std::string> elementwiseErrors(const Node &n) {
  if (!n.input(0) || !n.input(0)->type().isTensor()) return {};
  const DType t = dtypeOf(n.input(0));
  if (!isInt(t)) return {};
  switch (n.op()) {
  case OpKind::Div:
    return {"integer division by zero"};
  case OpKind::Mod:
    return {"integer modulo by zero"};
  case OpKind::Pow:
    if (n.input(1) && isSignedInt(dtypeOf(n.input(1))))
      return {"integer 0 raised to a negative power"};
    return {};
  default:
    return {};
  }
}

bool canLowerElementwise(const Node &n) {
  if (n.numOutputs() != 1) return false;
  if (n.op() == OpKind::Dropout && n.input(2)) return false; // training_mode: a run-time choice
  // CastLike's second input gives a dtype, not elements that broadcast: a
  // fused loop would index it like an operand.
  if (n.op() == OpKind::CastLike) return false;
  return checkElementwiseForm(n).ok() && elementwiseErrors(n).empty();
}

Expected<int> emitElementwise(kir::KernelBuilder &b, const Node &n, const std::vector<int> &in,
                              const RaiseFn &raise) {
  KILN_RETURN_IF_ERROR(checkElementwiseForm(n));
  if (!elementwiseErrors(n).empty() && !raise)
    return makeError(n.describe(), ": its integer form needs run-time error checks");
  return emitScalarMath(b, n, in, raise);
}

} // namespace kiln::lower
