// Differential tests of the runtime's host ops (runtime/cpu/host_ops.h)
// against the reference interpreter: every op runs on random inputs of many
// shapes (empty and rank 0 included) and dtypes, and must give the
// interpreter's bits, or fail where the interpreter fails. Error messages and
// buffer sharing are checked on their own.
#include "runtime/cpu/host_ops.h"

#include "interp/interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

namespace kiln {
namespace {

namespace host = runtime::host;
using Attrs = std::map<std::string, Attribute>;

constexpr int kCases = 300; // random cases per op

const DType kCopyDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::U8,  DType::I8,
                             DType::I16, DType::I32, DType::I64,  DType::U64, DType::Bool};

// Runs one `op` node on the interpreter; an undefined input is left out.
Expected<Tensor> reference(OpKind op, const std::vector<Tensor> &inputs, const Attrs &attrs = {}) {
  Graph g;
  std::vector<Value *> args;
  std::vector<RtValue> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      args.push_back(nullptr);
      continue;
    }
    args.push_back(g.addInput(strCat("in", i), Type::tensor(inputs[i].dtype(), Shape::unranked())));
    values.emplace_back(inputs[i]);
  }
  Node *node = g.addNode(op, args, 1, "n");
  for (const auto &[name, a] : attrs) node->setAttr(name, a);
  g.addOutput(node->output(0));
  KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs, Interpreter().run(g, std::move(values)));
  return outs[0].tensor;
}

std::string describe(const Tensor &t) {
  return strCat(dtypeName(t.dtype()), shapeToString(t.shape()));
}

// Counts how many cases both sides ran, so that a test cannot pass by
// making every case an error.
struct Tally {
  int ok = 0, failed = 0;
};

// The host op's result must be the interpreter's bits, or an error when the
// interpreter's is one.
void expectSame(const Expected<Tensor> &got, const Expected<Tensor> &want, const std::string &what,
                Tally &tally) {
  if (!want.ok()) {
    ++tally.failed;
    EXPECT_FALSE(got.ok()) << what << ": the interpreter failed (" << want.error().message
                           << ") but the host op gave " << describe(*got);
    return;
  }
  ++tally.ok;
  ASSERT_TRUE(got.ok()) << what << ": " << got.error().message;
  EXPECT_TRUE(got->identical(*want))
      << what << ": got " << describe(*got) << ", want " << describe(*want);
}

// Like expectSame, for ops whose result must share `data`'s buffer.
void expectSameView(const Tensor &data, const Expected<Tensor> &got, const Expected<Tensor> &want,
                    const std::string &what, Tally &tally) {
  expectSame(got, want, what, tally);
  if (got.ok()) {
    EXPECT_EQ(got->raw(), data.raw()) << what << ": not a view of the input";
  }
}

// Most cases must run; a few must be errors where the generator makes them.
void expectMostRan(const Tally &tally) {
  EXPECT_GT(tally.ok, kCases / 2) << tally.failed << " cases were errors";
}

class Random {
public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) { // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T> const T &pick(const std::vector<T> &v) { return v[uniform(0, v.size() - 1)]; }
  template <class T> void shuffle(std::vector<T> &v) { std::shuffle(v.begin(), v.end(), rng_); }

  // Rank 0..maxRank, dims 0..maxDim (0 rarely).
  Shape64 shape(int64_t maxRank, int64_t maxDim) {
    Shape64 s(uniform(0, maxRank));
    for (int64_t &d : s) d = chance(0.05) ? 0 : uniform(1, maxDim);
    return s;
  }
  DType copyDType() { return kCopyDTypes[uniform(0, std::size(kCopyDTypes) - 1)]; }

  Tensor tensor(DType dtype, const Shape64 &shape) {
    Tensor t(dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (isFloat(dtype))
        t.setDouble(i, std::normal_distribution<double>(0.0, 10.0)(rng_));
      else
        t.setInt(i, dtype == DType::Bool ? uniform(0, 1) : uniform(-100, 100));
    }
    return t;
  }

  // An axis of a rank-r tensor, in either form; rarely one out of range.
  int64_t axis(int64_t rank) {
    if (chance(0.05) || rank == 0) return uniform(-rank - 2, rank + 1);
    int64_t a = uniform(0, rank - 1);
    return chance(0.5) ? a - rank : a;
  }

private:
  std::mt19937_64 rng_;
};

