// Attention end to end: recognize-attention in the -O3 pipeline turns the
// pattern into one step on the flash kernel (runtime/cpu/attention_step.h),
// which survives the artifact and matches the interpreter on the unfused
// graph: a BERT-style layer with a padding mask from attention_mask (a
// symbolic batch, fully masked rows included) and torch's 3-D layout with a
// causal mask of -inf.
#include "artifact_runner.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/cpu/program.h"
#include "verify/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>

namespace kiln {
namespace {

// [B, 4 heads, S, 16] from x [B, S, 64]; mask = (1 - attention_mask) * lowest.
const char *kBertLayer = R"(kiln.model
graph @main(%x: f32[B,S,64], %am: i64[B,S]) -> (%y) {
  %shape = Constant() {value = dense<i64[4]> [0, 0, 4, 16]} : i64[4]
  %qr = Reshape(%x, %shape) : f32[B,S,4,16]
  %q = Transpose(%qr) {perm = [0, 2, 1, 3]} : f32[B,4,S,16]
  %kt = Transpose(%qr) {perm = [0, 2, 3, 1]} : f32[B,4,16,S]
  %two = Constant() {value = dense<f32[]> [2.0]} : f32[]
  %vr = Mul(%qr, %two) : f32[B,S,4,16]
  %v = Transpose(%vr) {perm = [0, 2, 1, 3]} : f32[B,4,S,16]
  %axes = Constant() {value = dense<i64[2]> [1, 2]} : i64[2]
  %am4 = Unsqueeze(%am, %axes) : i64[B,1,1,S]
  %amf = Cast(%am4) {to = 1} : f32[B,1,1,S]
  %one = Constant() {value = dense<f32[]> [1.0]} : f32[]
  %inv = Sub(%one, %amf) : f32[B,1,1,S]
  %low = Constant() {value = dense<f32[]> [-3.4028234663852886e+38]} : f32[]
  %mask = Mul(%inv, %low) : f32[B,1,1,S]
  %s = MatMul(%q, %kt) : f32[B,4,S,S]
  %four = Constant() {value = dense<f32[]> [4.0]} : f32[]
  %t = Div(%s, %four) : f32[B,4,S,S]
  %u = Add(%t, %mask) : f32[B,4,S,S]
  %p = Softmax(%u) {axis = -1} : f32[B,4,S,S]
  %y = MatMul(%p, %v) : f32[B,4,S,16]
}
)";

// Heads folded into the batch, Q scaled first, a causal mask of -inf.
const char *kCausal3d = R"(kiln.model
graph @main(%q0: f32[N,T,32], %k: f32[N,T,32], %v: f32[N,T,32], %causal: f32[T,T]) -> (%y) {
  %c = Constant() {value = dense<f32[]> [0.17677669]} : f32[]
  %q = Mul(%q0, %c) : f32[N,T,32]
  %kt = Transpose(%k) {perm = [0, 2, 1]} : f32[N,32,T]
  %s = MatMul(%q, %kt) : f32[N,T,T]
  %u = Add(%s, %causal) : f32[N,T,T]
  %p = Softmax(%u) {axis = -1} : f32[N,T,T]
  %y = MatMul(%p, %v) : f32[N,T,32]
}
)";

// A one-row Q against a [T, T] mask: the unfused Add grows the scores to T
// rows, and so must the step.
const char *kGrowingMask = R"(kiln.model
graph @main(%q: f32[N,1,16], %kt: f32[N,16,T], %v: f32[N,T,16], %mask: f32[T,T]) -> (%y) {
  %s = MatMul(%q, %kt) : f32[N,1,T]
  %u = Add(%s, %mask) : f32[N,T,T]
  %p = Softmax(%u) {axis = -1} : f32[N,T,T]
  %y = MatMul(%p, %v) : f32[N,T,16]
}
)";

Tensor randomTensor(Shape64 shape, std::mt19937_64 &rng) {
  Tensor t(DType::F32, std::move(shape));
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float &f : t.span<float>()) f = n(rng);
  return t;
}

int attentionSteps(const cpu::Program &p) {
  int n = 0;
  for (const auto &step : p.steps) n += step->kind() == cpu::StepKind::Attention;
  return n;
}

void expectMatches(const char *text, const std::vector<std::vector<RtValue>> &runs) {
  auto reference = parseModel(text, "reference");
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  for (int threads : {1, 2}) {
    auto model = parseModel(text, "model");
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto compiled = testing::ArtifactRunner::compile(std::move(*model), {}, threads);
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    EXPECT_EQ(attentionSteps((*compiled)->program()), 1);
    Interpreter interp;
    for (const std::vector<RtValue> &inputs : runs) {
      auto want = interp.run(*reference->graph, inputs);
      ASSERT_TRUE(want.ok()) << want.error().message;
      auto got = (*compiled)->run(inputs);
      ASSERT_TRUE(got.ok()) << got.error().message;
      const verify::Metrics m = verify::compareTensors((*got)[0].tensor, (*want)[0].tensor, {});
      ASSERT_TRUE(m.error.empty()) << m.error;
      EXPECT_LE(m.relL2, 1e-5) << "output " << shapeToString((*want)[0].tensor.shape());
      EXPECT_EQ(m.nanGot, m.nanRef);
    }
  }
}

TEST(AttentionStep, BertLayerWithPaddingMaskMatchesTheInterpreter) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<RtValue>> runs;
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 128}, {3, 37}, {2, 200}}) {
    Tensor am(DType::I64, {batch, seq});
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) // row 1 is all padding
        am.data<int64_t>()[b * seq + s] = b == 1 ? 0 : s < seq - 5 * b;
    runs.push_back({RtValue(randomTensor({batch, seq, 64}, rng)), RtValue(am)});
  }
  expectMatches(kBertLayer, runs);
}

TEST(AttentionStep, CausalThreeDimensionalAttentionMatchesTheInterpreter) {
  std::mt19937_64 rng(8);
  std::vector<std::vector<RtValue>> runs;
  for (auto [n, t] : {std::pair<int64_t, int64_t>{12, 50}, {8, 1}, {4, 300}}) {
    Tensor causal(DType::F32, {t, t});
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) causal.data<float>()[i * t + j] = j > i ? -INFINITY : 0.0f;
    runs.push_back({RtValue(randomTensor({n, t, 32}, rng)), RtValue(randomTensor({n, t, 32}, rng)),
                    RtValue(randomTensor({n, t, 32}, rng)), RtValue(causal)});
  }
  expectMatches(kCausal3d, runs);
}

TEST(AttentionStep, MaskWiderThanTheScoresGrowsThemAsTheUnfusedAddDoes) {
  std::mt19937_64 rng(9);
  std::vector<std::vector<RtValue>> runs;
  for (auto [n, t] : {std::pair<int64_t, int64_t>{3, 20}, {2, 1}})
    runs.push_back({RtValue(randomTensor({n, 1, 16}, rng)), RtValue(randomTensor({n, 16, t}, rng)),
                    RtValue(randomTensor({n, t, 16}, rng)), RtValue(randomTensor({t, t}, rng))});
  expectMatches(kGrowingMask, runs);
}

} // namespace
} // namespace kiln
