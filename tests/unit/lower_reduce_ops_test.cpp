// Reduction and softmax-family lowerings (lower/reduce_ops.cpp,
// lower/axis_ops.cpp) through the artifact, against the interpreter
// (op_check.h), on random inputs.
//
// f32 reductions over constant contiguous axes (and one-output f32 softmax)
// run on the specialized reduction kernel (lower/reduce.h); these lowerings
// are its general variant. The tests therefore use the other dtypes, axes
// that are not contiguous, or axes given at run time, which only the
// lowerings here take.
#include "op_check.h"

#include "ir/parser.h"
#include "package/package.h"
#include "runtime/api/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

namespace kiln {
namespace {

using testing::expectArtifactMatchesInterpreter;
using testing::OpCheckOptions;
using testing::randomTensor;

std::string dimsText(const Shape64 &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::string listText(const std::vector<int64_t> &v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// The shape Reduce* gives `in` over `axes` (empty: all).
Shape64 reducedShape(const Shape64 &in, std::vector<int64_t> axes, bool keepdims) {
  const int64_t rank = int64_t(in.size());
  std::set<int64_t> set;
  for (int64_t a : axes) set.insert(a < 0 ? a + rank : a);
  Shape64 out;
  for (int64_t i = 0; i < rank; ++i) {
    const bool reduced = axes.empty() || set.count(i);
    if (!reduced)
      out.push_back(in[size_t(i)]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

// A one-node model: `op` over constant `axes` (absent when empty).
std::string reduceModel(const std::string &op, const std::string &dtype, const Shape64 &in,
                        const std::vector<int64_t> &axes, bool keepdims) {
  std::string axesNode, axesArg;
  if (!axes.empty()) {
    axesNode = "  %axes = Constant() {value = dense<i64[" + std::to_string(axes.size()) + "]> " +
               listText(axes) + "} : i64[" + std::to_string(axes.size()) + "]\n";
    axesArg = ", %axes";
  }
  return R"(kiln.model opsets {"" = 18}
graph @g(%x: )" +
         dtype + dimsText(in) + R"() -> (%y) {
)" + axesNode +
         "  %y = " + op + "(%x" + axesArg + ") {keepdims = " + std::to_string(keepdims) +
         "} : " + dtype + dimsText(reducedShape(in, axes, keepdims)) + "\n}";
}

const std::vector<std::string> kReduceOps = {
    "ReduceSum", "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",
    "ReduceL1",  "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

// The error of running `model` on `inputs` through the artifact ("" when
// it runs).
std::string artifactRunError(const std::string &model, const std::vector<Tensor> &inputs) {
  auto parsed = parseModel(model, "test.kir");
  if (!parsed.ok()) return "parse: " + parsed.error().message;
  package::PackageOptions po;
  auto bytes = package::packageModel(std::move(*parsed), po);
  if (!bytes.ok()) return "compile: " + bytes.error().message;
  auto loaded = rt::LoadedModel::fromMemory(bytes->data(), bytes->size());
  if (loaded.error) return "load: " + loaded.error->message;
  rt::Session session(*loaded.value, 1);
  auto got = session.run(inputs);
  return got.ok() ? "" : got.error().message;
}

// ---- Reduce* -------------------------------------------------------------------------

TEST(LowerReduceOps, EveryReduceOpOverEverySetOfAxesInF64) {
  const Shape64 shape = {3, 4, 5};
  const std::vector<std::vector<int64_t>> axesSets = {{},     {0},    {1},    {2},    {-1},
                                                      {0, 2}, {2, 0}, {1, 2}, {0, 1}, {0, 1, 2}};
  for (const std::string &op : kReduceOps)
    for (const auto &axes : axesSets)
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE(op + " axes " + listText(axes) + " keepdims " + std::to_string(keepdims));
        // Positive inputs keep LogSum defined.
        const double lo = op == "ReduceLogSum" ? 0.1 : -2;
        expectArtifactMatchesInterpreter(reduceModel(op, "f64", shape, axes, keepdims),
                                         {randomTensor(DType::F64, shape, 11, lo, 2)},
                                         {1e-12, 1e-12});
      }
}

TEST(LowerReduceOps, F32OverAxesThatAreNotContiguous) {
  const Shape64 shape = {2, 3, 4, 5};
  for (const std::string &op : kReduceOps)
    for (const std::vector<int64_t> &axes :
         {std::vector<int64_t>{0, 2}, {1, 3}, {0, 3}, {0, 1, 3}}) {
      SCOPED_TRACE(op + " axes " + listText(axes));
      const double lo = op == "ReduceLogSum" ? 0.1 : -2;
      expectArtifactMatchesInterpreter(reduceModel(op, "f32", shape, axes, true),
                                       {randomTensor(DType::F32, shape, 5, lo, 2)}, {1e-5, 1e-5});
    }
}

TEST(LowerReduceOps, IntegersWrapLikeTheirTypeAndTheMeanTruncates) {
  const Shape64 shape = {4, 3, 6};
  for (DType t : {DType::I8, DType::U8, DType::I16, DType::I32, DType::I64, DType::U32, DType::U64})
    for (const std::string &op : kReduceOps)
      for (const std::vector<int64_t> &axes : {std::vector<int64_t>{1}, {2}, {0, 2}, {}}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " " + op + " axes " + listText(axes));
        const bool positive = op == "ReduceLogSum" || isUnsignedInt(t);
        const double lo = positive ? 1 : (t == DType::I8 ? -128 : -100);
        const double hi = t == DType::I8 ? 128 : 100;
        expectArtifactMatchesInterpreter(
            reduceModel(op, std::string(dtypeName(t)), shape, axes, false),
            {randomTensor(t, shape, 3, lo, hi)});
      }
}

TEST(LowerReduceOps, HalfFloatsAccumulateInF32) {
  const Shape64 shape = {3, 40, 6};
  for (DType t : {DType::F16, DType::BF16})
    for (const std::string &op : kReduceOps)
      for (const std::vector<int64_t> &axes : {std::vector<int64_t>{1}, {2}, {0, 2}}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " " + op + " axes " + listText(axes));
        const double lo = op == "ReduceLogSum" ? 0.1 : -1;
        const double tol = t == DType::F16 ? 2e-3 : 1e-2;
        expectArtifactMatchesInterpreter(
            reduceModel(op, std::string(dtypeName(t)), shape, axes, true),
            {randomTensor(t, shape, 9, lo, 1.0)}, {tol, tol});
      }
}

TEST(LowerReduceOps, BoolMaxIsAnyAndMinIsAll) {
  const Shape64 shape = {5, 3, 2};
  for (std::string op : {"ReduceMax", "ReduceMin"})
    for (const std::vector<int64_t> &axes : {std::vector<int64_t>{1}, {0, 2}, {}})
      expectArtifactMatchesInterpreter(reduceModel(op, "bool", shape, axes, false),
                                       {randomTensor(DType::Bool, shape, 4)});
}

TEST(LowerReduceOps, BoolSumIsACompileErrorNamingTheForm) {
  EXPECT_NE(testing::artifactCompileError(reduceModel("ReduceSum", "bool", {2, 3}, {1}, true)), "");
}

TEST(LowerReduceOps, EmptyReducedSetsGiveTheIdentity) {
  const Shape64 shape = {3, 0, 4};
  for (const std::string &op : kReduceOps) {
    SCOPED_TRACE(op);
    expectArtifactMatchesInterpreter(reduceModel(op, "f64", shape, {1}, true),
                                     {randomTensor(DType::F64, shape, 1)});
    expectArtifactMatchesInterpreter(reduceModel(op, "i32", shape, {0, 1}, false),
                                     {randomTensor(DType::I32, shape, 1)});
  }
}

TEST(LowerReduceOps, RankZeroInputReducesToItself) {
  for (const std::string &op : kReduceOps)
    expectArtifactMatchesInterpreter(reduceModel(op, "f64", {}, {}, true),
                                     {Tensor::scalar<double>(1.5)});
}

TEST(LowerReduceOps, AxesGivenAtRunTimeReduceTheDimsTheyName) {
  const std::string keep = R"(kiln.model opsets {"" = 18}
graph @g(%x: f32[3,4,5], %axes: i64[2]) -> (%y) {
  %y = ReduceSum(%x, %axes) {keepdims = 1} : f32[?,?,?]
})";
  const std::string drop = R"(kiln.model opsets {"" = 18}
graph @g(%x: f32[3,4,5], %axes: i64[2]) -> (%y) {
  %y = ReduceLogSumExp(%x, %axes) {keepdims = 0} : f32[?]
})";
  const Tensor x = randomTensor(DType::F32, {3, 4, 5}, 21);
  for (const std::vector<int64_t> &axes :
       {std::vector<int64_t>{0, 2}, {1, 2}, {-1, 0}, {2, 1}, {0, 1}, {1, -3}}) {
    SCOPED_TRACE(listText(axes));
    const Tensor a = Tensor::fromVector(axes, {2});
    expectArtifactMatchesInterpreter(keep, {x, a});
    expectArtifactMatchesInterpreter(drop, {x, a});
  }
}

TEST(LowerReduceOps, RunTimeAxesOfEveryOpAndIntegerType) {
  for (const std::string &op : kReduceOps)
    for (const std::string dtype : {"f64", "i32"}) {
      SCOPED_TRACE(op + " " + dtype);
      const std::string model = R"(kiln.model opsets {"" = 18}
graph @g(%x: )" + dtype + R"([2,3,4], %axes: i64[1]) -> (%y) {
  %y = )" + op + R"((%x, %axes) {keepdims = 0} : )" +
                                dtype + R"([?,?]
})";
      const DType t = dtype == "f64" ? DType::F64 : DType::I32;
      for (int64_t axis : {0, 1, 2}) {
        const double lo = op == "ReduceLogSum" ? 1 : -9;
        expectArtifactMatchesInterpreter(model, {randomTensor(t, {2, 3, 4}, 8, lo, 9),
                                                 Tensor::fromVector<int64_t>({axis}, {1})});
      }
    }
}

