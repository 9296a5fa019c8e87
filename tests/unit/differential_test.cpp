// The differential fuzz test: random small graphs (random_graph.h) run by the
// reference interpreter and by the CPU compiler, every output compared
// element by element. The compiled side is an artifact loaded by the runtime
// library (artifact_runner.h), so it checks whatever path each op takes
// (generated kernel, microkernel, host op) exactly as it ships.
//
// Seeds: first those of differential_regressions.txt (seeds that once
// failed), then 0..N-1 with N from KILN_DIFF_SEEDS (default 300).
// KILN_DIFF_SEED=N runs that one seed alone and prints its graph and the
// compiled model's steps. A failing
// seed's graph (full weights) and inputs are written to KILN_DIFF_DUMP_DIR
// (default: the test temp dir) so `kiln run` can replay it.
//
// Each seed compiles at -O3 with 1 thread; every 5th seed also with 2
// threads (and with larger values, see graphOptionsFor), every 7th also at
// -O0. Each compiled model runs three times (the seed's inputs, fresh
// inputs, the seed's inputs again).
//
// Tolerance, per element: |got - want| <= atol + rtol*|want| + 4*noise, where
// rtol = 1e-4, atol = 1e-5 (f32) and noise estimates how far that element
// moves under legitimate rounding differences: the larger of the
// reference's distance to the interpreter with f64 accumulation (summation
// order in reductions, matmuls, convs) and its distances to four perturbed
// twins of the seed's graph (every value moved by up to 8 ulp, see
// RandomGraphOptions::perturbation). Where an output is well-conditioned it
// is a few ulp, far below rtol, so there the tolerance is the plain one; it
// only opens where the graph itself amplifies rounding (a layer norm of
// nearly constant rows, a sum that cancels). Four twins rather than one:
// one twin's perturbations can cancel at an element (f32 perturbations come
// in whole ulps) and make its estimate there much too small. The summary
// line counts the elements that needed the noise term.
#include "artifact_runner.h"
#include "random_graph.h"

#include "backend/cpu/compiler.h"
#include "interp/interpreter.h"
#include "ir/printer.h"
#include "support/npy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace kiln {
namespace {

using testing::generateRandomGraph;
using testing::RandomGraph;
using Clock = std::chrono::steady_clock;

constexpr double kRtol = 1e-4, kAtol = 1e-5; // f32
constexpr double kNoiseFactor = 4;
constexpr double kPerturbation = 0x1p-20; // relative: up to 8 ulp of f32
constexpr int kTwins = 4;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Config {
  int optLevel, threads;
  std::string str() const {
    return "-O" + std::to_string(optLevel) + " threads=" + std::to_string(threads);
  }
};

// Every seed that also runs on 2 threads gets values big enough for the
// kernels to split their work (elementwise steps split above 16K elements).
testing::RandomGraphOptions graphOptionsFor(uint64_t seed) {
  testing::RandomGraphOptions options;
  if (seed % 5 == 0) {
    options.maxInputElements = 1 << 15;
    options.maxValueElements = 1 << 16;
  }
  return options;
}

std::vector<Config> configsFor(uint64_t seed) {
  std::vector<Config> configs = {{3, 1}};
  if (seed % 5 == 0) configs.push_back({3, 2});
  if (seed % 7 == 0) configs.push_back({0, 1});
  return configs;
}

std::optional<uint64_t> envSeed(const char *name) {
  const char *s = std::getenv(name);
  if (!s || !*s) return std::nullopt;
  return std::strtoull(s, nullptr, 10);
}

// One seed per line, "# ..." comments anywhere.
std::vector<uint64_t> regressionSeeds() {
  std::ifstream f(std::string(KILN_SOURCE_DIR) + "/tests/unit/differential_regressions.txt");
  std::vector<uint64_t> seeds;
  std::string line;
  while (std::getline(f, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream in(line);
    uint64_t seed;
    if (in >> seed) seeds.push_back(seed);
  }
  return seeds;
}

std::string indexString(const Shape64 &shape, int64_t flat) {
  std::string s;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    s = std::to_string(flat % shape[i]) + (s.empty() ? "" : ",") + s;
    flat /= shape[i];
  }
  return "[" + s + "]";
}

// Element-wise noise estimate of an output: the largest distance from the
// reference to the other reference runs.
std::vector<double> noiseOf(const Tensor &want, const std::vector<const Tensor *> &others) {
  std::vector<double> noise(want.numel(), 0.0);
  for (const Tensor *o : others) {
    if (o->shape() != want.shape() || o->dtype() != want.dtype()) continue;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double d = std::fabs(o->getDouble(i) - want.getDouble(i));
      if (!std::isnan(d)) noise[i] = std::max(noise[i], d);
    }
  }
  return noise;
}

