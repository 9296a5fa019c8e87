// `kiln bench MODEL`: times a model's runs on one target. Loads the model
// (import time and compile time reported apart), prepares inputs once, runs
// warm-up runs, then timed runs, and prints median/min/mean/p90 latency.
// bench/compare_ort.py drives it side by side with ONNX Runtime.
#include "cli.h"
#include "commands.h"
#include "artifact_engine.h"
#include "engine.h"
#include "inputs.h"
#include "support/json.h"


#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace kiln::cli {

namespace {

const char *kHelp = R"(usage: kiln bench MODEL [options]

Times runs of MODEL (.onnx or .kir). Loads it (import and compile times are
reported apart), prepares the inputs once, does W warm-up runs, then R timed
runs, and prints the median, min, mean and p90 latency in milliseconds. Only
the run itself is timed: copying the prepared inputs for each run is not.
Inputs not given are filled with seeded random values, as in `kiln run`.

options:
  --runs R                timed runs (default 10, at least 1)
  --warmup W              untimed warm-up runs before them (default 2)
  --input NAME=FILE.npy   use this tensor for input NAME (repeatable)
  --dim NAME=VALUE        size of symbolic dim NAME (default 1; repeatable)
  --seed N                seed for random inputs (default 0)
  --profile               cpu target: print the time of each step (slowest first)
  --json                  print one JSON object instead of text:
                          {"model", "target", "threads", "runs", "warmup",
                           "import_ms", "compile_ms", "median_ms", "min_ms",
                           "mean_ms", "p90_ms"}

p90 is the nearest-rank 90th percentile of the timed runs.
)";

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Expected<long long> parseCount(const std::optional<std::string> &text, const char *flag,
                               long long def, long long minimum) {
  if (!text) return def;
  char *end = nullptr;
  long long v = std::strtoll(text->c_str(), &end, 10);
  if (text->empty() || *end || v < minimum)
    return makeError("--", flag, ": '", *text, "' is not an integer >= ", minimum);
  return v;
}

std::string fixed3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

} // namespace

int benchCommand(const std::vector<std::string> &argv) {
  std::vector<std::string> flags = {"input", "dim", "seed", "runs", "warmup"};
  flags.insert(flags.end(), kTargetFlags.begin(), kTargetFlags.end());
  auto args = Args::parse(argv, flags, {"help", "json", "profile"});
  if (!args.ok()) return fail("bench", args.error());
  if (args->flag("help")) {
    std::cout << kHelp << kTargetHelp;
    return 0;
  }
  if (args->positional().size() != 1) return fail("bench", Error{"expects one MODEL argument"});
  const std::string &path = args->positional()[0];
  // Benchmarks default to one thread (comparable runs); --threads overrides.
  auto targetOptions = targetOptionsFrom(*args, 1);
  if (!targetOptions.ok()) return fail("bench", targetOptions.error());
  const std::string target = targetOptions->target;
  const long long threadCount = targetOptions->threads;
  const long long *threads = &threadCount;
  auto runs = parseCount(args->value("runs"), "runs", 10, 1);
  if (!runs.ok()) return fail("bench", runs.error());
  auto warmup = parseCount(args->value("warmup"), "warmup", 2, 0);
  if (!warmup.ok()) return fail("bench", warmup.error());
  auto spec = inputSpecFrom(*args);
  if (!spec.ok()) return fail("bench", spec.error());

  // Import: file -> verified IR.
  // For an artifact, "import" is loading it and there is no compile step.
  auto t0 = Clock::now();
  const bool artifact = isArtifactFile(path);
  Expected<Model> model = artifact ? Expected<Model>(Model{}) : loadModel(path);
  if (!model.ok()) return fail("bench", model.error());
  Expected<std::unique_ptr<Engine>> engine = makeError("not built");
  if (artifact) engine = openArtifactEngine(path, targetOptions->threads);
  double importMs = msSince(t0);
  if (artifact && !engine.ok()) return fail("bench", engine.error());
  auto inputs = prepareInputs(artifact ? (*engine)->graph() : *model->graph, *spec);
  if (!inputs.ok()) return fail("bench", inputs.error());

  // Compile: whatever the target does before the first run (passes,
  // lowering, code generation and linking for cpu; nothing for interp).
  t0 = Clock::now();
  if (!artifact) engine = makeEngine(std::move(*model), *targetOptions);
  if (!engine.ok()) return fail("bench", engine.error());
  double compileMs = msSince(t0);

  auto runOnce = [&](double *ms) -> Status {
    std::vector<RtValue> copy = *inputs; // not timed
    auto start = Clock::now();
    auto outputs = (*engine)->run(std::move(copy));
    if (ms) *ms = msSince(start);
    if (!outputs.ok()) return outputs.error();
    return Status();
  };
  for (long long i = 0; i < *warmup; ++i)
    if (Status s = runOnce(nullptr); !s.ok()) return fail("bench", s.error());
  if (args->flag("profile")) (*engine)->setProfiling(true);
  std::vector<double> times;
  for (long long i = 0; i < *runs; ++i) {
    double ms = 0;
    if (Status s = runOnce(&ms); !s.ok()) return fail("bench", s.error());
    times.push_back(ms);
  }

  std::sort(times.begin(), times.end());
  size_t n = times.size();
  double median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  double mean = 0;
  for (double t : times) mean += t;
  mean /= static_cast<double>(n);
  size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n)));
  double p90 = times[std::max<size_t>(rank, 1) - 1];

  if (args->flag("json")) {
    std::cout << "{\"model\": " << jsonString(path) << ", \"target\": " << jsonString(target)
              << ", \"threads\": " << *threads << ", \"runs\": " << *runs
              << ", \"warmup\": " << *warmup << ", \"import_ms\": " << fixed3(importMs)
              << ", \"compile_ms\": " << fixed3(compileMs) << ", \"median_ms\": " << fixed3(median)
              << ", \"min_ms\": " << fixed3(times.front()) << ", \"mean_ms\": " << fixed3(mean)
              << ", \"p90_ms\": " << fixed3(p90) << "}\n";
    return 0;
  }
  std::cout << "model    " << path << "\n"
            << "target   " << target << " (threads " << *threads
            << (target == "interp" ? ", ignored: single-threaded" : "") << ")\n"
            << "import   " << fixed3(importMs) << " ms\n"
            << "compile  " << fixed3(compileMs) << " ms\n"
            << "runs     " << *runs << " timed after " << *warmup << " warm-up\n"
            << "latency  median " << fixed3(median) << " ms, min " << fixed3(times.front())
            << " ms, mean " << fixed3(mean) << " ms, p90 " << fixed3(p90) << " ms\n";
  if (std::string summary = (*engine)->summary(); !summary.empty())
    std::cout << "program  " << summary << "\n";
  if (args->flag("profile"))
    std::cout << "profile (total over the timed runs, slowest first):\n"
              << (*engine)->profileReport();
  return 0;
}

} // namespace kiln::cli
