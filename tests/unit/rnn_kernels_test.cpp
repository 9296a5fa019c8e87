// kernels::PackedLstm against the interpreter's LSTM (the reference: ONNX
// semantics, gates i, o, f, c) on random data: forward, reverse and
// bidirectional, layouts 0 and 1, with and without initial states and
// biases, batch 1 and more, hidden sizes that are and are not multiples of
// the vector width, silero VAD's shape (seq 1, batch 1, hidden 128) and a
// long sequence, on every ISA this CPU supports, with 1 and 2 threads.
// Y, Y_h and Y_c must agree to 1e-5.
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "kernel_isas.h"
#include "kernels/rnn.h"
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

struct LstmCase {
  int64_t seq, batch, input, hidden;
  const char *direction;
  int layout;
  bool initialState, bias;
};

std::string describe(const LstmCase &c) {
  std::ostringstream os;
  os << "seq" << c.seq << " batch" << c.batch << " input" << c.input << " hidden" << c.hidden << " "
     << c.direction << " layout" << c.layout << " initial=" << c.initialState << " bias=" << c.bias;
  return os.str();
}

std::string dims(const Shape64 &s) {
  std::string out = "f32[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

Tensor randomTensor(Shape64 shape, float scale, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  Tensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

void check(const LstmCase &lc, GemmIsa isa, runtime::ThreadPool &pool) {
  const int64_t T = lc.seq, B = lc.batch, I = lc.input, H = lc.hidden;
  const int64_t D = std::string(lc.direction) == "bidirectional" ? 2 : 1;
  const bool batchFirst = lc.layout == 1, reverseOnly = std::string(lc.direction) == "reverse";
  const Shape64 xShape = batchFirst ? Shape64{B, T, I} : Shape64{T, B, I};
  const Shape64 stateShape = batchFirst ? Shape64{B, D, H} : Shape64{D, B, H};
  std::mt19937 rng(uint32_t(T * 1000 + B * 100 + I * 10 + H + D));
  const float ws = 1.0f / std::sqrt(float(H)); // PyTorch's init range
  Tensor x = randomTensor(xShape, 1.0f, rng), w = randomTensor({D, 4 * H, I}, ws, rng),
         r = randomTensor({D, 4 * H, H}, ws, rng), b = randomTensor({D, 8 * H}, ws, rng),
         h0 = randomTensor(stateShape, 1.0f, rng), c0 = randomTensor(stateShape, 1.0f, rng);

  // The reference: one LSTM node run by the interpreter.
  std::ostringstream text;
  text << "graph @g(%x: " << dims(xShape) << ", %w: " << dims(w.shape())
       << ", %r: " << dims(r.shape()) << ", %b: " << dims(b.shape())
       << ", %h0: " << dims(stateShape) << ", %c0: " << dims(stateShape)
       << ") -> (%y, %yh, %yc) {\n  %y, %yh, %yc = LSTM(%x, %w, %r, " << (lc.bias ? "%b" : "_")
       << ", _, " << (lc.initialState ? "%h0, %c0" : "_, _") << ") {direction = \"" << lc.direction
       << "\", hidden_size = " << H << ", layout = " << lc.layout
       << "} : f32[*], f32[*], f32[*]\n}";
  auto model = parseModel(text.str(), "lstm.kir");
  ASSERT_TRUE(model.ok()) << model.error().message << "\n" << text.str();
  Interpreter interp;
  auto ref = interp.run(*model->graph,
                        {RtValue(x), RtValue(w), RtValue(r), RtValue(b), RtValue(h0), RtValue(c0)});
  ASSERT_TRUE(ref.ok()) << ref.error().message;

  // The kernel, with the layout handling of the CPU backend's LSTM step.
  auto ioAt = [&](int64_t d, int64_t bi) { return (batchFirst ? bi * D + d : d * B + bi) * H; };
  std::vector<float> h(size_t(D * B * H), 0.0f), c(h.size(), 0.0f);
  if (lc.initialState)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t bi = 0; bi < B; ++bi) {
        std::copy_n(h0.data<float>() + ioAt(d, bi), H, h.data() + (d * B + bi) * H);
        std::copy_n(c0.data<float>() + ioAt(d, bi), H, c.data() + (d * B + bi) * H);
      }
  std::vector<float> y(size_t(T * D * B * H), std::nanf(""));
  for (int64_t d = 0; d < D; ++d) {
    const float *bd = lc.bias ? b.data<float>() + d * 8 * H : nullptr;
    PackedLstm p =
        PackedLstm::pack(H, I, w.data<float>() + d * 4 * H * I, r.data<float>() + d * 4 * H * H, bd,
                         bd ? bd + 4 * H : nullptr, isa);
    float *yd = y.data() + (batchFirst ? d * H : d * B * H);
    const int64_t strideT = D * H * (batchFirst ? 1 : B), strideB = batchFirst ? T * D * H : H;
    p.run(T, B, batchFirst, reverseOnly || d == 1, x.data<float>(), h.data() + d * B * H,
          c.data() + d * B * H, yd, strideT, strideB, &pool);
  }

  const std::string where =
      describe(lc) + " " + gemmIsaName(isa) + " threads=" + std::to_string(pool.threads());
  const Tensor &yRef = (*ref)[0].tensor, &yhRef = (*ref)[1].tensor, &ycRef = (*ref)[2].tensor;
  ASSERT_EQ(yRef.numel(), int64_t(y.size())) << where;
  for (int64_t i = 0; i < yRef.numel(); ++i)
    ASSERT_NEAR(y[size_t(i)], yRef.data<float>()[i], 1e-5) << where << " Y[" << i << "]";
  for (int64_t d = 0; d < D; ++d)
    for (int64_t bi = 0; bi < B; ++bi)
      for (int64_t j = 0; j < H; ++j) {
        const float yh = yhRef.data<float>()[ioAt(d, bi) + j];
        const float yc = ycRef.data<float>()[ioAt(d, bi) + j];
        ASSERT_NEAR(h[size_t((d * B + bi) * H + j)], yh, 1e-5) << where << " Y_h";
        ASSERT_NEAR(c[size_t((d * B + bi) * H + j)], yc, 1e-5 * (1 + std::abs(yc)))
            << where << " Y_c";
      }
}

std::vector<LstmCase> cases() {
  return {
      {1, 1, 128, 128, "forward", 0, true, true},      // silero VAD
      {5, 3, 7, 8, "bidirectional", 0, true, true},    //
      {4, 2, 5, 16, "reverse", 1, false, true},        //
      {6, 1, 3, 33, "bidirectional", 1, true, true},   // hidden not a multiple of 16
      {3, 4, 10, 4, "forward", 1, false, false},       // no bias, tiny hidden
      {7, 5, 1, 20, "reverse", 0, true, false},        // one input feature
      {40, 2, 16, 64, "bidirectional", 0, true, true}, // a longer sequence
      {2, 33, 24, 48, "forward", 0, true, true},       // a big batch: GEMMs split
  };
}

class LstmKernelTest : public ::testing::TestWithParam<IsaAndThreads> {};

TEST_P(LstmKernelTest, MatchesTheInterpreter) {
  auto [isa, threads] = GetParam();
  runtime::ThreadPool pool(threads);
  for (const LstmCase &c : cases()) {
    check(c, isa, pool);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(IsasAndThreads, LstmKernelTest, isasAndThreads(), isaAndThreadsName);

} // namespace
} // namespace kiln::kernels