TEST(LowerReduceOps, RunTimeAxesOutOfRangeOrRepeatedAreRunTimeErrors) {
  const std::string model = R"(kiln.model opsets {"" = 18}
graph @g(%x: f32[3,4], %axes: i64[2]) -> (%y) {
  %y = ReduceMax(%x, %axes) {keepdims = 1} : f32[?,?]
})";
  const Tensor x = randomTensor(DType::F32, {3, 4}, 2);
  EXPECT_NE(
      artifactRunError(model, {x, Tensor::fromVector<int64_t>({0, 2}, {2})}).find("out of range"),
      std::string::npos);
  EXPECT_NE(artifactRunError(model, {x, Tensor::fromVector<int64_t>({1, -1}, {2})})
                .find("more than once"),
            std::string::npos);
}

TEST(LowerReduceOps, NoopWithEmptyAxesIsTheIdentity) {
  const std::string constantEmpty = R"(kiln.model opsets {"" = 18}
graph @g(%x: i16[3,4]) -> (%y) {
  %axes = Constant() {value = dense<i64[0]> []} : i64[0]
  %y = ReduceSum(%x, %axes) {keepdims = 1, noop_with_empty_axes = 1} : i16[3,4]
})";
  expectArtifactMatchesInterpreter(constantEmpty, {randomTensor(DType::I16, {3, 4}, 6, -50, 50)});
  const std::string inputEmpty = R"(kiln.model opsets {"" = 18}
