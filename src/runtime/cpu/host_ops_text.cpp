// Host ops on strings (host_ops.h, "text"): Cast to and from strings,
// StringNormalizer and TfIdfVectorizer. Number formatting and parsing follow
// numpy (str() of a value, float(text)), as the reference interpreter does,
// so results agree character for character. Case mapping is ASCII only,
// which is what the "en_US" and "C" locales mean for the ASCII range.
#include "runtime/cpu/host_ops.h"

#include "runtime/cpu/host_ops_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

namespace kiln::runtime::host {

namespace {

using namespace detail;

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

Tensor numbersToStrings(const Tensor &x, Tensor out) {
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

Expected<Tensor> stringsToNumbers(const Tensor &x, Tensor out) {
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

// ---- StringNormalizer ------------------------------------------------------------------

std::string changeCase(std::string s, CaseChange change) {
  const char from = change == CaseChange::Lower ? 'A' : 'a';
  const char to = change == CaseChange::Lower ? 'a' : 'A';
  if (change != CaseChange::None)
    for (char &c : s)
      if (c >= from && c <= from + 25) c = static_cast<char>(c - from + to);
  return s;
}

// ---- TfIdfVectorizer ---------------------------------------------------------------------

// Tokens are strings; an int64 token is its 8 bytes, so one matcher
// serves both pools (only equality matters to it).
using Token = std::string;
using NgramPool = std::map<std::vector<Token>, int64_t>; // n-gram -> output coordinate

Token intToken(int64_t v) { return Token(reinterpret_cast<const char *>(&v), sizeof v); }

// The pool holds the 1-grams from ngramCounts[0], the 2-grams from
// ngramCounts[1], and so on; n-grams are numbered in pool order and
// ngramIndexes maps that number to an output coordinate. Only lengths in
// [minGramLength, maxGramLength] are kept (others can never match).
Expected<NgramPool> buildPool(const TfIdfParams &p, const std::vector<Token> &pool) {
  NgramPool result;
  const int64_t poolSize = static_cast<int64_t>(pool.size());
  int64_t id = 0;
  for (size_t level = 0; level < p.ngramCounts.size(); ++level) {
    const int64_t gram = static_cast<int64_t>(level) + 1;
    const int64_t start = p.ngramCounts[level];
    const int64_t end = level + 1 < p.ngramCounts.size() ? p.ngramCounts[level + 1] : poolSize;
    if (start < 0 || end < start || end > poolSize || (end - start) % gram != 0)
      return makeError("ngram_counts ", start, "..", end, " do not delimit whole ", gram,
                       "-grams of a pool of ", poolSize);
    for (int64_t at = start; at < end; at += gram, ++id) {
      if (gram < p.minGramLength || gram > p.maxGramLength) continue;
      if (id >= static_cast<int64_t>(p.ngramIndexes.size()))
        return makeError("ngram_indexes has ", p.ngramIndexes.size(),
                         " entries, the pool has more n-grams");
      result[std::vector<Token>(pool.begin() + at, pool.begin() + at + gram)] = p.ngramIndexes[id];
    }
  }
  return result;
}

// Counts, for one row of tokens, every n-gram of the pool: n consecutive
// tokens taken `distance` apart, for distances 1 .. maxSkipCount + 1
// (1-grams once, since skipping does not change them).
void countRow(const TfIdfParams &p, const NgramPool &pool, const Token *row, int64_t length,
              float *counts) {
  std::vector<Token> key;
  // Only n-grams that fit in the row, so no bound below overflows.
  const int64_t lastGram = std::min(p.maxGramLength, length);
  for (int64_t gram = std::max<int64_t>(p.minGramLength, 1); gram <= lastGram; ++gram) {
    const int64_t fitting = gram == 1 ? 1 : (length - 1) / (gram - 1);
    const int64_t distances = p.maxSkipCount < fitting ? p.maxSkipCount + 1 : fitting;
    for (int64_t distance = 1; distance <= distances; ++distance)
      for (int64_t start = 0; start + (gram - 1) * distance < length; ++start) {
        key.clear();
        for (int64_t k = 0; k < gram; ++k) key.push_back(row[start + k * distance]);
        auto it = pool.find(key);
        if (it != pool.end()) counts[it->second] += 1.0f;
      }
  }
}

// TF: counts; IDF: the weight where counted; TFIDF: counts times the
// weight. Weights are per output coordinate (none: 1).
Status applyWeighting(const TfIdfParams &p, Tensor &out) {
  const int64_t size = out.dim(out.rank() - 1);
  if (!p.weights.empty() && static_cast<int64_t>(p.weights.size()) < size)
    return makeError("weights has ", p.weights.size(), " entries for ", size, " outputs");
  float *y = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float w = p.weights.empty() ? 1.0f : p.weights[i % size];
    if (p.mode == TfIdfMode::IDF)
      y[i] = y[i] > 0 ? w : 0.0f;
    else if (p.mode == TfIdfMode::TFIDF)
      y[i] *= w;
  }
  return Status::success();
}

} // namespace

Expected<Tensor> castStrings(const Tensor &x, DType to) {
  if (x.dtype() == to) return x;
  if (to != DType::String && x.dtype() != DType::String)
    return makeError("cast from ", dtypeName(x.dtype()), " to ", dtypeName(to),
                     " involves no strings");
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(to, x.shape()));
  if (to == DType::String) return numbersToStrings(x, std::move(out));
  return stringsToNumbers(x, std::move(out));
}

Expected<Tensor> stringNormalizer(const Tensor &x, const StringNormalizerParams &params) {
  if (x.dtype() != DType::String)
    return makeError("input must be a string tensor, got ", dtypeName(x.dtype()));
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1)))
    return makeError("input must have shape [C] or [1, C], got ", shapeToString(x.shape()));
  const CaseChange fold = params.caseSensitive ? CaseChange::None : CaseChange::Lower;
  std::set<std::string> stopwords;
  for (const std::string &w : params.stopwords) stopwords.insert(changeCase(w, fold));
  std::vector<std::string> kept;
  for (const std::string &s : x.span<std::string>())
    if (!stopwords.count(changeCase(s, fold))) kept.push_back(changeCase(s, params.caseChange));
  if (kept.empty()) kept.emplace_back();
  const int64_t n = static_cast<int64_t>(kept.size());
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(DType::String, x.rank() == 1 ? Shape64{n}
                                                                           : Shape64{1, n}));
  std::move(kept.begin(), kept.end(), out.data<std::string>());
  return out;
}

