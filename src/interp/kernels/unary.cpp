// Interpreter kernels for the one-input elementwise ops: math functions,
// rounding, activations, sign/abs/neg, the NaN/Inf tests and logical and
// bitwise not. f16/bf16 are computed in float and rounded once on store, as
// numpy does; f32 is computed in float (not double), so results match what a
// float implementation produces.
#include "interp/kernels/common.h"
#include "interp/kernels/elementwise_helpers.h"
#include "interp/kernels/families.h"

#include <cmath>

namespace kiln {

namespace {

using namespace ew;

// y = fn(x) over a tensor of storage type T, computed in ComputeType<T>.
template <class T, class Fn> Tensor mapTensor(const Tensor &x, DType outType, Fn &fn) {
  Tensor y(outType, x.shape());
  const T *src = x.data<T>();
  int64_t n = x.numel();
  using C = ComputeType<T>;
  using R = decltype(fn(C{}));
  if constexpr (std::is_same_v<R, bool>) {
    bool *dst = y.data<bool>();
    for (int64_t i = 0; i < n; ++i) dst[i] = fn(static_cast<C>(src[i]));
  } else {
    T *dst = y.data<T>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(fn(static_cast<C>(src[i])));
  }
  return y;
}

// Applies fn to every element of input 0, a float tensor; fn returns the
// compute type (output has the input's dtype) or bool (output is bool).
template <class Fn> Status mapFloat(KernelContext &ctx, Fn fn) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  const Tensor &x = ctx.in(0);
  Tensor y;
  KILN_RETURN_IF_ERROR(dispatchFloat(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using R = decltype(fn(ComputeType<T>{}));
    y = mapTensor<T>(x, std::is_same_v<R, bool> ? DType::Bool : x.dtype(), fn);
  }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// As mapFloat, for ops that also take integer tensors.
template <class Fn> Status mapArith(KernelContext &ctx, Fn fn) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  const Tensor &x = ctx.in(0);
  Tensor y;
  KILN_RETURN_IF_ERROR(dispatchArith(
      ctx, x.dtype(), [&](auto tag) { y = mapTensor<decltype(tag)>(x, x.dtype(), fn); }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// ---- math -------------------------------------------------------------------

void registerMath(KernelTable &t) {
  // One table row per function: y = expr(x) over a float tensor.
#define KILN_FLOAT_FN(Op, expr)                                                                    \
  t.add(OpKind::Op, [](KernelContext &c) { return mapFloat(c, [](auto x) { return expr; }); })
  KILN_FLOAT_FN(Floor, std::floor(x));
  KILN_FLOAT_FN(Ceil, std::ceil(x));
  // nearbyint rounds half to even in the default rounding mode: the ONNX
  // rule (and numpy's).
  KILN_FLOAT_FN(Round, std::nearbyint(x));
  KILN_FLOAT_FN(Sqrt, std::sqrt(x));
  KILN_FLOAT_FN(Reciprocal, decltype(x)(1) / x);
  KILN_FLOAT_FN(Exp, std::exp(x));
  KILN_FLOAT_FN(Log, std::log(x));
  KILN_FLOAT_FN(Sin, std::sin(x));
  KILN_FLOAT_FN(Cos, std::cos(x));
  KILN_FLOAT_FN(Tan, std::tan(x));
  KILN_FLOAT_FN(Asin, std::asin(x));
  KILN_FLOAT_FN(Acos, std::acos(x));
  KILN_FLOAT_FN(Atan, std::atan(x));
  KILN_FLOAT_FN(Sinh, std::sinh(x));
  KILN_FLOAT_FN(Cosh, std::cosh(x));
  KILN_FLOAT_FN(Asinh, std::asinh(x));
  KILN_FLOAT_FN(Acosh, std::acosh(x));
  KILN_FLOAT_FN(Atanh, std::atanh(x));
  KILN_FLOAT_FN(Tanh, std::tanh(x));
  KILN_FLOAT_FN(Erf, std::erf(x));
  KILN_FLOAT_FN(IsNaN, std::isnan(x));
#undef KILN_FLOAT_FN
  t.add(OpKind::IsInf, [](KernelContext &c) {
    bool neg = c.node().getInt("detect_negative") != 0;
    bool pos = c.node().getInt("detect_positive") != 0;
    return mapFloat(c, [neg, pos](auto x) { return std::isinf(x) && (x < 0 ? neg : pos); });
  });
}

// Abs, Neg and Sign also take integers; negation wraps (abs of the most
// negative value is itself), as two's complement hardware does.
void registerSignOps(KernelTable &t) {
  t.add(OpKind::Abs, [](KernelContext &c) {
    return mapArith(c, [](auto x) {
      using C = decltype(x);
      if constexpr (kIsIntType<C>) {
        if constexpr (std::is_signed_v<C>)
          return x < 0 ? wrapNeg(x) : x;
        else
          return x;
      } else {
        return std::fabs(x);
      }
    });
  });
  t.add(OpKind::Neg,
        [](KernelContext &c) { return mapArith(c, [](auto x) { return wrapNeg(x); }); });
  t.add(OpKind::Sign, [](KernelContext &c) {
    return mapArith(c, [](auto x) {
      using C = decltype(x);
      if (x > C(0)) return C(1);
      if constexpr (std::is_signed_v<C>)
        if (x < C(0)) return C(-1);
      return x == C(0) ? C(0) : x; // NaN stays NaN
    });
  });
}

// ---- activations --------------------------------------------------------------

// std::min(v, bound) and std::max(v, bound) return v when v is NaN, so the
// clamps below propagate NaN like numpy's minimum/maximum; keep that order.

// log(1 + e^x) without overflow for large x.
template <class C> C softplus(C x) {
  return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

void registerActivations(KernelTable &t) {
  t.add(OpKind::Relu, [](KernelContext &c) {
    return mapArith(c, [](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; });
  });
  t.add(OpKind::Sigmoid, [](KernelContext &c) {
    return mapFloat(c, [](auto x) {
      using C = decltype(x);
      // Two forms so that exp never overflows.
      return x >= C(0) ? C(1) / (C(1) + std::exp(-x)) : std::exp(x) / (C(1) + std::exp(x));
    });
  });
  t.add(OpKind::LeakyRelu, [](KernelContext &c) {
    float alpha = c.node().getFloat("alpha");
    return mapFloat(c, [alpha](auto x) { return x < 0 ? decltype(x)(alpha) * x : x; });
  });
  t.add(OpKind::Elu, [](KernelContext &c) {
    float alpha = c.node().getFloat("alpha");
    return mapFloat(c, [alpha](auto x) { return x < 0 ? decltype(x)(alpha) * std::expm1(x) : x; });
  });
  t.add(OpKind::Selu, [](KernelContext &c) {
    float alpha = c.node().getFloat("alpha"), gamma = c.node().getFloat("gamma");
    return mapFloat(c, [alpha, gamma](auto x) {
      using C = decltype(x);
      return x > C(0) ? C(gamma) * x : C(gamma) * (C(alpha) * std::exp(x) - C(alpha));
    });
  });
  t.add(OpKind::Celu, [](KernelContext &c) {
    float alpha = c.node().getFloat("alpha");
    if (alpha == 0) return Status(c.error("alpha must not be 0"));
    return mapFloat(c, [alpha](auto x) {
      using C = decltype(x);
      return std::max(x, C(0)) + std::min(C(alpha) * std::expm1(x / C(alpha)), C(0));
    });
  });
  t.add(OpKind::HardSigmoid, [](KernelContext &c) {
    float alpha = c.node().getFloat("alpha"), beta = c.node().getFloat("beta");
    return mapFloat(c, [alpha, beta](auto x) {
      using C = decltype(x);
      return std::max(std::min(C(alpha) * x + C(beta), C(1)), C(0));
    });
  });
  t.add(OpKind::HardSwish, [](KernelContext &c) {
    return mapFloat(c, [](auto x) {
      using C = decltype(x);
      return x * std::max(std::min(x / C(6) + C(0.5), C(1)), C(0));
    });
  });
  t.add(OpKind::Softplus,
        [](KernelContext &c) { return mapFloat(c, [](auto x) { return softplus(x); }); });
  t.add(OpKind::Softsign, [](KernelContext &c) {
    return mapFloat(c, [](auto x) { return x / (decltype(x)(1) + std::fabs(x)); });
  });
  t.add(OpKind::ThresholdedRelu, [](KernelContext &c) {
    float alpha = c.node().getFloat("alpha");
    return mapFloat(c, [alpha](auto x) { return x > decltype(x)(alpha) ? x : decltype(x)(0); });
  });
  t.add(OpKind::Mish, [](KernelContext &c) {
    return mapFloat(c, [](auto x) { return x * std::tanh(softplus(x)); });
  });
  t.add(OpKind::Gelu, [](KernelContext &c) {
    std::string approx = c.node().getString("approximate");
    if (approx == "none")
      return mapFloat(c, [](auto x) {
        using C = decltype(x);
        return C(0.5) * x * (C(1) + std::erf(x * C(M_SQRT1_2)));
      });
    if (approx == "tanh")
      return mapFloat(c, [](auto x) {
        using C = decltype(x);
        C inner = C(M_2_SQRTPI * M_SQRT1_2) * (x + C(0.044715) * x * x * x); // sqrt(2/pi)
        return C(0.5) * x * (C(1) + std::tanh(inner));
      });
    return Status(c.error("approximate must be 'none' or 'tanh', got '", approx, "'"));
  });
  t.add(OpKind::Shrink, [](KernelContext &c) {
    double lambd = c.node().getFloat("lambd"), bias = c.node().getFloat("bias");
    return mapArith(c, [lambd, bias](auto x) {
      using C = decltype(x);
      if constexpr (kIsIntType<C>) {
        double v = static_cast<double>(x);
        return floatToInt<C>(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0);
      } else {
        return x < C(-lambd) ? x + C(bias) : x > C(lambd) ? x - C(bias) : C(0);
      }
    });
  });
}

// ---- logical and bitwise not ---------------------------------------------------

Status notKernel(KernelContext &ctx) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  const Tensor &x = ctx.in(0);
  if (x.dtype() != DType::Bool)
    return ctx.error("expects a bool tensor, got ", dtypeName(x.dtype()));
  Tensor y(DType::Bool, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) y.data<bool>()[i] = !x.data<bool>()[i];
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

Status bitwiseNotKernel(KernelContext &ctx) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  const Tensor &x = ctx.in(0);
  Tensor y;
  KILN_RETURN_IF_ERROR(dispatchInt(ctx, x.dtype(), [&](auto tag) {
    auto fn = [](auto v) { return static_cast<decltype(v)>(~v); };
    y = mapTensor<decltype(tag)>(x, x.dtype(), fn);
  }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

} // namespace

void registerUnaryKernels(KernelTable &t) {
  registerMath(t);
  registerSignOps(t);
  registerActivations(t);
  t.add(OpKind::Not, notKernel);
  t.add(OpKind::BitwiseNot, bitwiseNotKernel);
}

} // namespace kiln