graph @g(%x: f64[2,3,2], %axes: i64[0]) -> (%y) {
  %y = ReduceL2(%x, %axes) {keepdims = 0, noop_with_empty_axes = 1} : f64[2,3,2]
})";
  expectArtifactMatchesInterpreter(
      inputEmpty, {randomTensor(DType::F64, {2, 3, 2}, 6), Tensor(DType::I64, Shape64{0})});
  const std::string absent = R"(kiln.model opsets {"" = 18}
graph @g(%x: f64[2,3]) -> (%y) {
  %y = ReduceProd(%x) {keepdims = 0, noop_with_empty_axes = 1} : f64[2,3]
})";
  expectArtifactMatchesInterpreter(absent, {randomTensor(DType::F64, {2, 3}, 6)});
}

TEST(LowerReduceOps, SymbolicDimsServeEverySize) {
  const std::string model = R"(kiln.model opsets {"" = 18}
graph @g(%x: f64[n,4,m]) -> (%y) {
  %axes = Constant() {value = dense<i64[2]> [0, 2]} : i64[2]
  %y = ReduceMean(%x, %axes) {keepdims = 0} : f64[4]
})";
  const std::string columns = R"(kiln.model opsets {"" = 18}
graph @g(%x: f16[n,m]) -> (%y) {
  %axes = Constant() {value = dense<i64[1]> [0]} : i64[1]
  %y = ReduceLogSumExp(%x, %axes) {keepdims = 1} : f16[1,m]
})";
  for (int64_t n : {1, 3, 0, 17})
    for (int64_t m : {1, 5, 33}) {
      expectArtifactMatchesInterpreter(model, {randomTensor(DType::F64, {n, 4, m}, n + m)});
      expectArtifactMatchesInterpreter(columns, {randomTensor(DType::F16, {n, m}, n * m)},
                                       {2e-3, 2e-3});
    }
}

TEST(LowerReduceOps, ManyThreadsGiveTheSameResult) {
  const Shape64 shape = {64, 33, 9};
  OpCheckOptions o{1e-12, 1e-12};
  o.threads = 4;
  for (const std::vector<int64_t> &axes : {std::vector<int64_t>{1}, {0, 2}, {2}})
    expectArtifactMatchesInterpreter(reduceModel("ReduceSumSquare", "f64", shape, axes, true),
                                     {randomTensor(DType::F64, shape, 12)}, o);
}