// Runs `body` on kCases random cases from `seed`, then checks that most of
// them ran on both sides.
template <class F> void runCases(uint64_t seed, F &&body) {
  Random r(seed);
  Tally tally;
  for (int c = 0; c < kCases; ++c) body(r, tally);
  expectMostRan(tally);
}

Tensor ints(const std::vector<int64_t> &v, DType dtype = DType::I64) {
  Tensor t(dtype, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.setInt(i, v[i]);
  return t;
}

// A random shape with `numel` elements (a 0 dim somewhere when numel is 0).
Shape64 shapeWithCount(Random &r, int64_t numel) {
  if (numel == 0) {
    Shape64 s = r.shape(3, 3);
    s.insert(s.begin() + r.uniform(0, s.size()), 0);
    return s;
  }
  Shape64 s(r.uniform(numel == 1 ? 0 : 1, 5), 1);
  for (int64_t f = 2; numel > 1; ++f)
    for (; numel % f == 0; numel /= f) s[r.uniform(0, s.size() - 1)] *= f;
  return s;
}

// ---- views -----------------------------------------------------------------------

TEST(HostOps, ReshapeMatchesInterpreterAndSharesTheBuffer) {
  runCases(1, [&](Random &r, Tally &tally) {
    Tensor data = r.tensor(r.copyDType(), r.shape(5, 4));
    bool allowZero = r.chance(0.3);
    Shape64 target = r.chance(0.1) ? r.shape(4, 4) : shapeWithCount(r, data.numel());
    for (size_t i = 0; i < target.size() && !allowZero; ++i)
      if (i < data.shape().size() && target[i] == data.dim(i) && r.chance(0.5)) target[i] = 0;
    if (!target.empty() && r.chance(0.4)) target[r.uniform(0, target.size() - 1)] = -1;
    Tensor shape = ints(target, r.chance(0.2) ? DType::I32 : DType::I64);
    auto got = host::reshape(data, shape, {allowZero});
    expectSameView(
        data, got,
        reference(OpKind::Reshape, {data, shape}, {{"allowzero", Attribute::ofInt(allowZero)}}),
        strCat("reshape ", describe(data), " to ", shapeToString(target)), tally);
  });
}

TEST(HostOps, FlattenMatchesInterpreterAndSharesTheBuffer) {
  runCases(2, [&](Random &r, Tally &tally) {
    Tensor data = r.tensor(r.copyDType(), r.shape(5, 4));
    int64_t axis = r.uniform(-data.rank() - 1, data.rank() + 1);
    auto got = host::flatten(data, {axis});
    expectSameView(data, got,
                   reference(OpKind::Flatten, {data}, {{"axis", Attribute::ofInt(axis)}}),
                   strCat("flatten ", describe(data), " at ", axis), tally);
  });
}

TEST(HostOps, SqueezeWithAxesFromInputOrParamsMatchesInterpreter) {
  runCases(3, [&](Random &r, Tally &tally) {
    Shape64 shape(r.uniform(0, 6));
    for (int64_t &d : shape) d = r.pick<int64_t>({0, 1, 1, 1, 2, 3});
    Tensor data = r.tensor(r.copyDType(), shape);
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < data.rank(); ++a)
      if ((data.dim(a) == 1 || r.chance(0.02)) && r.chance(0.5))
        axes.push_back(r.chance(0.5) ? a - data.rank() : a);
    if (r.chance(0.05)) axes.push_back(r.axis(data.rank()));
    r.shuffle(axes);
    bool asInput = r.chance(0.5);
    // The interpreter takes axes only as an input; no axes means "every 1".
    Tensor axesTensor = ints(axes);
    Tensor refAxes = asInput || !axes.empty() ? axesTensor : Tensor();
    auto got =
        asInput ? host::squeeze(data, axesTensor, {}) : host::squeeze(data, Tensor(), {axes});
    expectSameView(data, got, reference(OpKind::Squeeze, {data, refAxes}),
                   strCat("squeeze ", describe(data), " axes ", shapeToString(axes),
                          asInput ? " (input)" : " (params)"),
                   tally);
  });
}

