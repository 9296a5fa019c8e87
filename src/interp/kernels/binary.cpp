// Interpreter kernels for the two-input broadcasting ops: arithmetic (Add,
// Sub, Mul, Div, Mod, Pow), bit shifts and bitwise ops, logical ops,
// comparisons and PRelu. Inputs broadcast numpy-style. Integer arithmetic
// wraps on overflow; integer division truncates toward zero and division
// (or Mod) by zero is an error. f16/bf16 are computed in float.
#include "interp/kernels/common.h"
#include "interp/kernels/elementwise_helpers.h"
#include "interp/kernels/families.h"

#include <cmath>

namespace kiln {

namespace {

using namespace ew;

// Which element types an op accepts (checked at compile time per type, so a
// function body only has to compile for the types it serves).
enum class Types { Arith, Int, Unsigned, Bool, Comparable, Any };

template <Types K, class T> constexpr bool accepts() {
  if constexpr (K == Types::Arith)
    return kIsIntType<T> || kIsFloatType<T>;
  else if constexpr (K == Types::Int)
    return kIsIntType<T>;
  else if constexpr (K == Types::Unsigned)
    return kIsIntType<T> && std::is_unsigned_v<T>;
  else if constexpr (K == Types::Bool)
    return std::is_same_v<T, bool>;
  else if constexpr (K == Types::Comparable)
    return !std::is_same_v<T, std::string>;
  else
    return true;
}

template <Types K> bool acceptsDType(DType d) {
  bool ok = false;
  visitDType(d, [&](auto tag) { ok = accepts<K, decltype(tag)>(); });
  return ok;
}

// out[i] = fn(a[.], b[.]) over the broadcast `bc`, converting elements to
// their compute types on load and to O on store.
template <class A, class B, class O, class Fn>
Tensor zip(const Tensor &a, const Tensor &b, const Broadcast &bc, DType outType, Fn &fn) {
  Tensor out(outType, bc.shape);
  const A *pa = a.data<A>();
  const B *pb = b.data<B>();
  O *po = out.data<O>();
  for (int64_t i = 0; i < bc.numel; ++i)
    po[i] = static_cast<O>(fn(static_cast<ComputeType<A>>(pa[bc.at(0, i)]),
                              static_cast<ComputeType<B>>(pb[bc.at(1, i)])));
  return out;
}

// A binary op whose inputs share one dtype from the set K; fn(a, b) works on
// compute-type values and returns the compute type (output keeps the input
// dtype) or bool (output is bool). fn may set `bad` to report a value error
// (division by zero), described by `badMessage`.
template <Types K, class Fn>
Status binary(KernelContext &ctx, Fn fn, const bool *bad = nullptr, const char *badMessage = "") {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 1));
  KILN_RETURN_IF_ERROR(requireSameDType(ctx, 0, 1));
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  if (!acceptsDType<K>(a.dtype()))
    return ctx.error("does not support dtype ", dtypeName(a.dtype()));
  KILN_ASSIGN_OR_RETURN(Broadcast bc, broadcastAll(ctx, {&a, &b}));
  Tensor out;
  visitDType(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (accepts<K, T>()) {
      using R = decltype(fn(ComputeType<T>{}, ComputeType<T>{}));
      if constexpr (std::is_same_v<R, bool>)
        out = zip<T, T, bool>(a, b, bc, DType::Bool, fn);
      else
        out = zip<T, T, T>(a, b, bc, a.dtype(), fn);
    }
  });
  if (bad && *bad) return ctx.error(badMessage);
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// ---- arithmetic ---------------------------------------------------------------

Status divKernel(KernelContext &ctx) {
  bool bad = false;
  return binary<Types::Arith>(
      ctx,
      [&bad](auto x, auto y) {
        using C = decltype(x);
        if constexpr (kIsIntType<C>) {
          if (y == 0) {
            bad = true;
            return C(0);
          }
          if constexpr (std::is_signed_v<C>)
            if (y == C(-1)) return wrapNeg(x); // MIN / -1 overflows
          return static_cast<C>(x / y);
        } else {
          return x / y;
        }
      },
      &bad, "integer division by zero");
}