TEST(LowerReduceOps, NanWinsMaxAndMinAndInfinityStaysInLogSumExp) {
  Tensor x = randomTensor(DType::F64, {3, 4}, 2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  x.setDouble(1, nan);
  x.setDouble(6, inf);
  x.setDouble(9, -inf);
  for (std::string op : {"ReduceMax", "ReduceMin", "ReduceLogSumExp", "ReduceSum"})
    for (const std::vector<int64_t> &axes : {std::vector<int64_t>{0}, {1}})
      expectArtifactMatchesInterpreter(reduceModel(op, "f64", {3, 4}, axes, true), {x});
}

// ---- ArgMax / ArgMin ----------------------------------------------------------------------

std::string argModel(const std::string &op, const std::string &dtype, const Shape64 &in, int axis,
                     bool keepdims, bool last) {
  Shape64 out = in;
  const size_t a = size_t(axis < 0 ? axis + int(in.size()) : axis);
  if (keepdims)
    out[a] = 1;
  else
    out.erase(out.begin() + long(a));
  return R"(kiln.model opsets {"" = 13}
graph @g(%x: )" +
         dtype + dimsText(in) + R"() -> (%y) {
  %y = )" +
         op + "(%x) {axis = " + std::to_string(axis) + ", keepdims = " + std::to_string(keepdims) +
         ", select_last_index = " + std::to_string(last) + "} : i64" + dimsText(out) + "\n}";
}

TEST(LowerReduceOps, ArgMaxAndArgMinOnEveryAxisWithTiesAndNans) {
  const Shape64 shape = {3, 4, 5};
  // Few distinct values make ties; NaNs count as the extreme.
  Tensor f = randomTensor(DType::F32, shape, 7, -3, 3);
  for (int64_t i = 0; i < f.numel(); ++i) f.setDouble(i, std::floor(f.getDouble(i)));
  f.setDouble(7, std::numeric_limits<double>::quiet_NaN());
  f.setDouble(31, std::numeric_limits<double>::quiet_NaN());
  f.setDouble(32, std::numeric_limits<double>::quiet_NaN());
  for (std::string op : {"ArgMax", "ArgMin"})
    for (int axis : {0, 1, 2, -1})
      for (bool keepdims : {false, true})
        for (bool last : {false, true}) {
          SCOPED_TRACE(op + " axis " + std::to_string(axis) + " keepdims " +
                       std::to_string(keepdims) + " last " + std::to_string(last));
          expectArtifactMatchesInterpreter(argModel(op, "f32", shape, axis, keepdims, last), {f});
        }
}

TEST(LowerReduceOps, ArgMaxOfEveryDtype) {
  const Shape64 shape = {4, 6};
  for (DType t : {DType::F64, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I32, DType::I64,
                  DType::U64, DType::Bool})
    for (int axis : {0, 1})
      for (bool last : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " axis " + std::to_string(axis));
        const Tensor x = randomTensor(t, shape, 13, isUnsignedInt(t) ? 0 : -4, 4);
        expectArtifactMatchesInterpreter(
            argModel("ArgMax", std::string(dtypeName(t)), shape, axis, true, last), {x});
        expectArtifactMatchesInterpreter(
            argModel("ArgMin", std::string(dtypeName(t)), shape, axis, false, last), {x});
      }
}

TEST(LowerReduceOps, ArgMaxWithSymbolicDimsAndEmptyAxisError) {
  const std::string model = R"(kiln.model opsets {"" = 13}
graph @g(%x: f32[n,m]) -> (%y) {
  %y = ArgMax(%x) {axis = 1, keepdims = 0} : i64[n]
})";
  for (int64_t n : {1, 4, 0})
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {n, 7}, n)});
  EXPECT_NE(artifactRunError(model, {Tensor(DType::F32, Shape64{3, 0})}).find("size 0"),
            std::string::npos);
}

// ---- CumSum ----------------------------------------------------------------------------------

std::string cumSumModel(const std::string &dtype, const std::string &shape, bool exclusive,
                        bool reverse) {
  return R"(kiln.model opsets {"" = 14}
graph @g(%x: )" +
         dtype + shape + R"(, %axis: i64[]) -> (%y) {
  %y = CumSum(%x, %axis) {exclusive = )" +
         std::to_string(exclusive) + ", reverse = " + std::to_string(reverse) + "} : " + dtype +
         shape + "\n}";
}