TEST(HostOps, UnsqueezeWithAxesFromInputOrParamsMatchesInterpreter) {
  runCases(4, [&](Random &r, Tally &tally) {
    Tensor data = r.tensor(r.copyDType(), r.shape(4, 3));
    bool asInput = r.chance(0.5);
    int64_t outRank = data.rank() + r.uniform(asInput ? 0 : 1, 3);
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < outRank; ++a) axes.push_back(r.chance(0.5) ? a - outRank : a);
    r.shuffle(axes);
    axes.resize(outRank - data.rank());
    if (!axes.empty() && r.chance(0.05))
      axes.back() = r.axis(outRank); // may repeat or be out of range
    auto got =
        asInput ? host::unsqueeze(data, ints(axes), {}) : host::unsqueeze(data, Tensor(), {axes});
    expectSameView(data, got, reference(OpKind::Unsqueeze, {data, ints(axes)}),
                   strCat("unsqueeze ", describe(data), " axes ", shapeToString(axes)), tally);
  });
}

TEST(HostOps, IdentityIsTheSameTensor) {
  Tensor data = Random(5).tensor(DType::I16, {2, 0, 3});
  auto got = host::identity(data);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->raw(), data.raw());
  EXPECT_TRUE(got->identical(*reference(OpKind::Identity, {data})));
}

// ---- shape queries -----------------------------------------------------------------

TEST(HostOps, ShapeWithClampedStartAndEndAndSizeMatchInterpreter) {
  runCases(6, [&](Random &r, Tally &tally) {
    Tensor data = r.tensor(r.copyDType(), r.shape(6, 3));
    host::ShapeParams params{r.uniform(-data.rank() - 2, data.rank() + 2), std::nullopt};
    Attrs attrs{{"start", Attribute::ofInt(params.start)}};
    if (r.chance(0.6)) {
      params.end = r.uniform(-data.rank() - 2, data.rank() + 2);
      attrs["end"] = Attribute::ofInt(*params.end);
    }
    expectSame(host::shapeOf(data, params), reference(OpKind::Shape, {data}, attrs),
               strCat("shape of ", describe(data), " from ", params.start), tally);
    expectSame(host::sizeOf(data), reference(OpKind::Size, {data}),
               strCat("size of ", describe(data)), tally);
  });
}

// ---- data movement -------------------------------------------------------------------

TEST(HostOps, GatherOfEveryDTypeWithI32AndI64IndicesMatchesInterpreter) {
  runCases(7, [&](Random &r, Tally &tally) {
    Tensor data = r.tensor(r.copyDType(), r.shape(4, 4));
    int64_t axis = r.axis(data.rank());
    int64_t dim = axis >= -data.rank() && axis < data.rank()
                      ? data.dim(axis < 0 ? axis + data.rank() : axis)
                      : 1;
    Tensor indices(r.chance(0.5) ? DType::I32 : DType::I64, r.shape(2, 3));
    for (int64_t i = 0; i < indices.numel(); ++i)
      indices.setInt(i, r.chance(0.03) || dim == 0 ? r.uniform(-dim - 2, dim + 1)
                                                   : r.uniform(-dim, dim - 1));
    expectSame(host::gather(data, indices, {axis}),
               reference(OpKind::Gather, {data, indices}, {{"axis", Attribute::ofInt(axis)}}),
               strCat("gather ", describe(data), " axis ", axis, " indices ", describe(indices)),
               tally);
  });
}

TEST(HostOps, ConstantOfShapeOfEveryDTypeMatchesInterpreter) {
  runCases(8, [&](Random &r, Tally &tally) {
    Tensor shape = ints(r.shape(4, 4));
    Tensor value =
        r.chance(0.2) ? Tensor() : r.tensor(r.copyDType(), r.chance(0.5) ? Shape64{} : Shape64{1});
    Attrs attrs;
    if (value.defined()) attrs["value"] = Attribute::ofTensor(value);
    expectSame(host::constantOfShape(shape, {value}),
               reference(OpKind::ConstantOfShape, {shape}, attrs),
               strCat("constant of shape ", shape.numel(), " dims"), tally);
  });
}

