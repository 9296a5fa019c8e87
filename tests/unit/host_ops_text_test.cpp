// Differential tests of the text host ops (runtime/cpu/host_ops.h: Cast to
// and from strings, StringNormalizer, TfIdfVectorizer) against the reference
// interpreter, character for character; and of Det and the random ops,
// which must reproduce the interpreter's numbers from the same seed.
#include "runtime/cpu/host_ops.h"

#include "value_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace kiln {
namespace {

namespace host = runtime::host;
using testing::interpretNode;
using testing::valueDiff;
using Attrs = std::map<std::string, Attribute>;

Tensor strings(const std::vector<std::string> &v, Shape64 shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  Tensor t(DType::String, shape);
  std::copy(v.begin(), v.end(), t.data<std::string>());
  return t;
}

// The host op's result must be the interpreter's, or both must fail.
void expectSame(const Expected<Tensor> &got, const Expected<std::vector<RtValue>> &want,
                const std::string &what) {
  if (!want.ok()) {
    EXPECT_FALSE(got.ok()) << what << ": the interpreter failed (" << want.error().message
                           << ") but the host op ran";
    return;
  }
  ASSERT_TRUE(got.ok()) << what << ": " << got.error().message;
  EXPECT_EQ(valueDiff(RtValue(*got), (*want)[0]), "") << what;
}

// Numbers of every dtype print as numpy prints them: shortest round-trip
// digits, positional or scientific by magnitude, nan/inf, True/False.
TEST(HostOpsText, CastOfEveryNumberDTypeToStringMatchesInterpreter) {
  std::mt19937_64 rng(1);
  const double specials[] = {0.0,    -0.0,   1.0,      0.1,   1e-4,  9.999e-5, 1e16,
                             1.5e16, 123.25, -7.5e-8,  3e38,  65504, 1.0 / 3, 2.5e-308,
                             std::numeric_limits<double>::quiet_NaN(),
                             -std::numeric_limits<double>::infinity()};
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::U8,
                      DType::I16, DType::I32, DType::I64, DType::U64, DType::Bool}) {
    Tensor x(dtype, {64});
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (isFloat(dtype))
        x.setDouble(i, i < 16 ? specials[i]
                              : std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                                           int(rng() % 80) - 40));
      else
        x.setInt(i, int64_t(rng() % 2000) - 1000);
    }
    expectSame(host::castStrings(x, DType::String),
               interpretNode(OpKind::Cast, {RtValue(x)}, {{"to", Attribute::ofInt(8)}}),
               std::string("cast ") + std::string(dtypeName(dtype)) + " to string");
  }
}

// Text parses as numpy parses it: spaces, '+', nan/inf spellings, floats
// into integers; text that is not a number is an error for both.
TEST(HostOpsText, CastOfStringsToEveryNumberDTypeMatchesInterpreter) {
  const std::vector<std::vector<std::string>> inputs = {
      {"1", " 2.5 ", "+3", "-4e2", "nan", "INF", "-Infinity", "0x1p3", "1e400", "-0"},
      {"7", "True", "false", "2.0", "1e3", "  -12  "},
      {"12abc"},
      {""}};
  for (const auto &text : inputs)
    for (DType to : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::U8,
                     DType::I32, DType::I64, DType::U64, DType::Bool}) {
      Tensor x = strings(text);
      expectSame(host::castStrings(x, to),
                 interpretNode(OpKind::Cast, {RtValue(x)},
                               {{"to", Attribute::ofInt(onnxCodeOf(to))}}),
                 "cast '" + text[0] + "'... to " + std::string(dtypeName(to)));
    }
}

TEST(HostOpsText, StringNormalizerEveryCaseActionAndSensitivityMatchesInterpreter) {
  const Tensor words = strings({"Monday", "tuesday", "MONDAY", "wednesday", "ÄÖ", ""});
  for (const std::string action : {"NONE", "LOWER", "UPPER"})
    for (int sensitive = 0; sensitive <= 1; ++sensitive)
      for (const std::vector<std::string> &stop :
           {std::vector<std::string>{}, {"monday"},
            {"Monday", "tuesday", "MONDAY", "wednesday", "ÄÖ", ""}})
        for (const Tensor &x : {words, words.reshaped({1, 6})}) {
          host::StringNormalizerParams p;
          p.caseChange = action == "LOWER"   ? host::CaseChange::Lower
                         : action == "UPPER" ? host::CaseChange::Upper
                                             : host::CaseChange::None;
          p.caseSensitive = sensitive;
          p.stopwords = stop;
          Attrs attrs{{"case_change_action", Attribute::ofString(action)},
                      {"is_case_sensitive", Attribute::ofInt(sensitive)}};
          if (!stop.empty()) attrs["stopwords"] = Attribute::ofStrings(stop);
          expectSame(host::stringNormalizer(x, p),
                     interpretNode(OpKind::StringNormalizer, {RtValue(x)}, attrs),
                     action + " sensitive=" + std::to_string(sensitive) + " stopwords " +
                         std::to_string(stop.size()) + " rank " + std::to_string(x.rank()));
        }
}

