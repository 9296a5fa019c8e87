// Interpreter kernels for Cast and CastLike across every dtype, strings
// included. The rules, one per pair of kinds:
//   - int -> int wraps (two's complement, like C++20 and numpy);
//   - float -> int truncates toward zero, NaN gives 0, out-of-range values
//     saturate (ONNX leaves them undefined; see ew::floatToInt);
//   - anything -> f16/bf16 rounds once, to nearest even;
//   - x -> bool is x != 0; bool -> number is 0 or 1;
//   - number -> string prints like numpy's str(): the shortest digits that
//     read back to the same value, positional for 1e-4 <= |x| < 1e16 and
//     scientific ("1e-05", "1.5e+16") otherwise; bools print True/False;
//   - string -> number parses like numpy: surrounding spaces, a leading '+',
//     "nan", "inf", "INF", "-Infinity" are accepted; anything else is an error.
#include "interp/kernels/common.h"
#include "interp/kernels/elementwise_helpers.h"
#include "interp/kernels/families.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace kiln {

namespace {

using namespace ew;

// ---- numbers to numbers ----------------------------------------------------------

// ---- numbers to strings ------------------------------------------------------------

// The shortest decimal digits of v (as type T) and the power of ten of the
// first digit: 0.0391 -> ("391", -2).
template <class T> std::pair<std::string, int> shortestDigits(T v) {
  char buf[64];
  double d = toDouble(v);
  std::to_chars_result r;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  } else {
    // No to_chars for f16/bf16: the first precision that reads back to v.
    for (int p = 0; p < 17; ++p) {
      r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific, p);
      double back = 0;
      std::from_chars(buf, r.ptr, back);
      if (fromDouble<T>(back).bits == v.bits) break;
    }
  }
  std::string s(buf, r.ptr);
  size_t e = s.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (std::isdigit(static_cast<unsigned char>(s[i]))) digits += s[i];
  int exponent = std::atoi(s.c_str() + e + 1);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  return {digits, exponent};
}

template <class T> std::string floatToString(T v) {
  double d = toDouble(v);
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  std::string sign = std::signbit(d) ? "-" : "";
  if (d == 0) return sign + "0.0";
  auto [digits, exp] = shortestDigits(v);
  double mag = std::fabs(d);
  if (mag >= 1e-4 && mag < 1e16) { // positional, always with a fraction part
    if (exp < 0) return sign + "0." + std::string(-exp - 1, '0') + digits;
    std::string intPart = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
    intPart += std::string(exp + 1 - intPart.size(), '0');
    std::string frac = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "0";
    return sign + intPart + "." + frac;
  }
  std::string mant = digits.substr(0, 1);
  if (digits.size() > 1) mant += "." + digits.substr(1);
  std::string e = std::to_string(std::abs(exp));
  if (e.size() < 2) e = "0" + e;
  return sign + mant + "e" + (exp < 0 ? "-" : "+") + e;
}

Tensor numbersToStrings(const Tensor &x) {
  Tensor out(DType::String, x.shape());
  std::string *dst = out.data<std::string>();
  visitDType(x.dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S *src = x.data<S>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if constexpr (std::is_same_v<S, std::string>)
        dst[i] = src[i];
      else if constexpr (std::is_same_v<S, bool>)
        dst[i] = src[i] ? "True" : "False";
      else if constexpr (kIsIntType<S>)
        dst[i] = std::to_string(src[i] + 0); // int8 as a number
      else
        dst[i] = floatToString(src[i]);
    }
  });
  return out;
}

// ---- strings to numbers ------------------------------------------------------------

// The text without surrounding white space and without one leading '+'
// (from_chars accepts '-' only).
std::string_view numberText(const std::string &s) {
  std::string_view v(s);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  if (v.size() > 1 && v[0] == '+' && v[1] != '-') v.remove_prefix(1);
  return v;
}

template <class N> bool parseWhole(std::string_view v, N &out) {
  auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  if (r.ptr != v.data() + v.size()) return false;
  if constexpr (std::is_floating_point_v<N>) {
    // Out of range: numpy gives +-inf or 0, which strtod does too.
    if (r.ec == std::errc::result_out_of_range) {
      out = static_cast<N>(std::strtod(std::string(v).c_str(), nullptr));
      return true;
    }
  }
  return r.ec == std::errc();
}

// Parses one string as storage type D; false when it is not a number.
template <class D> bool parseElement(const std::string &s, D &out) {
  std::string_view v = numberText(s);
  if constexpr (std::is_same_v<D, bool>) {
    double d = 0;
    if (v == "True" || v == "true")
      d = 1;
    else if (v != "False" && v != "false" && !parseWhole(v, d))
      return false;
    out = d != 0;
    return true;
  } else if constexpr (kIsIntType<D>) {
    using Wide = std::conditional_t<std::is_signed_v<D>, int64_t, uint64_t>;
    Wide w;
    if (parseWhole(v, w)) {
      out = static_cast<D>(w);
      return true;
    }
    double d; // "2.0", "1e3": as a float cast to the integer type
    if (!parseWhole(v, d)) return false;
    out = floatToInt<D>(d);
    return true;
  } else if constexpr (std::is_same_v<D, float>) {
    return parseWhole(v, out); // one correct rounding to float
  } else {
    double d;
    if (!parseWhole(v, d)) return false;
    out = fromDouble<D>(d);
    return true;
  }
}

Expected<Tensor> stringsToNumbers(const KernelContext &ctx, const Tensor &x, DType to) {
  Tensor out(to, x.shape());
  const std::string *src = x.data<std::string>();
  int64_t badAt = -1;
  visitDType(to, [&](auto tag) {
    using D = decltype(tag);
    if constexpr (!std::is_same_v<D, std::string>) {
      D *dst = out.data<D>();
      for (int64_t i = 0; i < x.numel() && badAt < 0; ++i)
        if (!parseElement(src[i], dst[i])) badAt = i;
    }
  });
  if (badAt >= 0)
    return ctx.error("cannot convert string \"", src[badAt], "\" (element ", badAt, ") to ",
                     dtypeName(to));
  return out;
}

// ---- kernels --------------------------------------------------------------------------

Expected<Tensor> castTensor(const KernelContext &ctx, const Tensor &x, DType to) {
  if (x.dtype() == to) return x;
  if (to == DType::String) return numbersToStrings(x);
  if (x.dtype() == DType::String) return stringsToNumbers(ctx, x, to);
  return convertTensor(x, to);
}

Status castKernel(KernelContext &ctx) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  int64_t code = ctx.node().getInt("to");
  std::optional<DType> to = dtypeFromOnnx(static_cast<int>(code));
  if (!to) return ctx.error("cast to ONNX dtype ", code, " is not supported");
  KILN_ASSIGN_OR_RETURN(Tensor y, castTensor(ctx, ctx.in(0), *to));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

Status castLikeKernel(KernelContext &ctx) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 1));
  KILN_ASSIGN_OR_RETURN(Tensor y, castTensor(ctx, ctx.in(0), ctx.in(1).dtype()));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

} // namespace

void registerCastKernels(KernelTable &t) {
  t.add(OpKind::Cast, castKernel);
  t.add(OpKind::CastLike, castLikeKernel);
}

} // namespace kiln
