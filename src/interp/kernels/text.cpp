// Interpreter kernels for the text ops: StringNormalizer (stopword removal
// and case change) and TfIdfVectorizer (n-gram counts, optionally with
// skips, weighted as TF, IDF or TF-IDF). Case mapping is ASCII only, which
// is what the "en_US" and "C" locales mean for the ASCII range; bytes of
// multi-byte UTF-8 characters pass through unchanged.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>
#include <map>
#include <set>

namespace kiln {

namespace {

std::string asciiLower(std::string s) {
  for (char &c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string asciiUpper(std::string s) {
  for (char &c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// ---- StringNormalizer --------------------------------------------------------------

// Input [C] or [1, C]; output [C'] or [1, C'] with the stopwords removed,
// or a single empty string ([1] or [1, 1]) when nothing is left.
Status stringNormalizerKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (x.dtype() != DType::String)
    return ctx.error("input must be a string tensor, got ", dtypeName(x.dtype()));
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1)))
    return ctx.error("input must have shape [C] or [1, C], got ", shapeToString(x.shape()));
  const std::string action = ctx.node().getString("case_change_action");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return ctx.error("case_change_action must be NONE, LOWER or UPPER, got '", action, "'");
  const bool caseSensitive = ctx.node().getInt("is_case_sensitive") != 0;

  std::set<std::string> stopwords;
  for (const std::string &w : ctx.node().getStrings("stopwords"))
    stopwords.insert(caseSensitive ? w : asciiLower(w));
  std::vector<std::string> kept;
  for (const std::string &s : x.span<std::string>()) {
    if (stopwords.count(caseSensitive ? s : asciiLower(s))) continue;
    kept.push_back(action == "LOWER" ? asciiLower(s) : action == "UPPER" ? asciiUpper(s) : s);
  }
  if (kept.empty()) kept.emplace_back();
  const int64_t n = static_cast<int64_t>(kept.size());
  Tensor out(DType::String, x.rank() == 1 ? Shape64{n} : Shape64{1, n});
  std::copy(kept.begin(), kept.end(), out.data<std::string>());
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// ---- TfIdfVectorizer ----------------------------------------------------------------

enum class Weighting { TF, IDF, TFIDF };

// The n-grams of the pool, each mapped to the output coordinate it counts
// into. Tokens are int64 values or strings.
template <class Token> struct NgramPool {
  std::map<std::vector<Token>, int64_t> coordinate;
  int64_t outputSize = 0;
};

// The pool holds the 1-grams from ngram_counts[0], the 2-grams from
// ngram_counts[1], and so on; n-grams are numbered in pool order and
// ngram_indexes maps that number to an output coordinate. Only lengths in
// [min_gram_length, max_gram_length] are kept (others can never match).
template <class Token>
Expected<NgramPool<Token>> buildPool(const KernelContext &ctx, const std::vector<Token> &pool) {
  const Node &n = ctx.node();
  const std::vector<int64_t> counts = n.getInts("ngram_counts");
  const std::vector<int64_t> indexes = n.getInts("ngram_indexes");
  const int64_t minGram = n.getInt("min_gram_length"), maxGram = n.getInt("max_gram_length");
  NgramPool<Token> result;
  for (int64_t c : indexes) {
    if (c < 0) return ctx.error("ngram_indexes must not be negative, got ", c);
    result.outputSize = std::max(result.outputSize, c + 1);
  }
  const int64_t poolSize = static_cast<int64_t>(pool.size());
  int64_t id = 0;
  for (size_t level = 0; level < counts.size(); ++level) {
    const int64_t gram = static_cast<int64_t>(level) + 1;
    const int64_t start = counts[level];
    const int64_t end = level + 1 < counts.size() ? counts[level + 1] : poolSize;
    if (start < 0 || end < start || end > poolSize || (end - start) % gram != 0)
      return ctx.error("ngram_counts ", start, "..", end, " do not delimit whole ", gram,
                       "-grams of a pool of ", poolSize);
    for (int64_t at = start; at < end; at += gram, ++id) {
      if (gram < minGram || gram > maxGram) continue;
      if (id >= static_cast<int64_t>(indexes.size()))
        return ctx.error("ngram_indexes has ", indexes.size(),
                         " entries, the pool has more n-grams");
      std::vector<Token> key(pool.begin() + at, pool.begin() + at + gram);
      result.coordinate[key] = indexes[id];
    }
  }
  return result;
}

// Counts, for one row of tokens, every n-gram of the pool: n consecutive
// tokens taken `distance` apart, for distances 1 .. max_skip_count + 1
// (1-grams once, since skipping does not change them).
template <class Token>
void countRow(const NgramPool<Token> &pool, const Token *row, int64_t length, int64_t minGram,
              int64_t maxGram, int64_t maxSkip, float *counts) {
  std::vector<Token> key;
  // Only n-grams that fit in the row: gram <= length and (gram - 1) *
  // distance < length, so no bound below overflows whatever the attributes.
  const int64_t lastGram = std::min(maxGram, length);
  for (int64_t gram = std::max<int64_t>(minGram, 1); gram <= lastGram; ++gram) {
    const int64_t fitting = gram == 1 ? 1 : (length - 1) / (gram - 1);
    const int64_t distances = maxSkip < fitting ? maxSkip + 1 : fitting;
    for (int64_t distance = 1; distance <= distances; ++distance) {
      for (int64_t start = 0; start + (gram - 1) * distance < length; ++start) {
        key.clear();
        for (int64_t k = 0; k < gram; ++k) key.push_back(row[start + k * distance]);
        auto it = pool.coordinate.find(key);
        if (it != pool.coordinate.end()) counts[it->second] += 1.0f;
      }
    }
  }
}

// TF: counts; IDF: 1 where counted, times the weight; TFIDF: counts times
// the weight. Weights are per output coordinate (absent: 1).
Status applyWeighting(const KernelContext &ctx, Weighting mode, Tensor &out) {
  const std::vector<float> weights = ctx.node().getFloats("weights");
  const int64_t size = out.dim(out.rank() - 1);
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < size)
    return ctx.error("weights has ", weights.size(), " entries for ", size, " outputs");
  float *y = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    float w = weights.empty() ? 1.0f : weights[i % size];
    if (mode == Weighting::IDF)
      y[i] = y[i] > 0 ? w : 0.0f;
    else if (mode == Weighting::TFIDF)
      y[i] *= w;
  }
  return Status::success();
}

Expected<Weighting> readWeighting(const KernelContext &ctx) {
  const std::string mode = ctx.node().getString("mode");
  if (mode == "TF") return Weighting::TF;
  if (mode == "IDF") return Weighting::IDF;
  if (mode == "TFIDF") return Weighting::TFIDF;
  return ctx.error("mode must be TF, IDF or TFIDF, got '", mode, "'");
}

// Fills `out` ([rows, size]) from the token rows of the input.
template <class Token>
Status vectorize(const KernelContext &ctx, const std::vector<Token> &pool,
                 const std::vector<Token> &tokens, int64_t rows, int64_t length, Tensor &out) {
  KILN_ASSIGN_OR_RETURN(NgramPool<Token> ngrams, buildPool(ctx, pool));
  const Node &n = ctx.node();
  const int64_t size = out.dim(out.rank() - 1);
  for (int64_t r = 0; r < rows; ++r)
    countRow(ngrams, tokens.data() + r * length, length, n.getInt("min_gram_length"),
             n.getInt("max_gram_length"), n.getInt("max_skip_count"), out.data<float>() + r * size);
  return Status::success();
}

// Input [C] or [N, C] of int32/int64 or strings; output f32 [size] or
// [N, size] with size = max(ngram_indexes) + 1.
Status tfIdfVectorizerKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  const Node &n = ctx.node();
  if (x.rank() != 1 && x.rank() != 2)
    return ctx.error("input must have shape [C] or [N, C], got ", shapeToString(x.shape()));
  KILN_ASSIGN_OR_RETURN(Weighting mode, readWeighting(ctx));
  if (n.getInt("min_gram_length") < 1 ||
      n.getInt("max_gram_length") < n.getInt("min_gram_length") || n.getInt("max_skip_count") < 0)
    return ctx.error("needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  const std::vector<std::string> poolStrings = n.getStrings("pool_strings");
  const bool stringPool = !poolStrings.empty();
  if (stringPool != (x.dtype() == DType::String))
    return ctx.error(stringPool ? "pool_strings needs a string input, got "
                                : "pool_int64s needs an integer input, got ",
                     dtypeName(x.dtype()));
  if (!stringPool && !isInt(x.dtype()))
    return ctx.error("input must be int32, int64 or string, got ", dtypeName(x.dtype()));

  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, length = x.dim(x.rank() - 1);
  int64_t size = 0;
  for (int64_t c : n.getInts("ngram_indexes")) size = std::max(size, c + 1);
  Tensor out(DType::F32, x.rank() == 2 ? Shape64{rows, size} : Shape64{size});
  if (stringPool) {
    std::vector<std::string> tokens(x.span<std::string>().begin(), x.span<std::string>().end());
    KILN_RETURN_IF_ERROR(vectorize(ctx, poolStrings, tokens, rows, length, out));
  } else {
    KILN_RETURN_IF_ERROR(vectorize(ctx, n.getInts("pool_int64s"), toInt64s(x), rows, length, out));
  }
  KILN_RETURN_IF_ERROR(applyWeighting(ctx, mode, out));
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

} // namespace

void registerTextKernels(KernelTable &t) {
  t.add(OpKind::StringNormalizer, stringNormalizerKernel);
  t.add(OpKind::TfIdfVectorizer, tfIdfVectorizerKernel);
}

} // namespace kiln
