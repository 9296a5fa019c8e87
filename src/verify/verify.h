// `kiln verify`: runs a model on the target (the CPU compiler, or the
// interpreter) and on a golden reference with the same inputs, compares every
// output, and with bisection compares every intermediate value both runs
// have to find the first node that diverges while its inputs still agree.
//
//   inputs ─▶ target (compiled with its intermediates as extra outputs)
//          └▶ reference (interp | interp-f64 | ort) ─stream─▶ compare per value
//                                                            ─▶ bisect ─▶ text, JSON, HTML
//
// The compiled side exposes its intermediates after the pass pipeline
// (cpu::CompileOptions::exposeIntermediates), so the per-layer check runs the
// code that ships, fusion included: a fused group is one layer, reported with
// the source nodes it holds.
#pragma once

#include "backend/cpu/compiler.h"
#include "verify/metrics.h"
#include "verify/reference.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln::verify {

struct VerifyOptions {
  std::string modelPath;      // for the ort reference and the report
  std::string target = "cpu"; // cpu | interp
  cpu::CompileOptions compile; // optLevel, cpu, perturbNode
  int threads = 0;             // the session's (0: physical cores)
  std::string reference = "interp"; // interp | interp-f64 | ort
  std::optional<double> rtol, atol; // override the per-dtype defaults of float values
  bool bisect = false;              // per-layer comparison when an output fails
  bool allLayers = false;           // per-layer comparison always
  OrtOptions ort;
};

// One value compared: a model output or an intermediate.
struct ValueResult {
  std::string name;
  std::string dtype; // of the target's value ("" when it is no tensor)
  Shape64 shape, refShape;
  Tolerance tol;
  Metrics metrics;
};

// One row of the per-layer table: a value a top-level node of the target's
// graph produces that the reference also has, in topological order.
struct Layer {
  std::string node;                     // the target graph's node name (a fused group's name)
  std::string op;                       // its op ("Fused(conv)" for a group)
  std::vector<std::string> sourceNodes; // the source-model nodes it computes
  ValueResult value;
  bool inputsAgree = true;                  // every compared input of the node passes
  std::vector<std::string> badInputs;       // compared inputs that fail
  std::vector<std::string> uncheckedInputs; // inputs the reference has no value for
};

struct BisectResult {
  bool ran = false;
  std::vector<Layer> layers;
  int firstDivergence = -1;  // index into layers, -1 when none
  int valuesNotCompared = 0; // target values without a reference counterpart
  std::string note;          // why it did not run, or what limits it
};

struct InputInfo {
  std::string name, dtype, source; // source: "random" or the file it came from
  Shape64 shape;
};

struct VerifyResult {
  std::string model, target, reference;
  uint64_t seed = 0;
  std::optional<double> rtol, atol; // the overrides given, if any
  std::vector<InputInfo> inputs;
  std::vector<ValueResult> outputs;
  BisectResult bisect;
  double targetMs = 0, referenceMs = 0; // compile + run, run
  bool pass = false;
};

// Tolerance of a value of `dtype` under the options' overrides.
Tolerance toleranceFor(DType dtype, const VerifyOptions &options);

// Runs both sides and compares. `targetModel` and `referenceModel` are two
// loads of the same model (the compiler consumes one). Errors are failures to
// run either side, not disagreements (those are in the result).
Expected<VerifyResult> verifyModel(Model targetModel, Model referenceModel,
                                   std::vector<RtValue> inputs, const VerifyOptions &options);

// The per-layer analysis over a target graph (see Layer); `compared` holds
// the metrics of every intermediate both sides had, by value name.
BisectResult bisect(const Graph &targetGraph,
                    const std::unordered_map<std::string, ValueResult> &compared);

} // namespace kiln::verify
