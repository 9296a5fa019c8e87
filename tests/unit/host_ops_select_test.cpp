// Differential tests of the selection host ops (runtime/cpu/host_ops.h:
// NonZero, Compress, TopK, Unique, NonMaxSuppression) against the reference
// interpreter: random inputs of many shapes (empty and rank 0 included) and
// dtypes, special floats (NaN, -0, ties), every attribute form; each result
// must be the interpreter's bits, or an error where the interpreter fails.
#include "runtime/cpu/host_ops.h"

#include "value_check.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace kiln {
namespace {

namespace host = runtime::host;
using testing::interpretNode;
using testing::valueDiff;
using Attrs = std::map<std::string, Attribute>;

constexpr int kCases = 200;

const DType kDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::U8, DType::I8,
                         DType::I16, DType::I32, DType::I64, DType::U64, DType::Bool};

class Random {
public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  DType dtype() { return kDTypes[uniform(0, std::size(kDTypes) - 1)]; }
  Shape64 shape(int64_t maxRank, int64_t maxDim) {
    Shape64 s(uniform(0, maxRank));
    for (int64_t &d : s) d = chance(0.05) ? 0 : uniform(1, maxDim);
    return s;
  }
  // Few distinct values (ties and repeats are the interesting cases), with
  // NaN, -0 and infinities among the floats.
  Tensor tensor(DType dtype, const Shape64 &shape, int64_t spread = 4) {
    Tensor t(dtype, shape);
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(), -0.0,
                               std::numeric_limits<double>::infinity(), 0.5};
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (dtype == DType::String)
        t.data<std::string>()[i] = std::string(uniform(0, 2), char('a' + uniform(0, spread)));
      else if (isFloat(dtype) && chance(0.1))
        t.setDouble(i, specials[uniform(0, 3)]);
      else if (dtype == DType::Bool)
        t.setInt(i, uniform(0, 1));
      else
        t.setInt(i, uniform(isUnsignedInt(dtype) ? 0 : -spread, spread));
    }
    return t;
  }
  int64_t axis(int64_t rank) {
    if (chance(0.05) || rank == 0) return uniform(-rank - 1, rank);
    int64_t a = uniform(0, rank - 1);
    return chance(0.5) ? a - rank : a;
  }

private:
  std::mt19937_64 rng_;
};

struct Tally {
  int ok = 0, failed = 0;
};

// The host op's results must be the interpreter's, or both must fail.
void expectSame(const Expected<std::vector<Tensor>> &got,
                const Expected<std::vector<RtValue>> &want, const std::string &what,
                Tally &tally) {
  if (!want.ok()) {
    ++tally.failed;
    EXPECT_FALSE(got.ok()) << what << ": the interpreter failed (" << want.error().message
                           << ") but the host op ran";
    return;
  }
  ++tally.ok;
  ASSERT_TRUE(got.ok()) << what << ": " << got.error().message;
  ASSERT_EQ(got->size(), want->size()) << what;
  for (size_t i = 0; i < got->size(); ++i)
    EXPECT_EQ(valueDiff(RtValue((*got)[i]), (*want)[i]), "") << what << ", output " << i;
}

void expectSame(const Expected<Tensor> &got, const Expected<std::vector<RtValue>> &want,
                const std::string &what, Tally &tally) {
  using All = Expected<std::vector<Tensor>>;
  All all = got.ok() ? All(std::vector<Tensor>{*got}) : All(got.error());
  expectSame(all, want, what, tally);
}

template <class F> void runCases(uint64_t seed, F &&body) {
  Random r(seed);
  Tally tally;
  for (int c = 0; c < kCases; ++c) body(r, tally);
  EXPECT_GT(tally.ok, kCases / 2) << tally.failed << " cases were errors";
}

std::string describe(const Tensor &t) { return RtValue(t).describe(); }

