// Recurrent-layer lowerings (lower/recurrent_ops.cpp) through the artifact,
// against the interpreter (op_check.h): RNN, GRU and LSTM in every
// direction and layout, every activation with alpha / beta, clip,
// sequence_lens, initial states, peepholes, input_forget, GRU's
// linear_before_reset, f64, symbolic dims, and a bad sequence length.
// (The common f32 LSTM compiles to the LstmStep microkernel instead; the
// forms here are the ones it refuses.)
#include "artifact_run_error.h"
#include "op_check.h"

#include <gtest/gtest.h>

#include <sstream>

namespace kiln {
namespace {

using testing::artifactRunError;
using testing::expectArtifactMatchesInterpreter;
using testing::randomTensor;

struct Layer {
  const char *op = "RNN";
  int64_t seq = 4, batch = 3, input = 5, hidden = 6;
  std::string direction = "forward";
  int layout = 0;
  bool bias = true, lens = false, initialH = false, initialC = false, peepholes = false;
  std::string attrs; // extra attributes, each followed by ", "
  DType dtype = DType::F32;
  int outputs = 2;
};

int64_t gatesOf(const Layer &l) {
  return std::string(l.op) == "RNN" ? 1 : std::string(l.op) == "GRU" ? 3 : 4;
}
int64_t dirsOf(const Layer &l) {
  return l.direction == "bidirectional" ? 2 : 1;
}

std::string shapeText(DType t, const Shape64 &s) {
  std::string out = std::string(dtypeName(t)) + "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// The model and its random inputs.
std::pair<std::string, std::vector<Tensor>> build(const Layer &l, uint64_t seed) {
  const int64_t g = gatesOf(l), dirs = dirsOf(l), h = l.hidden;
  const Shape64 x = l.layout ? Shape64{l.batch, l.seq, l.input} : Shape64{l.seq, l.batch, l.input};
  const Shape64 state = l.layout ? Shape64{l.batch, dirs, h} : Shape64{dirs, l.batch, h};
  std::vector<std::pair<std::string, Tensor>> in = {
      {"x", randomTensor(l.dtype, x, seed, -1, 1)},
      {"w", randomTensor(l.dtype, {dirs, g * h, l.input}, seed + 1, -0.5, 0.5)},
      {"r", randomTensor(l.dtype, {dirs, g * h, h}, seed + 2, -0.5, 0.5)}};
  std::string args = "%x, %w, %r";
  auto optional = [&](bool given, const std::string &name, Tensor t) {
    if (given) {
      in.emplace_back(name, std::move(t));
      args += ", %" + name;
    } else {
      args += ", _";
    }
  };
  optional(l.bias, "b", randomTensor(l.dtype, {dirs, 2 * g * h}, seed + 3, -0.5, 0.5));
  std::vector<int32_t> lens;
  for (int64_t b = 0; b < l.batch; ++b) lens.push_back(int32_t((b * 7 + seed) % (l.seq + 1)));
  optional(l.lens, "lens", Tensor::fromVector(lens, {l.batch}));
  optional(l.initialH, "h0", randomTensor(l.dtype, state, seed + 4, -1, 1));
  if (std::string(l.op) == "LSTM") {
    optional(l.initialC, "c0", randomTensor(l.dtype, state, seed + 5, -1, 1));
    optional(l.peepholes, "p", randomTensor(l.dtype, {dirs, 3 * h}, seed + 6, -0.5, 0.5));
  }
  std::ostringstream text;
  text << "kiln.model opsets {\"\" = 14}\ngraph @g(";
  for (size_t i = 0; i < in.size(); ++i)
    text << (i ? ", " : "") << "%" << in[i].first << ": "
         << shapeText(in[i].second.dtype(), in[i].second.shape());
  const char *names[] = {"%y", "%yh", "%yc"};
  std::string outs, types;
  for (int o = 0; o < l.outputs; ++o) {
    outs += std::string(o ? ", " : "") + names[o];
    types += std::string(o ? ", " : "") + std::string(dtypeName(l.dtype)) + "[*]";
  }
  text << ") -> (" << outs << ") {\n  " << outs << " = " << l.op << "(" << args << ") {" << l.attrs
       << "direction = \"" << l.direction << "\", hidden_size = " << h << ", layout = " << l.layout
       << "} : " << types << "\n}";
  std::vector<Tensor> tensors;
  for (auto &[name, t] : in) tensors.push_back(t);
  return {text.str(), tensors};
}

void check(const Layer &l, uint64_t seed, double tol = 1e-5) {
  auto [model, inputs] = build(l, seed);
  SCOPED_TRACE(model);
  expectArtifactMatchesInterpreter(model, inputs, {tol, tol});
}

TEST(LowerRecurrentOps, RnnEveryActivationWithAlphaAndBeta) {
  const char *const acts[] = {
      "Relu",       "Tanh",        "Sigmoid", "Affine",   "LeakyRelu", "ThresholdedRelu",
      "ScaledTanh", "HardSigmoid", "Elu",     "Softsign", "Softplus"};
  uint64_t seed = 1;
  for (const char *act : acts) {
    SCOPED_TRACE(act);
    Layer l;
    l.attrs = std::string("activations = [\"") + act +
              "\"], activation_alpha = [0.7], activation_beta = [0.3], ";
    check(l, seed++);
    l.attrs = std::string("activations = [\"") + act + "\"], "; // the ONNX defaults
    check(l, seed++);
  }
}

TEST(LowerRecurrentOps, RnnDirectionsLayoutsStatesAndSequenceLengths) {
  uint64_t seed = 20;
  for (const char *direction : {"forward", "reverse", "bidirectional"})
    for (int layout = 0; layout <= 1; ++layout)
      for (int lens = 0; lens <= 1; ++lens) {
        SCOPED_TRACE(::testing::Message() << direction << " layout " << layout << " lens " << lens);
        Layer l;
        l.direction = direction;
        l.layout = layout;
        l.lens = lens;
        l.initialH = (seed % 2) == 0;
        l.bias = (seed % 3) != 0;
        check(l, seed++);
      }
}

TEST(LowerRecurrentOps, RnnBidirectionalWithDifferentActivationsAndClip) {
  Layer l;
  l.direction = "bidirectional";
  l.attrs = "activations = [\"Relu\", \"LeakyRelu\"], activation_alpha = [0.2], clip = 0.8, ";
  check(l, 40);
  l.outputs = 1;
  check(l, 41);
}

TEST(LowerRecurrentOps, GruEveryFormOfLinearBeforeResetDirectionAndLayout) {
  uint64_t seed = 50;
  for (int lbr = 0; lbr <= 1; ++lbr)
    for (const char *direction : {"forward", "reverse", "bidirectional"})
      for (int layout = 0; layout <= 1; ++layout) {
        SCOPED_TRACE(::testing::Message()
                     << "lbr " << lbr << " " << direction << " layout " << layout);
        Layer l;
        l.op = "GRU";
        l.direction = direction;
        l.layout = layout;
        l.lens = layout == 1;
        l.initialH = lbr == 1;
        l.attrs = "linear_before_reset = " + std::to_string(lbr) + ", ";
        check(l, seed++);
      }
}

TEST(LowerRecurrentOps, GruActivationsAndClip) {
  Layer l;
  l.op = "GRU";
  l.direction = "bidirectional";
  l.attrs = "activations = [\"HardSigmoid\", \"Softsign\", \"Sigmoid\", \"ScaledTanh\"], "
            "activation_alpha = [0.3, 1.5], activation_beta = [0.4, 0.6], clip = 1.2, ";
  check(l, 70);
}

TEST(LowerRecurrentOps, LstmPeepholesInputForgetClipAndSequenceLengths) {
  uint64_t seed = 80;
  for (const char *direction : {"forward", "reverse", "bidirectional"})
    for (int layout = 0; layout <= 1; ++layout) {
      SCOPED_TRACE(::testing::Message() << direction << " layout " << layout);
      Layer l;
      l.op = "LSTM";
      l.outputs = 3;
      l.direction = direction;
      l.layout = layout;
      l.peepholes = true;
      l.lens = true;
      l.initialH = l.initialC = layout == 0;
      l.attrs = std::string("input_forget = ") + (layout ? "1" : "0") + ", clip = 0.9, ";
      check(l, seed++);
    }
}

TEST(LowerRecurrentOps, LstmActivationsAndFloat64) {
  Layer l;
  l.op = "LSTM";
  l.outputs = 3;
  l.attrs = "activations = [\"Tanh\", \"Relu\", \"Elu\"], activation_alpha = [0.5], ";
  check(l, 90);
  l.attrs = "";
  l.dtype = DType::F64;
  l.direction = "bidirectional";
  l.initialH = l.initialC = true;
  check(l, 91, 1e-9);
}

TEST(LowerRecurrentOps, SymbolicSequenceAndBatch) {
  const std::string model = R"(kiln.model opsets {"" = 14}
graph @g(%x: f32[s,b,3], %w: f32[1,12,3], %r: f32[1,12,4], %lens: i32[b]) -> (%y, %yh) {
  %y, %yh = GRU(%x, %w, %r, _, %lens) {hidden_size = 4} : f32[s,1,b,4], f32[1,b,4]
})";
  for (int64_t s : {1, 3, 6}) {
    const int64_t b = 7 - s;
    std::vector<int32_t> lens;
    for (int64_t i = 0; i < b; ++i) lens.push_back(int32_t(i % (s + 1)));
    expectArtifactMatchesInterpreter(model, {randomTensor(DType::F32, {s, b, 3}, s),
                                             randomTensor(DType::F32, {1, 12, 3}, s + 1, -0.5, 0.5),
                                             randomTensor(DType::F32, {1, 12, 4}, s + 2, -0.5, 0.5),
                                             Tensor::fromVector(lens, {b})});
  }
}

TEST(LowerRecurrentOps, LargeBatchesSplitOverFourThreads) {
  Layer l;
  l.op = "LSTM";
  l.outputs = 3;
  l.seq = 20;
  l.batch = 24;
  l.input = 16;
  l.hidden = 32;
  l.direction = "bidirectional";
  l.peepholes = l.lens = true;
  auto [model, inputs] = build(l, 110);
  testing::OpCheckOptions four{1e-5, 1e-5};
  four.threads = 4;
  expectArtifactMatchesInterpreter(model, inputs, four);
}

TEST(LowerRecurrentOps, ReportsASequenceLengthOutOfRange) {
  Layer l;
  l.lens = true;
  auto [model, inputs] = build(l, 100);
  inputs[4] = Tensor::fromVector(std::vector<int32_t>{1, 5, 2}, {3});
  EXPECT_NE(artifactRunError(model, inputs).find("sequence_lens"), std::string::npos);
}

} // namespace
} // namespace kiln
