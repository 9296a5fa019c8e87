// Two threads run one model at once through separate sessions (kiln.h:
// models are shared, sessions are per thread). Each thread's outputs must
// equal, bit for bit, what one session computes alone on the same inputs.
// Built and run under ThreadSanitizer by scripts/tsan.sh, and plainly by
// CTest.
//
//   concurrent_sessions_test MODEL.kiln [ROUNDS]
#include "kiln/kiln.hpp"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

namespace {

// Random inputs for the model, symbolic dims set to `dim`.
std::vector<kiln::Tensor> randomInputs(const kiln::Model &model, int64_t dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<kiln::Tensor> inputs;
  for (const kiln::ValueInfo &info : model.inputs()) {
    kiln::Tensor t;
    t.dtype = info.dtype;
    for (int64_t d : info.shape) t.shape.push_back(d < 0 ? dim : d);
    t.bytes.resize(size_t(t.numel()) * kiln::dtypeSize(t.dtype));
    if (t.dtype == KILN_F32)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = uniform(rng);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.kiln [ROUNDS] [DIM]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const int64_t dim = argc > 3 ? std::atoll(argv[3]) : 64;
  try {
    kiln::Model model = kiln::Model::load(argv[1]);
    std::vector<std::vector<kiln::Tensor>> inputs = {randomInputs(model, dim, 1),
                                                     randomInputs(model, dim, 2)};
    // The expected outputs, one session, one thread.
    std::vector<std::vector<kiln::Tensor>> expected;
    {
      kiln::Session alone(model, 1);
      for (const auto &in : inputs) expected.push_back(alone.run(in));
    }
    int failures = 0;
    std::vector<std::thread> threads;
    std::vector<int> bad(2, 0);
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&, t] {
        kiln::Session session(model, 2); // each session has its own pool
        for (int r = 0; r < rounds; ++r) {
          std::vector<kiln::Tensor> out = session.run(inputs[t]);
          for (size_t o = 0; o < out.size(); ++o)
            if (out[o].shape != expected[t][o].shape || out[o].bytes != expected[t][o].bytes) ++bad[t];
        }
      });
    for (auto &th : threads) th.join();
    for (int t = 0; t < 2; ++t) {
      if (bad[t]) std::fprintf(stderr, "thread %d: %d outputs differ from the serial run\n", t, bad[t]);
      failures += bad[t];
    }
    if (failures) return 1;
    std::printf("2 threads x %d rounds: outputs identical to the serial run\n", rounds);
    return 0;
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