struct Comparison {
  std::string failure;     // empty when every element is within tolerance
  int64_t noisyPasses = 0; // elements within tolerance only thanks to the noise term
  double noisyRatio = 0;   // the largest |diff| / plain tolerance among those
};

Comparison compareTensors(const Tensor &got, const Tensor &want, const std::vector<double> &noise) {
  Comparison c;
  std::ostringstream os;
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    os << "got " << dtypeName(got.dtype()) << shapeToString(got.shape()) << ", expected "
       << dtypeName(want.dtype()) << shapeToString(want.shape());
    c.failure = os.str();
    return c;
  }
  int64_t bad = 0, worst = -1;
  double worstRatio = 0;
  auto tolerance = [&](int64_t i) {
    return kAtol + kRtol * std::fabs(want.getDouble(i)) + kNoiseFactor * noise[i];
  };
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.getDouble(i), b = want.getDouble(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue; // also equal infinities
    const double err = std::fabs(a - b), tol = tolerance(i);
    if (err <= tol) { // NaN err (one side NaN or inf) falls through
      const double plain = kAtol + kRtol * std::fabs(b);
      if (err > plain) {
        ++c.noisyPasses;
        c.noisyRatio = std::max(c.noisyRatio, err / plain);
      }
      continue;
    }
    ++bad;
    const double ratio = std::isnan(err) ? INFINITY : err / tol;
    if (worst < 0 || ratio > worstRatio) worst = i, worstRatio = ratio;
  }
  if (bad == 0) return c;
  os.precision(9);
  const double a = got.getDouble(worst), b = want.getDouble(worst);
  os << bad << " of " << want.numel() << " elements differ; worst at "
     << indexString(want.shape(), worst) << ": got " << a << ", expected " << b << " (|diff| "
     << std::fabs(a - b) << ", tolerance " << tolerance(worst) << " of which noise "
     << kNoiseFactor * noise[worst] << ")";
  c.failure = os.str();
  return c;
}

struct Totals {
  int seeds = 0, compiles = 0, skipped = 0;
  int steps = 0, generatedKernels = 0, microkernelSteps = 0;
  int64_t elements = 0, noisyPasses = 0;
  double seedNoisyRatio = 0;                           // of the seed being checked
  std::vector<std::pair<double, uint64_t>> noisySeeds; // seeds that needed the noise term
  double generate = 0, interp = 0, compile = 0, run = 0;
  std::map<std::string, std::vector<uint64_t>> skipReasons;
};

std::string reproLine(uint64_t seed) {
  return "reproduce: KILN_DIFF_SEED=" + std::to_string(seed) +
         " kiln_unit_tests --gtest_filter=Differential.CompiledMatchesInterpreter\n"
         "then add the seed to tests/unit/differential_regressions.txt";
}

// Writes the seed's graph (weights in full) and the inputs of the failing
// run where a person can replay them; returns a line saying where.
std::string dumpSeed(uint64_t seed, const RandomGraph &g, const std::vector<RtValue> &inputs) {
  const char *env = std::getenv("KILN_DIFF_DUMP_DIR");
  const std::filesystem::path dir =
      std::filesystem::path(env && *env ? env : ::testing::TempDir()) /
      ("kiln_diff_seed_" + std::to_string(seed));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream(dir / "model.kir") << printModel(g.model);
  std::string args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string &name = g.model.graph->inputs()[i]->name();
    const std::string path = (dir / (name + ".npy")).string();
    if (!writeNpy(path, inputs[i].tensor).ok()) return "could not write " + path;
    args += " --input " + name + "=" + path;
  }
  return "replay: kiln run " + (dir / "model.kir").string() + args;
}

// The interpreter's outputs for one set of inputs, with their noise
// estimate (see the top of the file).
struct Reference {
  std::string label; // names the input set in reports
  std::vector<RtValue> inputs, outputs;
  std::vector<std::vector<double>> noise; // per output, per element
};