// fmod=1: the sign of the dividend (C fmod); fmod=0: the sign of the divisor
// (Python/numpy %).
template <class C> C modElem(C x, C y, bool cStyle, bool &bad) {
  C r;
  if constexpr (kIsIntType<C>) {
    if (y == 0) {
      bad = true;
      return C(0);
    }
    if constexpr (std::is_signed_v<C>)
      if (y == C(-1)) return C(0); // MIN % -1 overflows in C++
    r = static_cast<C>(x % y);
  } else {
    r = std::fmod(x, y);
    if (!cStyle && r == C(0)) return std::copysign(C(0), y);
  }
  if (!cStyle && r != C(0) && ((r < C(0)) != (y < C(0)))) r = static_cast<C>(r + y);
  return r;
}

Status modKernel(KernelContext &ctx) {
  bool cStyle = ctx.node().getInt("fmod") != 0;
  bool bad = false;
  return binary<Types::Arith>(
      ctx, [cStyle, &bad](auto x, auto y) { return modElem(x, y, cStyle, bad); }, &bad,
      "integer modulo by zero");
}

// base^exponent for integers by repeated squaring (wrapping like repeated
// multiplication would). Negative exponents give the truncated real result:
// 1 and -1 stay on the unit circle, larger bases go to 0, 0 is an error.
template <class A, class B> A intPow(A base, B exponent, bool &bad) {
  if constexpr (std::is_signed_v<B>) {
    if (exponent < 0) {
      if (base == 0) bad = true;
      if (base == 1) return A(1);
      if constexpr (std::is_signed_v<A>)
        if (base == A(-1)) return (exponent & 1) ? A(-1) : A(1);
      return A(0);
    }
  }
  uint64_t e = static_cast<uint64_t>(exponent);
  A result = 1;
  while (e) {
    if (e & 1) result = wrapMul(result, base);
    base = wrapMul(base, base);
    e >>= 1;
  }
  return result;
}

// Pow's output has the base's dtype; the exponent may be any numeric type.
// Same-typed floats compute in their own precision (powf for f32, as numpy);
// mixed types compute in double and round once.
template <class A, class B> A powElem(A base, B exponent, bool &bad) {
  if constexpr (kIsIntType<A> && kIsIntType<B>)
    return intPow(base, exponent, bad);
  else if constexpr (std::is_same_v<A, B>)
    return std::pow(base, exponent);
  else
    return fromDouble<A>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
}

Status powKernel(KernelContext &ctx) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 1));
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  if (!isNumeric(a.dtype()) || !isNumeric(b.dtype()))
    return ctx.error("does not support dtypes ", dtypeName(a.dtype()), " and ",
                     dtypeName(b.dtype()));
  KILN_ASSIGN_OR_RETURN(Broadcast bc, broadcastAll(ctx, {&a, &b}));
  Tensor out;
  bool bad = false;
  visitDType(a.dtype(), [&](auto baseTag) {
    using A = decltype(baseTag);
    if constexpr (accepts<Types::Arith, A>()) {
      visitDType(b.dtype(), [&](auto expTag) {
        using B = decltype(expTag);
        if constexpr (accepts<Types::Arith, B>()) {
          auto fn = [&bad](ComputeType<A> x, ComputeType<B> y) { return powElem(x, y, bad); };
          out = zip<A, B, A>(a, b, bc, a.dtype(), fn);
        }
      });
    }
  });
  if (bad) return ctx.error("integer 0 raised to a negative power");
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

