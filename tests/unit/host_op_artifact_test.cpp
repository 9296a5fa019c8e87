// Host ops and non-tensor values through the artifact (compile to a `.kiln`
// in memory, load, run with rt::Session) against the reference interpreter:
// host ops with several outputs, sequences and optionals as model inputs,
// outputs and stored constants, string tensors in the program section and
// at the model's edges; and what the C API says about values it cannot
// carry.
#include "value_check.h"

#include "kiln/kiln.h"
#include "op_check.h"
#include "runtime/cpu/host_ops.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

namespace host = runtime::host;
using testing::expectArtifactMatchesInterpreterValues;
using testing::interpretNode;
using testing::randomTensor;
using testing::runThroughArtifact;
using testing::valueDiff;

RtValue i64(int64_t v) { return RtValue(Tensor::scalar<int64_t>(v)); }

Tensor strings(const std::vector<std::string> &v) {
  Tensor t(DType::String, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<std::string>());
  return t;
}

TEST(HostOpArtifact, UniqueAndTopKGiveEveryOutput) {
  const char *model = R"(kiln.model opsets {"" = 11}
graph @g(%x: f32[n], %k: i64[1]) -> (%u, %first, %inverse, %counts, %v, %i, %onlyInverse) {
  %u, %first, %inverse, %counts = Unique(%x) {sorted = 0} : f32[?], i64[?], i64[?], i64[?]
  %v, %i = TopK(%x, %k) {largest = 0} : f32[?], i64[?]
  %unused0, %unused1, %onlyInverse, %unused3 = Unique(%x) : f32[?], i64[?], i64[?], i64[?]
})";
  Tensor x(DType::F32, {9});
  for (int64_t i = 0; i < 9; ++i) x.setDouble(i, double((i * 5) % 4) - 1.5);
  expectArtifactMatchesInterpreterValues(
      model, {RtValue(x), RtValue(Tensor::fromVector<int64_t>({4}, {1}))});
}

TEST(HostOpArtifact, SequencesAsInputsOutputsAndStoredConstants) {
  const char *model = R"(kiln.model opsets {"" = 12}
graph @g(%xs: seq<f32[?,2]>, %t: f32[3,2], %pos: i64[]) -> (%ins, %at, %len, %cat, %stack, %erased, %split, %consts) {
  %ins = SequenceInsert(%xs, %t, %pos) : seq<f32[?,2]>
  %at = SequenceAt(%ins, %pos) : f32[?,2]
  %len = SequenceLength(%ins) : i64[]
  %cat = ConcatFromSequence(%ins) {axis = 0} : f32[?,2]
  %same = SequenceConstruct(%t, %t) : seq<f32[3,2]>
  %stack = ConcatFromSequence(%same) {axis = -1, new_axis = 1} : f32[3,2,2]
  %erased = SequenceErase(%ins) : seq<f32[?,2]>
  %split = SplitToSequence(%cat) {axis = 1, keepdims = 0} : seq<f32[?]>
  %c1 = Constant() {value = dense<f32[2]> [1.0, 2.0]} : f32[2]
  %c2 = Constant() {value = dense<f32[2]> [3.0, 4.0]} : f32[2]
  %consts = SequenceConstruct(%c1, %c2) : seq<f32[2]>
})";
  const std::vector<Tensor> xs = {randomTensor(DType::F32, {1, 2}, 1),
                                  randomTensor(DType::F32, {4, 2}, 2)};
  const Tensor t = randomTensor(DType::F32, {3, 2}, 3);
  for (int64_t pos : {0, 2, -1, 3, -4})
    expectArtifactMatchesInterpreterValues(model, {RtValue::ofSequence(xs), RtValue(t), i64(pos)});
  expectArtifactMatchesInterpreterValues(model, {RtValue::ofSequence({}), RtValue(t), i64(0)});
}

