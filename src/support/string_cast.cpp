// support/string_cast.h: numbers to strings and back, numpy's way.
#include "support/string_cast.h"

#include "support/half.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace kiln {

namespace {

template <class T>
constexpr bool kHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T> constexpr bool kIntType = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// A double rounded to float with round-to-odd, so that rounding the result
// again to f16/bf16 gives the correctly rounded double (plain double ->
// float -> half rounds twice).
float roundToOddFloat(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return bitsToFloat(floatBits(f) | 1u);
}

// Truncation toward zero; NaN gives 0 and values past D's range saturate
// (Cast's rule for floats to integers).
template <class D> D floatToInt(double v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (t <= static_cast<double>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
  if (t >= std::ldexp(1.0, std::numeric_limits<D>::digits)) return std::numeric_limits<D>::max();
  return static_cast<D>(t);
}

template <class T> double toDouble(T v) {
  if constexpr (kHalfLike<T>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

// ---- numbers to strings --------------------------------------------------------------

// The digits and the exponent of scientific text ("3.91e-02" -> ("391",
// -2)), trailing zeros dropped.
std::pair<std::string, int> digitsOf(const std::string &s) {
  size_t e = s.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] >= '0' && s[i] <= '9') digits += s[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  return {digits, std::atoi(s.c_str() + e + 1)};
}

// The shortest decimal digits of v (as type T) and the power of ten of the
// first digit: 0.0391 -> ("391", -2).
template <class T> std::pair<std::string, int> shortestDigits(T v) {
  char buf[64];
  std::to_chars_result r;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  } else {
    // No to_chars for f16/bf16: the first precision that reads back to v.
    const double d = toDouble(v);
    for (int p = 0; p < 17; ++p) {
      r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific, p);
      double back = 0;
      std::from_chars(buf, r.ptr, back);
      if (T(roundToOddFloat(back)).bits == v.bits) break;
    }
  }
  return digitsOf(std::string(buf, r.ptr));
}

// numpy's str() of a non-zero finite d from its shortest digits and the
// power of ten of the first: positional for 1e-4 <= |d| < 1e16 (always with
// a fraction part), scientific otherwise ("1e-05", "1.5e+16").
std::string formatDigits(double d, const std::string &digits, int exp) {
  const std::string sign = std::signbit(d) ? "-" : "";
  const double mag = std::fabs(d);
  if (mag >= 1e-4 && mag < 1e16) {
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

// numpy's str() of a float of any dtype.
template <class T> std::string floatToString(T v) {
  const double d = toDouble(v);
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  auto [digits, exp] = shortestDigits(v);
  return formatDigits(d, digits, exp);
}

Tensor numbersToStringsInto(const Tensor &x, Tensor out) {
  std::string *dst = out.data<std::string>();
  visitDType(x.dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S *src = x.data<S>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if constexpr (std::is_same_v<S, std::string>)
        dst[i] = src[i];
      else if constexpr (std::is_same_v<S, bool>)
        dst[i] = src[i] ? "True" : "False";
      else if constexpr (kIntType<S>)
        dst[i] = std::to_string(src[i] + 0); // int8 as a number
      else
        dst[i] = floatToString(src[i]);
    }
  });
  return out;
}

// ---- strings to numbers --------------------------------------------------------------

// The text without surrounding white space and one leading '+' (from_chars
// accepts '-' only).
std::string_view numberText(const std::string &s) {
  std::string_view v(s);
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!v.empty() && space(v.front())) v.remove_prefix(1);
  while (!v.empty() && space(v.back())) v.remove_suffix(1);
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
  } else if constexpr (kIntType<D>) {
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
    if constexpr (kHalfLike<D>)
      out = D(roundToOddFloat(d));
    else
      out = d;
    return true;
  }
}

Expected<Tensor> stringsToNumbersInto(const Tensor &x, Tensor out) {
  const std::string *src = x.data<std::string>();
  int64_t badAt = -1;
  visitDType(out.dtype(), [&](auto tag) {
    using D = decltype(tag);
    if constexpr (!std::is_same_v<D, std::string>) {
      D *dst = out.data<D>();
      for (int64_t i = 0; i < x.numel() && badAt < 0; ++i)
        if (!parseElement(src[i], dst[i])) badAt = i;
    }
  });
  if (badAt >= 0)
    return makeError("cannot convert string \"", src[badAt], "\" (element ", badAt, ") to ",
                     dtypeName(out.dtype()));
  return out;
}

} // namespace

Tensor numbersToStrings(const Tensor &x) {
  return numbersToStringsInto(x, Tensor(DType::String, x.shape()));
}

Expected<Tensor> stringsToNumbers(const Tensor &x, DType to) {
  return stringsToNumbersInto(x, Tensor(to, x.shape()));
}

} // namespace kiln