Expected<Reference> referenceFor(uint64_t seed, const RandomGraph &g, std::string label,
                                 std::vector<RtValue> inputs) {
  Reference r;
  r.label = std::move(label);
  KILN_ASSIGN_OR_RETURN(r.outputs, Interpreter().run(*g.model.graph, inputs));
  std::vector<std::vector<RtValue>> others;
  KILN_ASSIGN_OR_RETURN(
      auto f64, Interpreter(InterpOptions{.accumulateF64 = true}).run(*g.model.graph, inputs));
  others.push_back(std::move(f64));
  for (uint64_t k = 1; k <= kTwins; ++k) {
    testing::RandomGraphOptions options = graphOptionsFor(seed);
    options.perturbation = kPerturbation;
    options.perturbationSeed = k;
    auto twin = generateRandomGraph(seed, options);
    if (!twin.ok()) return makeError("perturbed twin: ", twin.error().message);
    if (twin->ops != g.ops) return makeError("the perturbed twin has other ops");
    KILN_ASSIGN_OR_RETURN(auto out, Interpreter().run(*twin->model.graph, inputs));
    others.push_back(std::move(out));
  }
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    std::vector<const Tensor *> ts;
    for (const auto &o : others)
      if (i < o.size()) ts.push_back(&o[i].tensor);
    r.noise.push_back(noiseOf(r.outputs[i].tensor, ts));
  }
  r.inputs = std::move(inputs);
  return r;
}

// Compares a compiled run with the reference; "" when all outputs match.
std::string compareRun(const std::vector<RtValue> &got, const Reference &want, const Graph &graph,
                       Totals &totals) {
  if (got.size() != want.outputs.size())
    return "got " + std::to_string(got.size()) + " outputs, expected " +
           std::to_string(want.outputs.size()) + "\n";
  std::string failure;
  for (size_t i = 0; i < got.size(); ++i) {
    std::string diff = "output is not a tensor";
    if (got[i].isTensor()) {
      Comparison c = compareTensors(got[i].tensor, want.outputs[i].tensor, want.noise[i]);
      diff = c.failure;
      totals.elements += want.outputs[i].tensor.numel();
      totals.noisyPasses += c.noisyPasses;
      totals.seedNoisyRatio = std::max(totals.seedNoisyRatio, c.noisyRatio);
    }
    if (!diff.empty())
      failure +=
          "output " + std::to_string(i) + " %" + graph.outputs()[i]->name() + ": " + diff + "\n";
  }
  return failure;
}