Expected<Tensor> tfIdfVectorizer(const Tensor &x, const TfIdfParams &p) {
  if (x.rank() != 1 && x.rank() != 2)
    return makeError("input must have shape [C] or [N, C], got ", shapeToString(x.shape()));
  if (p.minGramLength < 1 || p.maxGramLength < p.minGramLength || p.maxSkipCount < 0)
    return makeError("needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  const bool stringPool = !p.poolStrings.empty();
  if (stringPool != (x.dtype() == DType::String))
    return makeError(stringPool ? "pool_strings needs a string input, got "
                                : "pool_int64s needs an integer input, got ",
                     dtypeName(x.dtype()));
  if (!stringPool && !isInt(x.dtype()))
    return makeError("input must be int32, int64 or string, got ", dtypeName(x.dtype()));
  int64_t size = 0;
  for (int64_t c : p.ngramIndexes) {
    if (c < 0) return makeError("ngram_indexes must not be negative, got ", c);
    size = std::max(size, c + 1);
  }
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, length = x.dim(x.rank() - 1);
  KILN_ASSIGN_OR_RETURN(Tensor out,
                        newTensor(DType::F32, x.rank() == 2 ? Shape64{rows, size} : Shape64{size}));
  std::vector<Token> pool = p.poolStrings, tokens; // (poolStrings is empty for ints)
  if (!stringPool)
    for (int64_t v : p.poolInt64s) pool.push_back(intToken(v));
  for (int64_t i = 0; i < x.numel(); ++i)
    tokens.push_back(stringPool ? x.data<std::string>()[i] : intToken(x.getInt(i)));
  KILN_ASSIGN_OR_RETURN(NgramPool ngrams, buildPool(p, pool));
  for (int64_t r = 0; r < rows; ++r)
    countRow(p, ngrams, tokens.data() + r * length, length, out.data<float>() + r * size);
  KILN_RETURN_IF_ERROR(applyWeighting(p, out));
  return out;
}

} // namespace kiln::runtime::host