TEST(HostOpsSelect, NonZeroOfEveryDTypeAndRankMatchesInterpreter) {
  runCases(1, [](Random &r, Tally &tally) {
    DType dtype = r.chance(0.1) ? DType::String : r.dtype();
    Tensor x = r.tensor(dtype, r.shape(4, 4), 1);
    expectSame(host::nonZero(x), interpretNode(OpKind::NonZero, {RtValue(x)}),
               "nonzero " + describe(x), tally);
  });
}

TEST(HostOpsSelect, CompressAlongAnAxisOrFlattenedMatchesInterpreter) {
  runCases(2, [](Random &r, Tally &tally) {
    Tensor x = r.tensor(r.chance(0.1) ? DType::String : r.dtype(), r.shape(4, 4));
    host::CompressParams p;
    p.hasAxis = r.chance(0.7);
    p.axis = r.axis(x.rank());
    int64_t len = p.hasAxis && p.axis >= -x.rank() && p.axis < x.rank()
                      ? x.dim(p.axis < 0 ? p.axis + x.rank() : p.axis)
                      : x.numel();
    // Mostly no longer than the axis; sometimes longer (selecting past it
    // is an error, trailing zeros are not).
    Tensor cond = r.tensor(r.chance(0.8) ? DType::Bool : DType::I32,
                           {r.chance(0.1) ? len + 1 : r.uniform(0, std::max<int64_t>(len, 0))}, 1);
    Attrs attrs;
    if (p.hasAxis) attrs["axis"] = Attribute::ofInt(p.axis);
    expectSame(host::compress(x, cond, p),
               interpretNode(OpKind::Compress, {RtValue(x), RtValue(cond)}, attrs),
               "compress " + describe(x) + " by " + describe(cond), tally);
  });
}

TEST(HostOpsSelect, TopKLargestAndSmallestWithTiesAndNaNsMatchesInterpreter) {
  runCases(3, [](Random &r, Tally &tally) {
    Shape64 shape = r.shape(3, 5);
    if (shape.empty() && r.chance(0.8)) shape = {r.uniform(1, 6)};
    Tensor x = r.tensor(r.dtype(), shape, 3);
    host::TopKParams p{r.axis(x.rank()), r.chance(0.5), r.chance(0.8)};
    int64_t dim = x.rank() && p.axis >= -x.rank() && p.axis < x.rank()
                      ? x.dim(p.axis < 0 ? p.axis + x.rank() : p.axis)
                      : 1;
    Tensor k = r.chance(0.5) ? Tensor::scalar<int64_t>(r.uniform(-1, dim + 1))
                             : Tensor::fromVector<int32_t>({int32_t(r.uniform(0, dim))}, {1});
    Attrs attrs{{"axis", Attribute::ofInt(p.axis)},
                {"largest", Attribute::ofInt(p.largest)},
                {"sorted", Attribute::ofInt(p.sorted)}};
    expectSame(host::topK(x, k, p),
               interpretNode(OpKind::TopK, {RtValue(x), RtValue(k)}, attrs, 2),
               "topk " + describe(x) + " k " + std::to_string(k.getInt(0)) + " axis " +
                   std::to_string(p.axis) + (p.largest ? " largest" : " smallest"),
               tally);
  });
}

TEST(HostOpsSelect, UniqueSortedAndUnsortedWithAndWithoutAxisGivesAllFourOutputs) {
  runCases(4, [](Random &r, Tally &tally) {
    Tensor x = r.tensor(r.chance(0.15) ? DType::String : r.dtype(), r.shape(3, 4), 2);
    host::UniqueParams p;
    p.hasAxis = r.chance(0.5);
    p.axis = r.axis(x.rank());
    p.sorted = r.chance(0.6);
    Attrs attrs{{"sorted", Attribute::ofInt(p.sorted)}};
    if (p.hasAxis) attrs["axis"] = Attribute::ofInt(p.axis);
    expectSame(host::unique(x, p), interpretNode(OpKind::Unique, {RtValue(x)}, attrs, 4),
               "unique " + describe(x) + (p.hasAxis ? " axis " + std::to_string(p.axis) : "") +
                   (p.sorted ? " sorted" : ""),
               tally);
  });
}

