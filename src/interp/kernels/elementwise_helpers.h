// Helpers shared by the elementwise kernel files (unary.cpp, binary.cpp,
// elementwise.cpp, cast.cpp): checking that inputs are tensors, broadcasting
// any number of inputs, dtype dispatch narrower than dispatchNumeric, integer
// arithmetic that wraps instead of overflowing (which would be undefined
// behaviour in C++), and the one float-to-integer conversion rule that Cast
// and the mixed-type ops share.
#pragma once

#include "interp/kernels/common.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::ew {

// Error unless input i is present and holds a tensor (the interpreter hands
// kernels whatever value a graph produced, sequences included).
inline Status requireTensor(const KernelContext &ctx, int i) {
  if (!ctx.has(i)) return ctx.error("input ", i, " is missing");
  if (!ctx.value(i).isTensor())
    return ctx.error("input ", i, " must be a tensor, got ", ctx.value(i).describe());
  return Status::success();
}

// Error unless the inputs `first`..`last` that are present all have the
// dtype of input `first` (which must be present).
inline Status requireSameDType(const KernelContext &ctx, int first, int last) {
  for (int i = first + 1; i <= last; ++i)
    if (ctx.has(i) && ctx.in(i).dtype() != ctx.in(first).dtype())
      return ctx.error("input ", i, " has dtype ", dtypeName(ctx.in(i).dtype()), ", input ", first,
                       " has ", dtypeName(ctx.in(first).dtype()), "; they must match");
  return Status::success();
}

// The numpy broadcast of several tensors: the output shape and, for each
// input, the offset of its element that each output element reads. An input
// that already has the output shape keeps no offsets (its offset is the
// output index), which is the common case and saves the index vector.
struct Broadcast {
  Shape64 shape;
  int64_t numel = 0;
  std::vector<std::vector<int64_t>> offsets;

  int64_t at(size_t input, int64_t i) const {
    return offsets[input].empty() ? i : offsets[input][i];
  }
};

inline Expected<Broadcast> broadcastAll(const KernelContext &ctx,
                                        const std::vector<const Tensor *> &inputs) {
  Broadcast b;
  b.shape = inputs.empty() ? Shape64{} : inputs[0]->shape();
  for (size_t i = 1; i < inputs.size(); ++i) {
    auto s = broadcastShapes64(b.shape, inputs[i]->shape());
    if (!s.ok()) return ctx.error(s.error().message);
    b.shape = std::move(*s);
  }
  b.numel = numelOf(b.shape);
  b.offsets.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]->shape() != b.shape) b.offsets[i] = broadcastOffsets(inputs[i]->shape(), b.shape);
  return b;
}

// ---- dtype dispatch ---------------------------------------------------------

template <class T> constexpr bool kIsIntType = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T> constexpr bool kIsFloatType = std::is_floating_point_v<T> || kIsHalfLike<T>;

// Calls f(T{}) for float and integer dtypes (not bool, not string).
template <class F> Status dispatchArith(const KernelContext &ctx, DType d, F &&f) {
  if (!isNumeric(d)) return ctx.error("expects a numeric tensor, got ", dtypeName(d));
  visitDType(d, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsIntType<T> || kIsFloatType<T>) f(tag);
  });
  return Status::success();
}

// Calls f(T{}) for integer dtypes only.
template <class F> Status dispatchInt(const KernelContext &ctx, DType d, F &&f) {
  if (!isInt(d)) return ctx.error("expects an integer tensor, got ", dtypeName(d));
  visitDType(d, [&](auto tag) {
    if constexpr (kIsIntType<decltype(tag)>) f(tag);
  });
  return Status::success();
}

// Calls f(T{}) for every dtype, strings included.
template <class F> void dispatchAny(DType d, F &&f) {
  visitDType(d, std::forward<F>(f));
}

// ---- wrapping integer arithmetic ---------------------------------------------

// Two's complement results of + - * and negation, computed in uint64 so that
// overflow wraps (as ONNX Runtime and numpy do) instead of being undefined.
template <class T> T wrapAdd(T a, T b) {
  if constexpr (kIsIntType<T>)
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}
template <class T> T wrapSub(T a, T b) {
  if constexpr (kIsIntType<T>)
    return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  else
    return a - b;
}
template <class T> T wrapMul(T a, T b) {
  if constexpr (kIsIntType<T>)
    return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}
template <class T> T wrapNeg(T a) {
  if constexpr (kIsIntType<T>)
    return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(a));
  else
    return -a;
}

// ---- conversions ------------------------------------------------------------

// A float value to integer type D: truncation toward zero, NaN to 0, and
// values past D's range saturate to its limits. ONNX leaves out-of-range
// casts undefined; saturation is the defined choice that compiled code can
// reproduce exactly (llvm.fpto[su]i.sat).
template <class D> D floatToInt(double v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (t <= static_cast<double>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
  // max() of 64-bit types is not exactly representable: compare against
  // 2^bits (or 2^(bits-1)), which is.
  double limit = std::ldexp(1.0, std::numeric_limits<D>::digits);
  if (t >= limit) return std::numeric_limits<D>::max();
  return static_cast<D>(t);
}

// A double rounded to float with round-to-odd: the result, rounded again to
// any format at least two bits narrower (f16, bf16), is the correctly
// rounded double. Plain double->float->half rounds twice and can be one ulp
// off.
inline float roundToOddFloat(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v))
    f = std::nextafter(f, 0.0f); // truncate toward zero
  return bitsToFloat(floatBits(f) | 1u);
}

// The double value of an element of any numeric storage type.
template <class T> double toDouble(T v) {
  if constexpr (kIsHalfLike<T>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

// A double converted to storage type D: ints by floatToInt, f16/bf16 rounded
// once (see roundToOddFloat), bool as v != 0.
template <class D> D fromDouble(double v) {
  if constexpr (std::is_same_v<D, bool>)
    return v != 0;
  else if constexpr (kIsHalfLike<D>)
    return D(roundToOddFloat(v));
  else if constexpr (kIsIntType<D>)
    return floatToInt<D>(v);
  else
    return static_cast<D>(v);
}

} // namespace kiln::ew