void registerArithmetic(KernelTable &t) {
  t.add(OpKind::Add, [](KernelContext &c) {
    return binary<Types::Arith>(c, [](auto x, auto y) { return wrapAdd(x, y); });
  });
  t.add(OpKind::Sub, [](KernelContext &c) {
    return binary<Types::Arith>(c, [](auto x, auto y) { return wrapSub(x, y); });
  });
  t.add(OpKind::Mul, [](KernelContext &c) {
    return binary<Types::Arith>(c, [](auto x, auto y) { return wrapMul(x, y); });
  });
  t.add(OpKind::Div, divKernel);
  t.add(OpKind::Mod, modKernel);
  t.add(OpKind::Pow, powKernel);
  t.add(OpKind::PRelu, [](KernelContext &c) {
    return binary<Types::Arith>(
        c, [](auto x, auto slope) { return x < decltype(x)(0) ? wrapMul(slope, x) : x; });
  });
}

// ---- bits and logic -------------------------------------------------------------

Status bitShiftKernel(KernelContext &ctx) {
  std::string direction = ctx.node().getString("direction");
  if (direction != "LEFT" && direction != "RIGHT")
    return ctx.error("direction must be 'LEFT' or 'RIGHT', got '", direction, "'");
  bool left = direction == "LEFT";
  return binary<Types::Unsigned>(ctx, [left](auto x, auto n) {
    using C = decltype(x);
    // Shifting by the width or more is undefined in C++; every bit is
    // shifted out, so the result is 0.
    if (n >= std::numeric_limits<C>::digits) return C(0);
    return left ? static_cast<C>(x << n) : static_cast<C>(x >> n);
  });
}

void registerBitsAndLogic(KernelTable &t) {
  t.add(OpKind::BitShift, bitShiftKernel);
  t.add(OpKind::BitwiseAnd, [](KernelContext &c) {
    return binary<Types::Int>(c, [](auto x, auto y) { return static_cast<decltype(x)>(x & y); });
  });
  t.add(OpKind::BitwiseOr, [](KernelContext &c) {
    return binary<Types::Int>(c, [](auto x, auto y) { return static_cast<decltype(x)>(x | y); });
  });
  t.add(OpKind::BitwiseXor, [](KernelContext &c) {
    return binary<Types::Int>(c, [](auto x, auto y) { return static_cast<decltype(x)>(x ^ y); });
  });
  t.add(OpKind::And, [](KernelContext &c) {
    return binary<Types::Bool>(c, [](bool x, bool y) { return x && y; });
  });
  t.add(OpKind::Or, [](KernelContext &c) {
    return binary<Types::Bool>(c, [](bool x, bool y) { return x || y; });
  });
  t.add(OpKind::Xor, [](KernelContext &c) {
    return binary<Types::Bool>(c, [](bool x, bool y) { return x != y; });
  });
}

// ---- comparisons ----------------------------------------------------------------

void registerComparisons(KernelTable &t) {
  t.add(OpKind::Equal, [](KernelContext &c) {
    return binary<Types::Any>(c, [](const auto &x, const auto &y) -> bool { return x == y; });
  });
  t.add(OpKind::Greater, [](KernelContext &c) {
    return binary<Types::Comparable>(c, [](auto x, auto y) -> bool { return x > y; });
  });
  t.add(OpKind::GreaterOrEqual, [](KernelContext &c) {
    return binary<Types::Comparable>(c, [](auto x, auto y) -> bool { return x >= y; });
  });
  t.add(OpKind::Less, [](KernelContext &c) {
    return binary<Types::Comparable>(c, [](auto x, auto y) -> bool { return x < y; });
  });
  t.add(OpKind::LessOrEqual, [](KernelContext &c) {
    return binary<Types::Comparable>(c, [](auto x, auto y) -> bool { return x <= y; });
  });
}

} // namespace

void registerBinaryKernels(KernelTable &t) {
  registerArithmetic(t);
  registerBitsAndLogic(t);
  registerComparisons(t);
}

} // namespace kiln