TEST(LowerReduceOps, CumSumOnEveryAxisExclusiveAndReversed) {
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true})
      for (int64_t axis : {0, 1, 2, -1, -3}) {
        SCOPED_TRACE("axis " + std::to_string(axis) + " exclusive " + std::to_string(exclusive) +
                     " reverse " + std::to_string(reverse));
        expectArtifactMatchesInterpreter(
            cumSumModel("f32", "[3,4,5]", exclusive, reverse),
            {randomTensor(DType::F32, {3, 4, 5}, 3), Tensor::scalar<int64_t>(axis)});
        expectArtifactMatchesInterpreter(
            cumSumModel("i32", "[3,4,5]", exclusive, reverse),
            {randomTensor(DType::I32, {3, 4, 5}, 3, -1000, 1000), Tensor::scalar<int64_t>(axis)});
      }
}

TEST(LowerReduceOps, CumSumOfEveryDtypeAndSymbolicDims) {
  for (DType t :
       {DType::F64, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I64, DType::U32})
    for (int64_t n : {1, 6, 0}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " n " + std::to_string(n));
      const double tol = t == DType::F16 ? 2e-3 : t == DType::BF16 ? 1e-2 : 1e-6;
      for (int64_t axis : {0, 1})
        expectArtifactMatchesInterpreter(
            cumSumModel(std::string(dtypeName(t)), "[n,5]", axis == 0, axis == 1),
            {randomTensor(t, {n, 5}, 3, isUnsignedInt(t) ? 0 : -100, 100),
             Tensor::scalar<int64_t>(axis)},
            {tol, tol});
    }
}

TEST(LowerReduceOps, CumSumAxisOutOfRangeIsARunTimeError) {
  EXPECT_NE(artifactRunError(cumSumModel("f32", "[2,3]", false, false),
                             {randomTensor(DType::F32, {2, 3}, 1), Tensor::scalar<int64_t>(2)})
                .find("out of range"),
            std::string::npos);
}

// ---- Softmax, LogSoftmax, Hardmax ------------------------------------------------------------

std::string axisModel(const std::string &op, const std::string &dtype, const std::string &shape,
                      int axis) {
  return R"(kiln.model opsets {"" = 13}
graph @g(%x: )" +
         dtype + shape + R"() -> (%y) {
  %y = )" +
         op + "(%x) {axis = " + std::to_string(axis) + "} : " + dtype + shape + "\n}";
}

TEST(LowerReduceOps, SoftmaxFamilyOnEveryAxisAndFloatType) {
  for (std::string op : {"Softmax", "LogSoftmax", "Hardmax"})
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
      for (int axis : {0, 1, 2, -1}) {
        SCOPED_TRACE(op + " " + std::string(dtypeName(t)) + " axis " + std::to_string(axis));
        const double tol = t == DType::F16 ? 2e-3 : t == DType::BF16 ? 1e-2 : 1e-5;
        Tensor x = randomTensor(t, {3, 4, 17}, 5, -4, 4);
        if (op == "Hardmax") // ties: the first maximum wins
          for (int64_t i = 0; i < x.numel(); ++i) x.setDouble(i, std::floor(x.getDouble(i)));
        expectArtifactMatchesInterpreter(axisModel(op, std::string(dtypeName(t)), "[3,4,17]", axis),
                                         {x}, {tol, tol});
      }
}

TEST(LowerReduceOps, SoftmaxFamilyWithSymbolicDimsAndNans) {
  for (std::string op : {"Softmax", "LogSoftmax", "Hardmax"})
    for (int axis : {0, 1})
      for (int64_t n : {1, 9, 0}) {
        Tensor x = randomTensor(DType::F64, {n, 6}, n);
        if (n > 1) x.setDouble(8, std::numeric_limits<double>::quiet_NaN());
        expectArtifactMatchesInterpreter(axisModel(op, "f64", "[n,6]", axis), {x});
      }
}

TEST(LowerReduceOps, AxisOpsOnManyThreadsGiveTheSameResult) {
  OpCheckOptions o{1e-12, 1e-12};
  o.threads = 4;
  const Tensor x = randomTensor(DType::F64, {32, 20, 24}, 5);
  for (std::string op : {"Softmax", "LogSoftmax", "Hardmax"})
    expectArtifactMatchesInterpreter(axisModel(op, "f64", "[32,20,24]", 1), {x}, o);
  expectArtifactMatchesInterpreter(argModel("ArgMin", "f64", {32, 20, 24}, 1, true, false), {x}, o);
  expectArtifactMatchesInterpreter(cumSumModel("f64", "[32,20,24]", true, true),
                                   {x, Tensor::scalar<int64_t>(1)}, o);
}

} // namespace
} // namespace kiln