// Runs one seed in every configuration; returns the failure report, or ""
// when every output matches. Each compiled model runs three times: on the
// seed's inputs, on fresh inputs of the same shapes, and on the first
// inputs again, so results cached or state left over from a run show up.
std::string checkSeed(uint64_t seed, Totals &totals, bool verbose) {
  ++totals.seeds;
  totals.seedNoisyRatio = 0;
  auto t0 = Clock::now();
  auto generated = generateRandomGraph(seed, graphOptionsFor(seed));
  totals.generate += secondsSince(t0);
  if (!generated.ok()) {
    ++totals.skipped;
    totals.skipReasons["generator: " + generated.error().message].push_back(seed);
    return "";
  }
  const RandomGraph &g = *generated;
  const std::string text = printModel(g.model, PrintOptions{.elideLargeConstants = true});
  std::string ops;
  for (const std::string &op : g.ops) ops += (ops.empty() ? "" : ", ") + op;
  if (verbose)
    std::printf("seed %llu: %s\n%s", static_cast<unsigned long long>(seed), ops.c_str(),
                text.c_str());

  t0 = Clock::now();
  std::vector<Reference> refs;
  for (auto [label, inputs] :
       {std::pair{"the seed's inputs", g.inputs},
        std::pair{"fresh inputs", testing::randomInputs(*g.model.graph, seed, 1)}}) {
    auto r = referenceFor(seed, g, label, inputs);
    if (!r.ok()) {
      ++totals.skipped;
      totals.skipReasons["interpreter: " + r.error().message].push_back(seed);
      return "";
    }
    refs.push_back(std::move(*r));
  }
  totals.interp += secondsSince(t0);

  std::string report;
  const std::vector<RtValue> *failingInputs = nullptr;
  for (const Config &config : configsFor(seed)) {
    auto fresh = generateRandomGraph(seed, graphOptionsFor(seed)); // compile consumes the model
    package::PackageOptions options;
    options.optLevel = config.optLevel;
    t0 = Clock::now();
    auto compiled = testing::ArtifactRunner::compile(std::move(fresh->model), options, config.threads);
    totals.compile += secondsSince(t0);
    ++totals.compiles;
    std::string failure;
    if (!compiled.ok()) {
      failure = "compile failed: " + compiled.error().message + "\n";
    } else {
      const cpu::CompileStats &stats = (*compiled)->stats();
      totals.steps += stats.steps;
      totals.generatedKernels += stats.generatedKernels;
      totals.microkernelSteps += stats.microkernelSteps;
      (*compiled)->session().setProfiling(verbose);
      for (int run = 0; run < 3 && failure.empty(); ++run) {
        const Reference &ref = refs[run == 1 ? 1 : 0];
        t0 = Clock::now();
        auto got = (*compiled)->run(ref.inputs);
        totals.run += secondsSince(t0);
        const std::string diff = got.ok() ? compareRun(*got, ref, *g.model.graph, totals)
                                          : "run failed: " + got.error().message + "\n";
        if (diff.empty()) continue;
        failure = "run " + std::to_string(run + 1) + " (" + ref.label +
                  (run == 2 ? ", again" : "") + "):\n" + diff;
        if (!failingInputs) failingInputs = &ref.inputs;
      }
    }
    if (verbose && compiled.ok())
      std::printf("steps (%s):\n%s", config.str().c_str(),
                  (*compiled)->session().profileReport().c_str());
    if (failure.empty()) continue;
    if (report.empty()) {
      report = "seed " + std::to_string(seed) + " (" + config.str() + "), " + failure;
    } else {
      report += "also fails with " + config.str() + "\n";
    }
  }
  if (report.empty()) return "";
  return report + "ops: " + ops + "\n" + text + reproLine(seed) + "\n" +
         dumpSeed(seed, g, failingInputs ? *failingInputs : g.inputs) + "\n";
}

TEST(Differential, CompiledMatchesInterpreter) {
  std::vector<uint64_t> seeds;
  const std::vector<uint64_t> regressions = regressionSeeds();
  const bool single = envSeed("KILN_DIFF_SEED").has_value();
  if (single) {
    seeds = {*envSeed("KILN_DIFF_SEED")};
  } else {
    const uint64_t n = envSeed("KILN_DIFF_SEEDS").value_or(300);
    std::set<uint64_t> seen;
    for (uint64_t s : regressions)
      if (seen.insert(s).second) seeds.push_back(s);
    for (uint64_t s = 0; s < n; ++s)
      if (seen.insert(s).second) seeds.push_back(s);
  }

  Totals totals;
  std::vector<uint64_t> failed;
  const auto t0 = Clock::now();
  for (uint64_t seed : seeds) {
    const std::string report = checkSeed(seed, totals, single);
    if (totals.seedNoisyRatio > 0) totals.noisySeeds.emplace_back(totals.seedNoisyRatio, seed);
    if (report.empty()) continue;
    failed.push_back(seed);
    ADD_FAILURE() << report;
  }

  std::printf("[ diff     ] %d seeds (%zu from the regression list), %d compiles in %.1f s: "
              "generate %.1f s, interpreter %.1f s (with noise runs), compile %.1f s, run %.1f s\n",
              totals.seeds, single ? size_t(0) : regressions.size(), totals.compiles,
              secondsSince(t0), totals.generate, totals.interp, totals.compile, totals.run);
  std::printf("[ diff     ] steps: %d, generated kernels %d, microkernel steps %d\n", totals.steps,
              totals.generatedKernels, totals.microkernelSteps);
  std::printf("[ diff     ] %lld output elements compared, %lld within tolerance only thanks to "
              "the noise estimate\n",
              static_cast<long long>(totals.elements), static_cast<long long>(totals.noisyPasses));
  if (!totals.noisySeeds.empty()) {
    // Where the noise estimate matters most: candidates for the regression
    // list, and the first place to look if it ever hides too much.
    std::sort(totals.noisySeeds.rbegin(), totals.noisySeeds.rend());
    std::string list;
    for (size_t i = 0; i < std::min<size_t>(5, totals.noisySeeds.size()); ++i)
      list += strCat(" ", totals.noisySeeds[i].second, " (", totals.noisySeeds[i].first, "x)");
    std::printf("[ diff     ] %zu seeds needed it; furthest past the plain tolerance:%s\n",
                totals.noisySeeds.size(), list.c_str());
  }
  std::printf("[ diff     ] skipped %d seeds (invalid graph)\n", totals.skipped);
  for (const auto &[reason, skippedSeeds] : totals.skipReasons) {
    std::string list;
    for (uint64_t s : skippedSeeds) list += " " + std::to_string(s);
    std::printf("[ diff     ]   %zu x %s; seeds:%s\n", skippedSeeds.size(), reason.c_str(),
                list.c_str());
  }
  if (!failed.empty()) {
    std::string list;
    for (uint64_t s : failed) list += " " + std::to_string(s);
    std::printf("[ diff     ] failing seeds:%s\n", list.c_str());
  }
  // A seed that makes an invalid graph tests nothing: it is a generator bug.
  EXPECT_EQ(totals.skipped, 0) << "the generator made invalid graphs (reasons above)";
}

