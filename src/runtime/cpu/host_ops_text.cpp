// Host ops on strings (host_ops.h, "text"): Cast to and from strings
// (support/string_cast.h, shared with the reference interpreter),
// StringNormalizer and TfIdfVectorizer. Case mapping is ASCII only,
// which is what the "en_US" and "C" locales mean for the ASCII range.
#include "runtime/cpu/host_ops.h"

#include "runtime/cpu/host_ops_util.h"
#include "support/string_cast.h"

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
  if (to == DType::String) return kiln::numbersToStrings(x);
  return kiln::stringsToNumbers(x, to);
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