TEST(HostOps, PadInEveryModeAndDTypeMatchesInterpreter) {
  const std::vector<std::pair<host::PadMode, std::string>> modes = {
      {host::PadMode::Constant, "constant"},
      {host::PadMode::Reflect, "reflect"},
      {host::PadMode::Edge, "edge"},
      {host::PadMode::Wrap, "wrap"}};
  runCases(9, [&](Random &r, Tally &tally) {
    auto [mode, modeName] = r.pick(modes);
    Tensor data = r.tensor(r.copyDType(), r.shape(4, 4));
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < data.rank(); ++a)
      if (r.chance(0.6)) axes.push_back(r.chance(0.5) ? a - data.rank() : a);
    r.shuffle(axes);
    bool axesGiven = r.chance(0.4);
    int64_t n = axesGiven ? static_cast<int64_t>(axes.size()) : data.rank();
    std::vector<int64_t> pads(2 * n);
    for (int64_t &p : pads) p = r.chance(0.1) ? -1 : r.uniform(0, 3);
    Tensor value;
    if (r.chance(0.5)) value = r.tensor(data.dtype(), r.chance(0.2) ? Shape64{0} : Shape64{});
    std::vector<Tensor> inputs = {data, ints(pads), value, axesGiven ? ints(axes) : Tensor()};
    expectSame(host::pad(inputs[0], inputs[1], inputs[2], inputs[3], {mode}),
               reference(OpKind::Pad, inputs, {{"mode", Attribute::ofString(modeName)}}),
               strCat("pad ", describe(data), " ", modeName, " pads ", shapeToString(pads)), tally);
  });
}

// ---- f32 math ----------------------------------------------------------------------

// ReduceMean: within 1e-6 relative of the interpreter (NaN where it is NaN).
TEST(HostOps, ReduceMeanMatchesInterpreterWithinTolerance) {
  Random r(10);
  for (int c = 0; c < kCases; ++c) {
    Tensor data = r.tensor(DType::F32, r.shape(5, 5));
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < data.rank(); ++a)
      if (r.chance(0.4)) axes.push_back(r.chance(0.5) ? a - data.rank() : a);
    r.shuffle(axes);
    bool asInput = r.chance(0.5), keepDims = r.chance(0.5), noop = r.chance(0.2);
    host::ReduceMeanParams params{asInput ? std::vector<int64_t>{} : axes, keepDims, noop};
    auto got = host::reduceMean(data, asInput ? ints(axes) : Tensor(), params);
    auto want = reference(OpKind::ReduceMean, {data, ints(axes)},
                          {{"keepdims", Attribute::ofInt(keepDims)},
                           {"noop_with_empty_axes", Attribute::ofInt(noop)}});
    std::string what = strCat("mean of ", describe(data), " over ", shapeToString(axes));
    ASSERT_TRUE(want.ok()) << what << ": " << want.error().message;
    ASSERT_TRUE(got.ok()) << what << ": " << got.error().message;
    ASSERT_EQ(got->shape(), want->shape()) << what;
    for (int64_t i = 0; i < got->numel(); ++i) {
      float g = got->data<float>()[i], w = want->data<float>()[i];
      if (std::isnan(w))
        EXPECT_TRUE(std::isnan(g)) << what << " element " << i;
      else
        EXPECT_NEAR(g, w, 1e-6f * std::abs(w)) << what << " element " << i;
    }
  }
}

TEST(HostOps, ReluMatchesInterpreterBitForBitIncludingNaNAndNegativeZero) {
  Random r(11);
  Tally tally;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (int c = 0; c < kCases / 10; ++c) {
    Tensor x = r.tensor(DType::F32, r.shape(8, 3));
    for (int64_t i = 0; i < x.numel(); ++i)
      if (r.chance(0.1)) x.data<float>()[i] = specials[r.uniform(0, 3)];
    auto got = host::relu(x);
    expectSame(got, reference(OpKind::Relu, {x}), strCat("relu ", describe(x)), tally);
    if (got.ok()) {
      EXPECT_NE(got->raw(), x.raw());
    }
  }
  EXPECT_EQ(tally.ok, kCases / 10);
}

// ---- errors --------------------------------------------------------------------------

// The message of a failed result ("" when it did not fail).
template <class T> std::string errorOf(const Expected<T> &e) {
  return e.ok() ? "" : e.error().message;
}

