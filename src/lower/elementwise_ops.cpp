#include "lower/elementwise_ops.h"

#include <cmath>

namespace kiln::lower {

namespace {

using kir::Opcode;

DType inputDType(const Node &n, int i) { return n.input(i)->type().dtype(); }
DType outputDType(const Node &n) { return n.output(0)->type().dtype(); }

bool isFloatOnlyUnary(OpKind op) {
  switch (op) {
  case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: case OpKind::Sqrt:
  case OpKind::Reciprocal: case OpKind::Exp: case OpKind::Log: case OpKind::Sigmoid:
  case OpKind::Tanh: case OpKind::Erf: case OpKind::Relu: case OpKind::LeakyRelu:
  case OpKind::Elu: case OpKind::Selu: case OpKind::Celu: case OpKind::HardSigmoid:
  case OpKind::HardSwish: case OpKind::Softplus: case OpKind::Softsign:
  case OpKind::ThresholdedRelu: case OpKind::Mish: case OpKind::Gelu: case OpKind::IsNaN:
    return true;
  default:
    return false;
  }
}

// Ops whose scalar expansion below works for any lowerable dtype.
bool isAnyTypeOp(OpKind op) {
  switch (op) {
  case OpKind::Abs: case OpKind::Neg: case OpKind::Sign: case OpKind::Add: case OpKind::Sub:
  case OpKind::Mul: case OpKind::Max: case OpKind::Min: case OpKind::Sum:
  case OpKind::Equal: case OpKind::Greater: case OpKind::GreaterOrEqual: case OpKind::Less:
  case OpKind::LessOrEqual: case OpKind::Where: case OpKind::Clip: case OpKind::Cast:
  case OpKind::CastLike: case OpKind::Identity: case OpKind::Dropout: case OpKind::PRelu:
    return true;
  default:
    return false;
  }
}

} // namespace

bool isLowerableDType(DType t) {
  switch (t) {
  case DType::F32: case DType::F64: case DType::I8: case DType::U8: case DType::I16:
  case DType::U16: case DType::I32: case DType::U32: case DType::I64: case DType::U64:
  case DType::Bool:
  // 16-bit floats are storage types of the Kernel IR: each op computes in
  // f32 and rounds to the type, which is ONNX's per-op f16 arithmetic.
  case DType::F16: case DType::BF16:
    return true;
  default:
    return false;
  }
}

bool canLowerElementwise(const Node &n) {
  if (n.numOutputs() != 1 || !n.output(0)) return false;
  for (const Value *v : n.inputs())
    if (v && (!v->type().isTensor() || !isLowerableDType(v->type().dtype()))) return false;
  const Type &out = n.output(0)->type();
  if (!out.isTensor() || !isLowerableDType(out.dtype()) || !n.input(0)) return false;
  const DType in0 = inputDType(n, 0);
  const OpKind op = n.op();
  if (isFloatOnlyUnary(op)) return isFloat(in0);
  if (isAnyTypeOp(op)) {
    if (op == OpKind::Dropout) return n.numInputs() == 1 || !n.input(2); // inference only
    return true;
  }
  switch (op) {
  // Integer division and remainder trap on a zero divisor: left to the
  // interpreter's kernels, which report it.
  case OpKind::Div: return isFloat(in0);
  case OpKind::Mean: return true;
  case OpKind::Pow: return isFloat(in0) && n.input(1) && isFloat(inputDType(n, 1));
  case OpKind::Mod: return n.getInt("fmod") && isFloat(in0);
  case OpKind::Not: case OpKind::And: case OpKind::Or: case OpKind::Xor: return in0 == DType::Bool;
  default: return false;
  }
}

namespace {

class Scalar {
public:
  Scalar(kir::KernelBuilder &b, DType t) : b_(b), t_(t) {}
  int c(double v) { return b_.constant(t_, v); }
  int un(Opcode op, int a) { return b_.unary(op, t_, a); }
  int bin(Opcode op, int a, int b) { return b_.binary(op, t_, a, b); }
  int cmp(Opcode op, int a, int b) { return b_.compare(op, t_, a, b); }
  int sel(int cond, int a, int b) { return b_.select(t_, cond, a, b); }
  int max(int a, int b) { return bin(Opcode::Max, a, b); }
  int min(int a, int b) { return bin(Opcode::Min, a, b); }
  int add(int a, int b) { return bin(Opcode::Add, a, b); }
  int mul(int a, int b) { return bin(Opcode::Mul, a, b); }
  int sub(int a, int b) { return bin(Opcode::Sub, a, b); }
  // log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|).
  int softplus(int x) {
    int e = un(Opcode::Exp, un(Opcode::Neg, un(Opcode::Abs, x)));
    return add(max(x, c(0)), un(Opcode::Log, add(c(1), e)));
  }

private:
  kir::KernelBuilder &b_;
  DType t_;
};

Opcode compareOpcode(OpKind op) {
  switch (op) {
  case OpKind::Equal: return Opcode::Eq;
  case OpKind::Greater: return Opcode::Gt;
  case OpKind::GreaterOrEqual: return Opcode::Ge;
  case OpKind::Less: return Opcode::Lt;
  default: return Opcode::Le;
  }
}

// ONNX integer Mod (fmod = 0): the remainder takes the divisor's sign.
int floorMod(kir::KernelBuilder &b, DType t, int a, int d) {
  int r = b.binary(Opcode::Mod, t, a, d);
  if (isUnsignedInt(t)) return r;
  int zero = b.constant(t, 0);
  int nonzero = b.compare(Opcode::Ne, t, r, zero);
  int signsDiffer = b.binary(Opcode::Xor, DType::Bool, b.compare(Opcode::Lt, t, r, zero),
                             b.compare(Opcode::Lt, t, d, zero));
  int fix = b.binary(Opcode::And, DType::Bool, nonzero, signsDiffer);
  return b.select(t, fix, b.binary(Opcode::Add, t, r, d), r);
}

} // namespace

Expected<int> emitElementwise(kir::KernelBuilder &b, const Node &n, const std::vector<int> &in) {
  const DType t = inputDType(n, 0);
  const DType out = outputDType(n);
  Scalar s(b, t);
  const int x = in[0];
  auto attrF = [&](const char *name) { return static_cast<double>(n.getFloat(name)); };
  switch (n.op()) {
  case OpKind::Identity: case OpKind::Dropout: return x;
  case OpKind::Abs: return s.un(Opcode::Abs, x);
  case OpKind::Neg: return s.un(Opcode::Neg, x);
  case OpKind::Floor: return s.un(Opcode::Floor, x);
  case OpKind::Ceil: return s.un(Opcode::Ceil, x);
  case OpKind::Round: return s.un(Opcode::Round, x);
  case OpKind::Sqrt: return s.un(Opcode::Sqrt, x);
  case OpKind::Reciprocal: return s.un(Opcode::Recip, x);
  case OpKind::Exp: return s.un(Opcode::Exp, x);
  case OpKind::Log: return s.un(Opcode::Log, x);
  case OpKind::Sigmoid: return s.un(Opcode::Sigmoid, x);
  case OpKind::Tanh: return s.un(Opcode::Tanh, x);
  case OpKind::Erf: return s.un(Opcode::Erf, x);
  case OpKind::IsNaN: return b.compare(Opcode::Ne, t, x, x);
  case OpKind::Not: return b.unary(Opcode::Not, DType::Bool, x);
  case OpKind::Sign: {
    int pos = s.cmp(Opcode::Gt, x, s.c(0)), neg = s.cmp(Opcode::Lt, x, s.c(0));
    return s.sel(pos, s.c(1), s.sel(neg, s.c(-1), s.c(0)));
  }
  case OpKind::Relu: return s.max(x, s.c(0));
  case OpKind::LeakyRelu:
    return s.sel(s.cmp(Opcode::Lt, x, s.c(0)), s.mul(x, s.c(attrF("alpha"))), x);
  case OpKind::PRelu: return s.sel(s.cmp(Opcode::Lt, x, s.c(0)), s.mul(x, in[1]), x);
  case OpKind::ThresholdedRelu: return s.sel(s.cmp(Opcode::Gt, x, s.c(attrF("alpha"))), x, s.c(0));
  case OpKind::Elu: {
    int em1 = s.sub(s.un(Opcode::Exp, x), s.c(1));
    return s.sel(s.cmp(Opcode::Lt, x, s.c(0)), s.mul(s.c(attrF("alpha")), em1), x);
  }
  case OpKind::Selu: {
    const double alpha = attrF("alpha"), gamma = attrF("gamma");
    int negative = s.sub(s.mul(s.c(alpha), s.un(Opcode::Exp, x)), s.c(alpha));
    return s.mul(s.c(gamma), s.sel(s.cmp(Opcode::Le, x, s.c(0)), negative, x));
  }
  case OpKind::Celu: {
    const double alpha = attrF("alpha");
    int e = s.sub(s.un(Opcode::Exp, s.bin(Opcode::Div, x, s.c(alpha))), s.c(1));
    return s.add(s.max(x, s.c(0)), s.min(s.c(0), s.mul(s.c(alpha), e)));
  }
  case OpKind::HardSigmoid:
    return s.max(s.c(0), s.min(s.c(1), s.add(s.mul(x, s.c(attrF("alpha"))), s.c(attrF("beta")))));
  case OpKind::HardSwish:
    return s.mul(x, s.max(s.c(0), s.min(s.c(1), s.add(s.mul(x, s.c(1.0 / 6)), s.c(0.5)))));
  case OpKind::Softplus: return s.softplus(x);
  case OpKind::Softsign: return s.bin(Opcode::Div, x, s.add(s.c(1), s.un(Opcode::Abs, x)));
  case OpKind::Mish: return s.mul(x, s.un(Opcode::Tanh, s.softplus(x)));
  case OpKind::Gelu: {
    if (n.getString("approximate") == "tanh") {
      int cube = s.mul(s.mul(x, x), x);
      int inner = s.mul(s.c(std::sqrt(2.0 / M_PI)), s.add(x, s.mul(s.c(0.044715), cube)));
      return s.mul(s.mul(s.c(0.5), x), s.add(s.c(1), s.un(Opcode::Tanh, inner)));
    }
    int e = s.un(Opcode::Erf, s.mul(x, s.c(M_SQRT1_2)));
    return s.mul(s.mul(s.c(0.5), x), s.add(s.c(1), e));
  }
  case OpKind::Add: return s.add(x, in[1]);
  case OpKind::Sub: return s.sub(x, in[1]);
  case OpKind::Mul: return s.mul(x, in[1]);
  case OpKind::Div: return s.bin(Opcode::Div, x, in[1]);
  case OpKind::Pow: return s.bin(Opcode::Pow, x, in[1]);
  case OpKind::Mod:
    return isFloat(t) ? s.bin(Opcode::Mod, x, in[1]) : floorMod(b, t, x, in[1]);
  case OpKind::And: return b.binary(Opcode::And, DType::Bool, x, in[1]);
  case OpKind::Or: return b.binary(Opcode::Or, DType::Bool, x, in[1]);
  case OpKind::Xor: return b.binary(Opcode::Xor, DType::Bool, x, in[1]);
  case OpKind::Equal: case OpKind::Greater: case OpKind::GreaterOrEqual: case OpKind::Less:
  case OpKind::LessOrEqual:
    return s.cmp(compareOpcode(n.op()), x, in[1]);
  case OpKind::Max: case OpKind::Min: case OpKind::Sum: case OpKind::Mean: {
    Opcode op = n.op() == OpKind::Max ? Opcode::Max : n.op() == OpKind::Min ? Opcode::Min : Opcode::Add;
    int acc = x;
    for (size_t i = 1; i < in.size(); ++i) acc = s.bin(op, acc, in[i]);
    if (n.op() == OpKind::Mean) acc = s.bin(Opcode::Div, acc, s.c(static_cast<double>(in.size())));
    return acc;
  }
  case OpKind::Where: {
    Scalar v(b, out);
    return v.sel(x, in[1], in[2]);
  }
  case OpKind::Clip: {
    int r = x;
    if (in.size() > 1 && in[1] >= 0) r = s.max(r, in[1]);
    if (in.size() > 2 && in[2] >= 0) r = s.min(r, in[2]);
    return r;
  }
  case OpKind::Cast: case OpKind::CastLike: return b.cast(out, t, x);
  default:
    return makeError(n.describe(), ": no elementwise lowering");
  }
}

} // namespace kiln::lower