TEST(HostOpArtifact, OptionalsHoldTensorsSequencesOrNothing) {
  const char *model = R"(kiln.model opsets {"" = 18}
graph @g(%o: opt<f32[2]>, %x: f32[2]) -> (%has, %wrapped, %empty, %same, %hasEmpty) {
  %has = OptionalHasElement(%o) : bool[]
  %wrapped = Optional(%x) : opt<f32[2]>
  %empty = Optional() {type = opt<seq<f32[2]>>} : opt<seq<f32[2]>>
  %same = Identity(%o) : opt<f32[2]>
  %hasEmpty = OptionalHasElement(%empty) : bool[]
})";
  const Tensor x = randomTensor(DType::F32, {2}, 4);
  expectArtifactMatchesInterpreterValues(model, {RtValue::ofOptional(nullptr), RtValue(x)});
  expectArtifactMatchesInterpreterValues(
      model, {RtValue::ofOptional(std::make_shared<RtValue>(x)), RtValue(x)});
}

// Strings at the model's edges and stored in the program section (a
// constant read by a host op, a constant output), empty strings and
// multi-byte text included.
TEST(HostOpArtifact, StringTensorsAsInputsOutputsAndConstants) {
  const char *model = R"(kiln.model opsets {"" = 15}
graph @g(%words: string[n], %x: f32[3]) -> (%norm, %text, %back, %const) {
  %norm = StringNormalizer(%words) {case_change_action = "UPPER", stopwords = ["the"]} : string[?]
  %like = Constant() {value = dense<string[1]> ["z"]} : string[1]
  %text = CastLike(%x, %like) : string[3]
  %back = Cast(%text) {to = 1} : f32[3]
  %const = Constant() {value = dense<string[3]> ["", "naïve", "a\"b"]} : string[3]
})";
  const Tensor x = Tensor::fromVector<float>({0.1f, -2.5e-7f, 1e20f}, {3});
  expectArtifactMatchesInterpreterValues(
      model, {RtValue(strings({"the", "Quick", "fox", "THE"})), RtValue(x)});
  expectArtifactMatchesInterpreterValues(model, {RtValue(strings({})), RtValue(x)});
}

TEST(HostOpArtifact, ASessionChecksTheKindOfEachInput) {
  const char *model = R"(kiln.model opsets {"" = 12}
graph @g(%xs: seq<f32[?]>) -> (%len) {
  %len = SequenceLength(%xs) : i64[]
})";
  auto got = runThroughArtifact(model, {RtValue(Tensor(DType::F32, {2}))});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message,
            "input 'xs': it is f32[2], not a sequence (the model expects seq<f32[?]>)");
  got = runThroughArtifact(model, {RtValue::ofSequence({Tensor(DType::I32, {2})})});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message,
            "input 'xs': tensor 0: dtype is i32 (the model expects seq<f32[?]>)");
}

// The C API describes every input and output, and refuses to run a model
// whose values it cannot carry, naming the value and its type.
TEST(HostOpArtifact, TheCApiNamesValuesItCannotCarry) {
  const char *model = R"(kiln.model opsets {"" = 12}
graph @g(%x: f32[2], %xs: seq<f32[?]>) -> (%len, %s) {
  %len = SequenceLength(%xs) : i64[]
  %s = Cast(%x) {to = 8} : string[2]
})";
  auto parsed = parseModel(model, "test.kir");
  ASSERT_TRUE(parsed.ok());
  auto bytes = package::packageModel(std::move(*parsed), {});
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  kiln_model *m = nullptr;
  ASSERT_EQ(kiln_model_load_memory(bytes->data(), bytes->size(), &m), KILN_OK);
  kiln_value_info info;
  ASSERT_EQ(kiln_model_input(m, 1, &info), KILN_OK);
  EXPECT_EQ(info.kind, KILN_KIND_SEQUENCE);
  EXPECT_EQ(info.dtype, KILN_F32);
  ASSERT_EQ(kiln_model_output(m, 1, &info), KILN_OK);
  EXPECT_EQ(info.kind, KILN_KIND_TENSOR);
  EXPECT_EQ(info.dtype, KILN_STRING);
  kiln_session *s = nullptr;
  ASSERT_EQ(kiln_session_create(m, nullptr, &s), KILN_OK);
  float data[2] = {1, 2};
  kiln_tensor in[2] = {{KILN_F32, 1, {2}, data, sizeof data},
                       {KILN_F32, 1, {2}, data, sizeof data}};
  kiln_tensor out[2] = {};
  EXPECT_EQ(kiln_session_run(s, in, 2, out, 2), KILN_ERROR_UNSUPPORTED_VALUE);
  EXPECT_EQ(std::string(kiln_last_error()),
            "input 'xs' is seq<f32[?]>: the C API carries only tensors of numbers and bools; run "
            "this model with the C++ runtime (rt::Session) or `kiln run`");
  kiln_session_free(s);
  kiln_model_free(m);
}