TEST(HostOps, ErrorsSayWhatIsWrong) {
  Tensor m = Tensor(DType::F32, {2, 3});
  Tensor idx = Tensor::fromVector<int64_t>({0, 3}, {2});
  EXPECT_EQ(errorOf(host::gather(m, idx, {1})), "index 3 is out of range for axis 1 of size 3");
  EXPECT_EQ(errorOf(host::gather(m, idx, {2})), "axis 2 is out of range for rank 2");
  EXPECT_EQ(errorOf(host::gather(m, Tensor(DType::F32, {1}), {0})),
            "indices must be i32 or i64, got f32");
  EXPECT_EQ(errorOf(host::gather(Tensor(DType::String, {2}), Tensor::scalar<int64_t>(0), {0})),
            "data of dtype string is not supported");

  EXPECT_EQ(errorOf(host::reshape(m, ints({-1, -1}), {})), "shape [-1,-1] has two -1 dims");
  EXPECT_EQ(errorOf(host::reshape(m, ints({4, 2}), {})),
            "cannot reshape [2,3] (6 elements) to [4,2]");
  EXPECT_EQ(errorOf(host::reshape(m, ints({2, 3, 0}), {})),
            "shape [2,3,0] copies dim 2 of input [2,3] which has no such dim");
  EXPECT_EQ(errorOf(host::reshape(m, ints({-2, 3}), {})), "shape [-2,3] has an invalid dim -2");
  EXPECT_EQ(errorOf(host::flatten(m, {3})), "axis 3 is out of range for rank 2");

  EXPECT_EQ(errorOf(host::squeeze(m, ints({0}), {})),
            "cannot squeeze axis 0 of shape [2,3]: its size is not 1");
  EXPECT_EQ(errorOf(host::squeeze(m, Tensor(), {{-3}})), "axis -3 is out of range for rank 2");
  EXPECT_EQ(errorOf(host::unsqueeze(m, Tensor(), {})), "no axes to unsqueeze");
  EXPECT_EQ(errorOf(host::unsqueeze(m, ints({1, -3}), {})), "axis -3 is repeated");
  EXPECT_EQ(errorOf(host::unsqueeze(m, Tensor(DType::I64, {1, 1}), {})),
            "axes must have rank 0 or 1, got shape [1,1]");

  EXPECT_EQ(errorOf(host::constantOfShape(ints({2, -1}), {})), "shape [2,-1] has a negative dim");
  EXPECT_EQ(errorOf(host::constantOfShape(ints({2}), {Tensor(DType::I8, {2})})),
            "value must hold one element, got shape [2]");
  EXPECT_EQ(errorOf(host::constantOfShape(ints({4000000000, 4000000000, 4000000000}), {})),
            "output shape [4000000000,4000000000,4000000000] is too large");

  EXPECT_EQ(errorOf(host::pad(m, ints({1, 1}), Tensor(), Tensor(), {})),
            "pads has 2 entries, expected 4");
  EXPECT_EQ(errorOf(host::pad(m, ints({0, 0, 0, 0}), Tensor::scalar<double>(1), Tensor(), {})),
            "constant_value has dtype f64, data has f32");
  EXPECT_EQ(errorOf(host::pad(m, ints({0, -4, 0, 0}), Tensor(), Tensor(), {})),
            "pads crop more than the 3 elements of axis 1");
  EXPECT_EQ(errorOf(host::pad(Tensor(DType::U8, {0, 2}), ints({1, 0, 0, 0}), Tensor(), Tensor(),
                              {host::PadMode::Reflect})),
            "cannot pad empty axis 0 in reflect mode");
  EXPECT_EQ(errorOf(host::pad(m, ints({1, 1}), Tensor(), ints({2}), {})),
            "axis 2 is out of range for rank 2");

  EXPECT_EQ(errorOf(host::reduceMean(Tensor(DType::F64, {2}), Tensor(), {})),
            "data must be f32, got f64");
  EXPECT_EQ(errorOf(host::reduceMean(m, ints({1, -1}), {})), "axis -1 is repeated");
  EXPECT_EQ(errorOf(host::relu(Tensor(DType::I32, {2}))), "input must be f32, got i32");
}

TEST(HostOps, NoopReduceMeanAndViewsShareTheInputBuffer) {
  Tensor m = Tensor(DType::F32, {1, 3});
  host::ReduceMeanParams noop;
  noop.noopWithEmptyAxes = true;
  auto same = host::reduceMean(m, Tensor(), noop);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->raw(), m.raw());
  auto squeezed = host::squeeze(m, Tensor(), {});
  ASSERT_TRUE(squeezed.ok());
  EXPECT_EQ(squeezed->shape(), (Shape64{3}));
  EXPECT_EQ(squeezed->raw(), m.raw());
}

} // namespace
} // namespace kiln