// Boxes on a small grid, so overlaps, identical boxes and equal scores are
// common; the optional inputs absent, empty or given.
TEST(HostOpsSelect, NonMaxSuppressionWithEveryOptionalInputFormMatchesInterpreter) {
  runCases(5, [](Random &r, Tally &tally) {
    const int64_t batches = r.uniform(0, 2), classes = r.uniform(0, 3), boxes = r.uniform(0, 8);
    Tensor b(r.chance(0.8) ? DType::F32 : DType::F64, {batches, boxes, 4});
    for (int64_t i = 0; i < b.numel(); ++i) b.setDouble(i, r.uniform(0, 6) * 0.5);
    Tensor s(DType::F32, {batches, classes, boxes});
    for (int64_t i = 0; i < s.numel(); ++i)
      s.setDouble(i, r.chance(0.03) ? std::numeric_limits<double>::quiet_NaN()
                                    : r.uniform(0, 5) * 0.2);
    auto optional = [&](Tensor given) -> std::optional<RtValue> {
      const int form = int(r.uniform(0, 3));
      if (form == 0) return std::nullopt;
      if (form == 1) return RtValue(Tensor(given.dtype(), {0}));
      return RtValue(given);
    };
    std::vector<std::optional<RtValue>> in = {
        RtValue(b), RtValue(s), optional(Tensor::scalar<int64_t>(r.uniform(-1, 4))),
        optional(Tensor::fromVector<float>({float(r.uniform(0, 10) * 0.1)}, {1})),
        optional(Tensor::scalar<float>(float(r.uniform(0, 5) * 0.2)))};
    while (!in.empty() && !in.back()) in.pop_back();
    auto tensorOf = [&](size_t i) { return i < in.size() && in[i] ? in[i]->tensor : Tensor(); };
    host::NonMaxSuppressionParams p{r.chance(0.5)};
    expectSame(host::nonMaxSuppression(b, s, tensorOf(2), tensorOf(3), tensorOf(4), p),
               interpretNode(OpKind::NonMaxSuppression, in,
                             {{"center_point_box", Attribute::ofInt(p.centerPointBox)}}),
               "nms " + describe(b), tally);
  });
}

template <class T> std::string errorOf(const Expected<T> &e) {
  return e.ok() ? "" : e.error().message;
}

TEST(HostOpsSelect, ErrorsSayWhatIsWrong) {
  Tensor m(DType::F32, {2, 3});
  EXPECT_EQ(errorOf(host::topK(m, Tensor::scalar<int64_t>(4), {})),
            "k = 4 is out of range for axis 1 of size 3");
  EXPECT_EQ(errorOf(host::topK(m, Tensor::scalar<float>(1), {})),
            "k must be a one-element integer tensor, got f32[]");
  EXPECT_EQ(errorOf(host::topK(Tensor::scalar<float>(1), Tensor::scalar<int64_t>(1), {})),
            "input must have rank at least 1");
  EXPECT_EQ(errorOf(host::compress(m, Tensor::fromVector<bool>({false, false, true}, {3}),
                                   {true, 0})),
            "condition selects index 2 beyond axis size 2");
  EXPECT_EQ(errorOf(host::compress(m, Tensor(DType::Bool, {1, 1}), {})),
            "condition must be 1-d, got [1,1]");
  EXPECT_EQ(errorOf(host::unique(m, {true, 2, true})), "axis 2 is out of range for rank 2");
  EXPECT_EQ(errorOf(host::nonMaxSuppression(Tensor(DType::F32, {1, 2, 3}),
                                            Tensor(DType::F32, {1, 1, 2}), {}, {}, {}, {})),
            "boxes must have shape [batches, boxes, 4], got [1,2,3]");
}

} // namespace
} // namespace kiln