// The same seed gives the same graph and inputs; the failure reports and the
// regression list rely on it.
TEST(Differential, GeneratorIsDeterministic) {
  for (uint64_t seed : {0u, 1u, 17u, 12345u}) {
    auto a = generateRandomGraph(seed), b = generateRandomGraph(seed);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(printModel(a->model), printModel(b->model)) << "seed " << seed;
    ASSERT_EQ(a->inputs.size(), b->inputs.size());
    for (size_t i = 0; i < a->inputs.size(); ++i)
      EXPECT_TRUE(a->inputs[i].tensor.identical(b->inputs[i].tensor)) << "seed " << seed;
  }
}

// Over the default seed budget the generator reaches every op family the
// issue lists, so a narrowing change to it does not go unnoticed.
TEST(Differential, GeneratorCoversTheOpFamilies) {
  std::map<OpKind, int> counts;
  std::map<std::string, int> attrsSeen;
  for (uint64_t seed = 0; seed < 150; ++seed) {
    auto g = generateRandomGraph(seed);
    ASSERT_TRUE(g.ok()) << "seed " << seed << ": " << g.error().message;
    for (const auto &n : g->model.graph->nodes()) {
      ++counts[n->op()];
      if (n->op() == OpKind::Conv && n->hasAttr("group")) {
        const int64_t c = n->input(0)->type().shape().dims[1].value();
        ++attrsSeen[n->getInt("group") == c ? "depthwise conv" : "grouped conv"];
      }
      if (n->op() == OpKind::Conv && n->hasAttr("dilations")) ++attrsSeen["dilated conv"];
    }
  }
  for (OpKind op : {OpKind::Relu,
                    OpKind::Sigmoid,
                    OpKind::Tanh,
                    OpKind::Exp,
                    OpKind::Abs,
                    OpKind::Neg,
                    OpKind::Sqrt,
                    OpKind::Erf,
                    OpKind::HardSigmoid,
                    OpKind::HardSwish,
                    OpKind::LeakyRelu,
                    OpKind::Clip,
                    OpKind::Softplus,
                    OpKind::Gelu,
                    OpKind::Add,
                    OpKind::Sub,
                    OpKind::Mul,
                    OpKind::Div,
                    OpKind::Max,
                    OpKind::Min,
                    OpKind::Where,
                    OpKind::Greater,
                    OpKind::PRelu,
                    OpKind::ReduceSum,
                    OpKind::ReduceMean,
                    OpKind::ReduceMax,
                    OpKind::Softmax,
                    OpKind::LogSoftmax,
                    OpKind::LayerNormalization,
                    OpKind::MatMul,
                    OpKind::Gemm,
                    OpKind::Conv,
                    OpKind::BatchNormalization,
                    OpKind::MaxPool,
                    OpKind::AveragePool,
                    OpKind::GlobalAveragePool,
                    OpKind::Reshape,
                    OpKind::Transpose,
                    OpKind::Slice,
                    OpKind::Concat,
                    OpKind::Flatten})
    EXPECT_GT(counts[op], 0) << opName(op) << " never generated";
  for (const char *what : {"depthwise conv", "grouped conv", "dilated conv"})
    EXPECT_GT(attrsSeen[what], 0) << what << " never generated";
}

} // namespace
} // namespace kiln