// Int and string pools, every weighting mode, 1- and 2-grams with skips,
// rows of a batch.
TEST(HostOpsText, TfIdfVectorizerEveryModeAndPoolMatchesInterpreter) {
  std::mt19937_64 rng(3);
  for (int c = 0; c < 60; ++c) {
    const bool stringPool = c % 2;
    const std::string mode = c % 3 == 0 ? "TF" : c % 3 == 1 ? "IDF" : "TFIDF";
    host::TfIdfParams p;
    p.mode = mode == "TF" ? host::TfIdfMode::TF
             : mode == "IDF" ? host::TfIdfMode::IDF
                             : host::TfIdfMode::TFIDF;
    p.minGramLength = 1 + int64_t(rng() % 2);
    p.maxGramLength = p.minGramLength + int64_t(rng() % 2);
    p.maxSkipCount = int64_t(rng() % 4);
    // Pool: four 1-grams then three 2-grams of the tokens 2..5.
    const std::vector<int64_t> pool = {2, 3, 4, 5, 2, 3, 3, 4, 5, 5};
    p.ngramCounts = {0, 4};
    p.ngramIndexes = {0, 1, 2, 3, 4, 5, 6};
    for (int64_t v : pool) {
      p.poolInt64s.push_back(v);
      p.poolStrings.push_back("t" + std::to_string(v));
    }
    if (stringPool) p.poolInt64s.clear();
    else p.poolStrings.clear();
    if (rng() % 2) p.weights = {0.5f, 1, 2, 3, 0.25f, 4, 1.5f};
    const Shape64 shape = rng() % 2 ? Shape64{3, 8} : Shape64{9};
    Tensor x(stringPool ? DType::String : (rng() % 2 ? DType::I32 : DType::I64), shape);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t v = 1 + int64_t(rng() % 5);
      if (stringPool) x.data<std::string>()[i] = "t" + std::to_string(v);
      else x.setInt(i, v);
    }
    Attrs attrs{{"mode", Attribute::ofString(mode)},
                {"min_gram_length", Attribute::ofInt(p.minGramLength)},
                {"max_gram_length", Attribute::ofInt(p.maxGramLength)},
                {"max_skip_count", Attribute::ofInt(p.maxSkipCount)},
                {"ngram_counts", Attribute::ofInts(p.ngramCounts)},
                {"ngram_indexes", Attribute::ofInts(p.ngramIndexes)}};
    if (stringPool) attrs["pool_strings"] = Attribute::ofStrings(p.poolStrings);
    else attrs["pool_int64s"] = Attribute::ofInts(p.poolInt64s);
    if (!p.weights.empty()) attrs["weights"] = Attribute::ofFloats(p.weights);
    expectSame(host::tfIdfVectorizer(x, p),
               interpretNode(OpKind::TfIdfVectorizer, {RtValue(x)}, attrs),
               "tfidf case " + std::to_string(c));
  }
}

TEST(HostOpsMath, DetOfBatchesOfMatricesMatchesInterpreter) {
  std::mt19937_64 rng(4);
  for (DType dtype : {DType::F32, DType::F64, DType::F16})
    for (const Shape64 &shape : {Shape64{3, 3}, Shape64{2, 4, 4}, Shape64{2, 1, 1},
                                 Shape64{0, 2, 2}, Shape64{2, 0, 0}, Shape64{2, 3}}) {
      Tensor x(dtype, shape);
      for (int64_t i = 0; i < x.numel(); ++i)
        x.setDouble(i, std::uniform_real_distribution<double>(-2, 2)(rng));
      if (x.numel() >= 9 && shape.size() == 2) x.setDouble(3, 0), x.setDouble(0, 0); // a pivot swap
      expectSame(host::det(x), interpretNode(OpKind::Det, {RtValue(x)}),
                 std::string("det ") + RtValue(x).describe());
    }
}

// Same seed, same numbers: the seed attribute's bits, or seed 0 without it
// (the interpreter's default), for every distribution and dtype form.
TEST(HostOpsMath, RandomOpsReproduceTheInterpretersNumbersFromTheSeed) {
  const Tensor probabilities = [] {
    Tensor t(DType::F32, {4, 5});
    for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, double(i % 7) / 6);
    return t;
  }();
  struct Case {
    OpKind op;
    host::RandomKind kind;
  };
  for (Case c : {Case{OpKind::RandomUniformLike, host::RandomKind::Uniform},
                 Case{OpKind::RandomNormalLike, host::RandomKind::Normal},
                 Case{OpKind::Bernoulli, host::RandomKind::Bernoulli}})
    for (int form = 0; form < 4; ++form) {
      host::RandomParams p;
      p.kind = c.kind;
      Attrs attrs;
      if (form & 1) {
        p.hasSeed = true;
        p.seed = 7.5f;
        attrs["seed"] = Attribute::ofFloat(p.seed);
      }
      if (form & 2) {
        p.hasDType = true;
        p.dtype = DType::F64;
        attrs["dtype"] = Attribute::ofInt(11);
      }
      if (c.kind == host::RandomKind::Uniform) {
        p.low = -3;
        p.high = 5;
        attrs["low"] = Attribute::ofFloat(-3);
        attrs["high"] = Attribute::ofFloat(5);
      } else if (c.kind == host::RandomKind::Normal) {
        p.mean = 2;
        p.scale = 0.5f;
        attrs["mean"] = Attribute::ofFloat(2);
        attrs["scale"] = Attribute::ofFloat(0.5f);
      }
      expectSame(host::randomLike(probabilities, p),
                 interpretNode(c.op, {RtValue(probabilities)}, attrs),
                 std::string(opName(c.op)) + " form " + std::to_string(form));
    }
}

} // namespace
} // namespace kiln
