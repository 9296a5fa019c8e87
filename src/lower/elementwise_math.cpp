#include "lower/elementwise_math.h"
#include "lower/quant_lowering.h"

#include "support/erfc_poly.h"

#include <cmath>
#include <limits>

namespace kiln::lower {

namespace {

using kir::Opcode;

bool isHalf(DType t) {
  return t == DType::F16 || t == DType::BF16;
}
// The type an op's arithmetic runs in: 16-bit floats widen to f32, as the
// interpreter's ComputeType does.
DType computeTypeOf(DType t) {
  return isHalf(t) ? DType::F32 : t;
}
DType dtypeOf(const Value *v) {
  return v->type().dtype();
}

// Instructions of one type, named as the interpreter's expressions read.
class Scalar {
public:
  Scalar(kir::KernelBuilder &b, DType t) : b_(b), t_(t) {}
  int c(double v) { return b_.constant(t_, v); }
  int un(Opcode op, int a) { return b_.unary(op, t_, a); }
  int bin(Opcode op, int a, int b) { return b_.binary(op, t_, a, b); }
  int cmp(Opcode op, int a, int b) { return b_.compare(op, t_, a, b); }
  int sel(int cond, int a, int b) { return b_.select(t_, cond, a, b); }
  int add(int a, int b) { return bin(Opcode::Add, a, b); }
  int sub(int a, int b) { return bin(Opcode::Sub, a, b); }
  int mul(int a, int b) { return bin(Opcode::Mul, a, b); }
  int div(int a, int b) { return bin(Opcode::Div, a, b); }
  int lt(int a, int b) { return cmp(Opcode::Lt, a, b); }
  int gt(int a, int b) { return cmp(Opcode::Gt, a, b); }
  int eq(int a, int b) { return cmp(Opcode::Eq, a, b); }
  // std::max(a, b) and std::min(a, b), whose operand order decides what a
  // NaN gives (the interpreter's clamps rely on it).
  int stdMax(int a, int b) { return sel(lt(a, b), b, a); }
  int stdMin(int a, int b) { return sel(lt(b, a), b, a); }

  // e^x - 1, accurate near 0 (Kahan: (u - 1) * x / log(u) corrects the
  // rounding of u = e^x); exact at the ends (u = 1, u - 1 = -1, u = inf).
  int expm1(int x) {
    int u = un(Opcode::Exp, x);
    int um1 = sub(u, c(1));
    int r = div(mul(um1, x), un(Opcode::Log, u));
    r = sel(eq(um1, c(-1)), c(-1), r);
    r = sel(eq(u, c(1)), x, r);
    return sel(eq(u, c(INFINITY)), u, r);
  }
  // log(1 + y), accurate near 0 (the same correction).
  int log1p(int y) {
    int u = add(c(1), y);
    int r = div(mul(un(Opcode::Log, u), y), sub(u, c(1)));
    r = sel(eq(u, c(1)), y, r);
    return sel(eq(u, c(INFINITY)), u, r);
  }
  // x > 0 ? x + log1p(e^-x) : log1p(e^x), both branches sharing e^-|x|.
  int softplus(int x) {
    int l = log1p(un(Opcode::Exp, un(Opcode::Neg, un(Opcode::Abs, x))));
    return sel(gt(x, c(0)), add(x, l), l);
  }

private:
  kir::KernelBuilder &b_;
  DType t_;
};

Opcode compareOpcode(OpKind op) {
  switch (op) {
  case OpKind::Equal:
    return Opcode::Eq;
  case OpKind::Greater:
    return Opcode::Gt;
  case OpKind::GreaterOrEqual:
    return Opcode::Ge;
  case OpKind::Less:
    return Opcode::Lt;
  default:
    return Opcode::Le;
  }
}

Opcode unaryOpcode(OpKind op) {
  switch (op) {
  case OpKind::Floor:
    return Opcode::Floor;
  case OpKind::Ceil:
    return Opcode::Ceil;
  case OpKind::Round:
    return Opcode::Round; // half to even, as nearbyint
  case OpKind::Sqrt:
    return Opcode::Sqrt;
  case OpKind::Reciprocal:
    return Opcode::Recip;
  case OpKind::Exp:
    return Opcode::Exp;
  case OpKind::Log:
    return Opcode::Log;
  case OpKind::Sin:
    return Opcode::Sin;
  case OpKind::Cos:
    return Opcode::Cos;
  case OpKind::Tan:
    return Opcode::Tan;
  case OpKind::Asin:
    return Opcode::Asin;
  case OpKind::Acos:
    return Opcode::Acos;
  case OpKind::Atan:
    return Opcode::Atan;
  case OpKind::Sinh:
    return Opcode::Sinh;
  case OpKind::Cosh:
    return Opcode::Cosh;
  case OpKind::Asinh:
    return Opcode::Asinh;
  case OpKind::Acosh:
    return Opcode::Acosh;
  case OpKind::Atanh:
    return Opcode::Atanh;
  case OpKind::Sigmoid:
    return Opcode::Sigmoid;
  case OpKind::Tanh:
    return Opcode::Tanh;
  case OpKind::Erf:
    return Opcode::Erf;
  default:
    return Opcode::Const; // not a plain unary op
  }
}

// One node's expansion. Operands arrive in their storage types; numeric
// results are computed in the compute type and rounded back once.
class OpEmitter {
public:
  OpEmitter(kir::KernelBuilder &b, const Node &n, const std::vector<int> &in, const RaiseFn &raise)
      : b_(b), n_(n), in_(in), raise_(raise), t_(dtypeOf(n.input(0))), ct_(computeTypeOf(t_)),
        out_(dtypeOf(n.output(0))), s_(b, ct_) {}