// ---- sequence host ops on their own, against the interpreter ----------------------------

TEST(HostOpsSequence, PositionsCountFromTheBackAndAreChecked) {
  const RtValue seq = RtValue::ofSequence(
      {randomTensor(DType::I32, {2}, 1, -9, 9), randomTensor(DType::I32, {3}, 2, -9, 9)});
  const Tensor t = randomTensor(DType::I32, {1}, 3, -9, 9);
  for (int64_t pos : {-3, -2, -1, 0, 1, 2, 3}) {
    SCOPED_TRACE(pos);
    const Tensor p = Tensor::scalar<int64_t>(pos);
    auto check = [&](const Expected<RtValue> &got, OpKind op,
                     std::vector<std::optional<RtValue>> in) {
      auto want = interpretNode(op, in);
      ASSERT_EQ(got.ok(), want.ok()) << opName(op) << ": "
                                     << (got.ok() ? want.error().message : got.error().message);
      if (got.ok()) {
        EXPECT_EQ(valueDiff(*got, (*want)[0]), "") << opName(op);
      }
    };
    check(host::sequenceAt(seq, p), OpKind::SequenceAt, {seq, RtValue(p)});
    check(host::sequenceErase(seq, p), OpKind::SequenceErase, {seq, RtValue(p)});
    check(host::sequenceInsert(seq, t, p), OpKind::SequenceInsert, {seq, RtValue(t), RtValue(p)});
  }
  EXPECT_EQ(host::sequenceInsert(seq, Tensor(DType::F32, {1}), Tensor()).error().message,
            "tensor of dtype f32 does not fit a sequence of i32");
  EXPECT_EQ(host::sequenceErase(RtValue::ofSequence({}), Tensor()).error().message,
            "cannot erase from an empty sequence");
}

TEST(HostOpsSequence, SplitAndConcatEveryFormMatchInterpreter) {
  const Tensor x = randomTensor(DType::F16, {4, 5}, 5);
  const std::vector<Tensor> splits = {Tensor(), Tensor::scalar<int64_t>(2),
                                      Tensor::scalar<int32_t>(3),
                                      Tensor::fromVector<int64_t>({1, 0, 4}, {3}),
                                      Tensor::fromVector<int64_t>({1, 1}, {2})};
  for (int64_t axis : {0, 1, -1})
    for (int keep = 0; keep <= 1; ++keep)
      for (const Tensor &split : splits) {
        SCOPED_TRACE(::testing::Message() << "axis " << axis << " keepdims " << keep << " split "
                                          << (split.defined() ? RtValue(split).describe() : "-"));
        std::map<std::string, Attribute> attrs{{"axis", Attribute::ofInt(axis)},
                                               {"keepdims", Attribute::ofInt(keep)}};
        auto got = host::splitToSequence(x, split, {axis, keep != 0});
        auto want = interpretNode(
            OpKind::SplitToSequence,
            {RtValue(x), split.defined() ? std::optional<RtValue>(split) : std::nullopt}, attrs);
        ASSERT_EQ(got.ok(), want.ok());
        if (!got.ok()) continue;
        EXPECT_EQ(valueDiff(*got, (*want)[0]), "");
        for (int newAxis = 0; newAxis <= 1; ++newAxis) {
          auto cat = host::concatFromSequence(*got, {axis, newAxis != 0});
          auto catWant = interpretNode(OpKind::ConcatFromSequence, {*got},
                                       {{"axis", Attribute::ofInt(axis)},
                                        {"new_axis", Attribute::ofInt(newAxis)}});
          ASSERT_EQ(cat.ok(), catWant.ok()) << "new_axis " << newAxis;
          if (cat.ok()) {
            EXPECT_EQ(valueDiff(*cat, (*catWant)[0]), "") << "new_axis " << newAxis;
          }
        }
      }
}

} // namespace
} // namespace kiln