  Expected<int> emit();

private:
  DType inType(int i) const { return dtypeOf(n_.input(i)); }
  // Operand i in the compute type of its own dtype.
  int arg(int i) {
    const DType t = inType(i);
    return isHalf(t) ? b_.cast(DType::F32, t, in_[size_t(i)]) : in_[size_t(i)];
  }
  // A compute-type result stored as input 0's dtype.
  int narrow(int v) { return isHalf(t_) ? b_.cast(t_, DType::F32, v) : v; }
  double attr(const char *name) const { return static_cast<double>(n_.getFloat(name)); }
  bool hasInput(int i) const { return i < int(in_.size()) && in_[size_t(i)] >= 0; }

  int logic();
  int compare();
  int isInf();
  Expected<int> numeric();
  int activation(int x);
  int sign(int x);
  int shrink(int x);
  int divide(int x, int y);
  int modulo(int x, int y);
  int floorMod(int r, int y);
  int variadic();
  int clip(int x);
  int power();
  int intPower(int base, int exponent);

  kir::KernelBuilder &b_;
  const Node &n_;
  const std::vector<int> &in_;
  const RaiseFn &raise_;
  DType t_, ct_, out_;
  Scalar s_;
};

Expected<int> OpEmitter::emit() {
  const int x = in_[0];
  switch (n_.op()) {
  case OpKind::Identity:
  case OpKind::Dropout:
    return x;
  case OpKind::Cast:
  case OpKind::CastLike:
    return out_ == t_ ? x : b_.cast(out_, t_, x);
  // One scale and zero point (elementwise_ops.cpp admits no other form).
  case OpKind::QuantizeLinear:
    return quant::quantizeElement(b_, out_, t_, x, inType(1), in_[1],
                                  hasInput(2) ? inType(2) : DType::U8, hasInput(2) ? in_[2] : -1);
  case OpKind::DequantizeLinear:
    return quant::dequantizeElement(b_, t_, x, inType(1), in_[1], hasInput(2) ? in_[2] : -1);
  case OpKind::Where:
    return b_.select(out_, x, in_[1], in_[2]);
  case OpKind::Not:
  case OpKind::And:
  case OpKind::Or:
  case OpKind::Xor:
  case OpKind::BitwiseNot:
  case OpKind::BitwiseAnd:
  case OpKind::BitwiseOr:
  case OpKind::BitwiseXor:
  case OpKind::BitShift:
    return logic();
  case OpKind::Equal:
  case OpKind::Greater:
  case OpKind::GreaterOrEqual:
  case OpKind::Less:
  case OpKind::LessOrEqual:
    return compare();
  case OpKind::IsNaN: {
    const int v = arg(0);
    return s_.cmp(Opcode::Ne, v, v);
  }
  case OpKind::IsInf:
    return isInf();
  case OpKind::Pow:
    return power();
  default:
    break;
  }
  KILN_ASSIGN_OR_RETURN(int r, numeric());
  return narrow(r);
}

int OpEmitter::logic() {
  const int x = in_[0];
  switch (n_.op()) {
  case OpKind::Not:
  case OpKind::BitwiseNot:
    return b_.unary(Opcode::Not, t_, x);
  case OpKind::And:
  case OpKind::BitwiseAnd:
    return b_.binary(Opcode::And, t_, x, in_[1]);
  case OpKind::Or:
  case OpKind::BitwiseOr:
    return b_.binary(Opcode::Or, t_, x, in_[1]);
  case OpKind::Xor:
  case OpKind::BitwiseXor:
    return b_.binary(Opcode::Xor, t_, x, in_[1]);
  default: // BitShift: shifts by the width or more give 0, as the interpreter's
    return b_.binary(n_.getString("direction") == "LEFT" ? Opcode::Shl : Opcode::Shr, t_, x,
                     in_[1]);
  }
}

int OpEmitter::compare() {
  const Opcode op = compareOpcode(n_.op());
  if (t_ == DType::Bool && op != Opcode::Eq) { // ordered comparisons of bools: false < true
    return b_.compare(op, DType::U8, b_.cast(DType::U8, DType::Bool, in_[0]),
                      b_.cast(DType::U8, DType::Bool, in_[1]));
  }
  if (t_ == DType::Bool) return b_.compare(op, DType::Bool, in_[0], in_[1]);
  return s_.cmp(op, arg(0), arg(1));
}

// isinf(x) && (x < 0 ? detect_negative : detect_positive).
int OpEmitter::isInf() {
  const int x = arg(0);
  const bool pos = n_.getInt("detect_positive") != 0, neg = n_.getInt("detect_negative") != 0;
  const int isPos = s_.eq(x, s_.c(INFINITY)), isNeg = s_.eq(x, s_.c(-INFINITY));
  if (pos && neg) return b_.binary(Opcode::Or, DType::Bool, isPos, isNeg);
  if (pos) return isPos;
  if (neg) return isNeg;
  return b_.intConstant(DType::Bool, 0);
}

Expected<int> OpEmitter::numeric() {
  const int x = arg(0);
  const Opcode unary = unaryOpcode(n_.op());
  if (unary != Opcode::Const) return s_.un(unary, x);
  switch (n_.op()) {
  case OpKind::Abs:
    return isUnsignedInt(ct_) ? x : s_.un(Opcode::Abs, x);
  case OpKind::Neg:
    return s_.un(Opcode::Neg, x);
  case OpKind::Sign:
    return sign(x);
  case OpKind::Shrink:
    return shrink(x);
  case OpKind::Add:
    return s_.add(x, arg(1));
  case OpKind::Sub:
    return s_.sub(x, arg(1));
  case OpKind::Mul:
    return s_.mul(x, arg(1));
  case OpKind::Div:
    return divide(x, arg(1));
  case OpKind::Mod:
    return modulo(x, arg(1));
  case OpKind::PRelu:
    return s_.sel(s_.lt(x, s_.c(0)), s_.mul(arg(1), x), x);
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Sum:
  case OpKind::Mean:
    return variadic();
  case OpKind::Clip:
    return clip(x);
  default:
    return activation(x);
  }
}

// The activations, as unary.cpp writes them (float compute types only,
// except Relu).
int OpEmitter::activation(int x) {
  Scalar &s = s_;
  const int zero = s.c(0), one = s.c(1);
  switch (n_.op()) {
  case OpKind::Relu:
    return isUnsignedInt(ct_) ? x : s.sel(s.lt(x, zero), zero, x);
  case OpKind::LeakyRelu:
    return s.sel(s.lt(x, zero), s.mul(s.c(attr("alpha")), x), x);
  case OpKind::ThresholdedRelu:
    return s.sel(s.gt(x, s.c(attr("alpha"))), x, zero);
  case OpKind::Elu:
    return s.sel(s.lt(x, zero), s.mul(s.c(attr("alpha")), s.expm1(x)), x);
  case OpKind::Selu: {
    const int alpha = s.c(attr("alpha")), gamma = s.c(attr("gamma"));
    const int negative = s.mul(gamma, s.sub(s.mul(alpha, s.un(Opcode::Exp, x)), alpha));
    return s.sel(s.gt(x, zero), s.mul(gamma, x), negative);
  }
  case OpKind::Celu: {
    const int alpha = s.c(attr("alpha"));
    return s.add(s.stdMax(x, zero), s.stdMin(s.mul(alpha, s.expm1(s.div(x, alpha))), zero));
  }
  case OpKind::HardSigmoid: {
    const int v = s.add(s.mul(s.c(attr("alpha")), x), s.c(attr("beta")));
    return s.stdMax(s.stdMin(v, one), zero);
  }
  case OpKind::HardSwish: {
    const int v = s.add(s.div(x, s.c(6)), s.c(0.5));
    return s.mul(x, s.stdMax(s.stdMin(v, one), zero));
  }
  case OpKind::Softplus:
    return s.softplus(x);
  case OpKind::Softsign:
    return s.div(x, s.add(one, s.un(Opcode::Abs, x)));
  case OpKind::Mish:
    return s.mul(x, s.un(Opcode::Tanh, s.softplus(x)));
  default: { // Gelu
    if (n_.getString("approximate") == "tanh") {
      const int half = s.mul(s.c(0.5), x);
      const int cube = s.mul(s.mul(s.mul(s.c(0.044715), x), x), x);
      const int inner = s.mul(s.c(M_2_SQRTPI * M_SQRT1_2), s.add(x, cube));
      return s.mul(half, s.add(one, s.un(Opcode::Tanh, inner)));
    }
    if (ct_ == DType::F64) // erfc's fit below is f32-accurate only
      return s.mul(s.mul(s.c(0.5), x), s.add(one, s.un(Opcode::Erf, s.mul(x, s.c(M_SQRT1_2)))));
    // x * Phi(x) from the normal tail q = Phi(-|x|) = erfc(|x| / sqrt 2) / 2
    // (support/erfc_poly.h): q below 0, 1 - q above. One erfc and no
    // series branch, 35% fewer operations than through Erf, as accurate
    // (< 1.2e-7 relative in Phi); as the GEMM epilogue's GELU.
    const int z = s.mul(s.un(Opcode::Abs, x), s.c(M_SQRT1_2));
    const int t = s.div(one, s.add(one, s.mul(z, s.c(0.5))));
    int p = s.c(kErfcPoly[kErfcPolyTerms - 1]);
    for (int i = kErfcPolyTerms - 2; i >= 0; --i) p = s.add(s.mul(p, t), s.c(kErfcPoly[i]));
    const int q = s.mul(s.mul(t, s.c(0.5)), s.un(Opcode::Exp, s.sub(p, s.mul(z, z))));
    return s.mul(x, s.sel(s.lt(x, zero), q, s.sub(one, q)));
  }
  }
}

// 1 above zero, -1 below (signed types), else x itself (0, or NaN).
int OpEmitter::sign(int x) {
  Scalar &s = s_;
  const int zero = s.c(0);
  int r = isFloat(ct_) ? s.sel(s.eq(x, zero), zero, x) : zero;
  if (!isUnsignedInt(ct_)) r = s.sel(s.lt(x, zero), s.c(-1), r);
  return s.sel(s.gt(x, zero), s.c(1), r);
}

// x < -lambd ? x + bias : x > lambd ? x - bias : 0; integers compute in
// f64 and convert back truncating and saturating (ew::floatToInt).
int OpEmitter::shrink(int x) {
  const double lambd = attr("lambd"), bias = attr("bias");
  const bool integer = isInt(ct_);
  const DType t = integer ? DType::F64 : ct_;
  Scalar s(b_, t);
  const int v = integer ? b_.cast(DType::F64, ct_, x) : x;
  const int above = s.sel(s.gt(v, s.c(lambd)), s.sub(v, s.c(bias)), s.c(0));
  const int r = s.sel(s.lt(v, s.c(-lambd)), s.add(v, s.c(bias)), above);
  return integer ? b_.cast(ct_, DType::F64, r) : r;
}

int OpEmitter::divide(int x, int y) {
  if (isInt(ct_)) raise_(s_.eq(y, s_.c(0)), "integer division by zero");
  return s_.div(x, y); // MIN / -1 wraps to MIN, as wrapNeg does
}

// fmod = 1: the remainder of truncating division (C's % and fmod); fmod = 0:
// the sign of the divisor (Python's %), a zero remainder copying its sign.
int OpEmitter::modulo(int x, int y) {
  if (isInt(ct_)) raise_(s_.eq(y, s_.c(0)), "integer modulo by zero");
  const int r = s_.bin(Opcode::Mod, x, y);
  if (n_.getInt("fmod") != 0) return r;
  if (isInt(ct_)) return isUnsignedInt(ct_) ? r : floorMod(r, y);
  const int signedZero = s_.sel(s_.lt(y, s_.c(0)), s_.c(-0.0), s_.c(0));
  return s_.sel(s_.eq(r, s_.c(0)), signedZero, floorMod(r, y));
}

// r + y where a non-zero remainder r and the divisor y differ in sign.
int OpEmitter::floorMod(int r, int y) {
  const int zero = s_.c(0);
  const int differ = b_.binary(Opcode::Xor, DType::Bool, s_.lt(r, zero), s_.lt(y, zero));
  const int fix = b_.binary(Opcode::And, DType::Bool, s_.cmp(Opcode::Ne, r, zero), differ);
  return s_.sel(fix, s_.add(r, y), r);
}

// Max and Min propagate NaN (the max/min opcodes do); Sum and Mean wrap on
// integers, and Mean divides the sum (truncating for integers).
int OpEmitter::variadic() {
  const Opcode op = n_.op() == OpKind::Max   ? Opcode::Max
                    : n_.op() == OpKind::Min ? Opcode::Min
                                             : Opcode::Add;
  int acc = arg(0);
  for (int i = 1; i < n_.numInputs(); ++i) acc = s_.bin(op, acc, arg(i));
  if (n_.op() == OpKind::Mean) acc = s_.div(acc, s_.c(n_.numInputs()));
  return acc;
}

// if (x < lo) x = lo; if (x > hi) x = hi: min > max gives max, NaN stays.
int OpEmitter::clip(int x) {
  if (hasInput(1)) x = s_.sel(s_.lt(x, arg(1)), arg(1), x);
  if (hasInput(2)) x = s_.sel(s_.gt(x, arg(2)), arg(2), x);
  return x;
}

// Pow's result has the base's dtype. Integers by repeated squaring; floats
// of one type in that type (powf for f32); mixed types in f64, rounded once
// (a float to an integer base truncates and saturates).
int OpEmitter::power() {
  const DType tb = inType(1);
  if (isInt(t_) && isInt(tb)) return intPower(in_[0], in_[1]);
  if (t_ == tb) return narrow(s_.bin(Opcode::Pow, arg(0), arg(1)));
  const int base = t_ == DType::F64 ? in_[0] : b_.cast(DType::F64, t_, in_[0]);
  const int exponent = tb == DType::F64 ? in_[1] : b_.cast(DType::F64, tb, in_[1]);
  const int r = b_.binary(Opcode::Pow, DType::F64, base, exponent);
  return t_ == DType::F64 ? r : b_.cast(t_, DType::F64, r);
}

// base^e wrapping like repeated multiplication: one squaring step per bit of
// the exponent's type (no loop, so it vectorizes). A negative exponent gives
// the truncated real result: 1 and -1 stay on the unit circle, larger bases
// go to 0, and 0 is an error.
int OpEmitter::intPower(int base, int exponent) {
  const DType tb = inType(1);
  Scalar s(b_, t_);
  Scalar u(b_, DType::U64);
  const int e = tb == DType::U64 ? exponent : b_.cast(DType::U64, tb, exponent);
  const int bits = int(dtypeSize(tb) * 8) - (isSignedInt(tb) ? 1 : 0);
  int result = s.c(1), square = base;
  for (int k = 0; k < bits; ++k) {
    const int bit =
        u.cmp(Opcode::Ne,
              u.bin(Opcode::And, e, b_.intConstant(DType::U64, int64_t(uint64_t{1} << k))), u.c(0));
    result = s.sel(bit, s.mul(result, square), result);
    if (k + 1 < bits) square = s.mul(square, square);
  }
  if (!isSignedInt(tb)) return result;
  const int negative = b_.compare(Opcode::Lt, tb, exponent, b_.constant(tb, 0));
  raise_(b_.binary(Opcode::And, DType::Bool, negative, s.eq(base, s.c(0))),
         "integer 0 raised to a negative power");
  int small = s.c(0);
  if (isSignedInt(t_)) {
    const int odd = u.cmp(Opcode::Ne, u.bin(Opcode::And, e, u.c(1)), u.c(0));
    small = s.sel(s.eq(base, s.c(-1)), s.sel(odd, s.c(-1), s.c(1)), small);
  }
  small = s.sel(s.eq(base, s.c(1)), s.c(1), small);
  return s.sel(negative, small, result);
}

} // namespace

Expected<int> emitScalarMath(kir::KernelBuilder &b, const Node &node,
                             const std::vector<int> &operands, const RaiseFn &raise) {
  return OpEmitter(b, node, operands, raise).emit();
}

} // namespace kiln::lower
