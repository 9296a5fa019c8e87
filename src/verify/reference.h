// The golden references `kiln verify` compares against: kiln's interpreter
// (optionally accumulating in float64) and ONNX Runtime, driven through the
// node bridge scripts/ort/ort_run.js (.npy files in and out; no C headers of
// ORT exist on Debian 12).
//
// Both stream the intermediate values a caller asks for to a sink as they
// become available, so a per-layer comparison holds one reference tensor at
// a time rather than the whole model's activations.
#pragma once

#include "ir/graph.h"
#include "support/status.h"
#include "support/value.h"

#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiln::verify {

// Receives an intermediate value of the reference by (ONNX) name.
using ValueSink = std::function<void(const std::string &name, const RtValue &value)>;

// Runs `graph` in the interpreter; every value produced by a top-level node
// whose name is in `wanted` goes to `sink` right after its node runs.
// Returns the graph's outputs.
Expected<std::vector<RtValue>> runInterpreter(const Graph &graph, std::vector<RtValue> inputs,
                                              bool accumulateF64,
                                              const std::unordered_set<std::string> &wanted,
                                              const ValueSink &sink);

struct OrtOptions {
  std::string script; // ort_run.js; empty: findOrtScript()
  std::string node = "node";
  int threads = 0;     // 0: ORT's default
  std::string workDir; // scratch folder for .npy files and the rewritten model (must exist)
};

// ort_run.js: $KILN_ORT_RUN, else scripts/ort/ort_run.js next to the running
// kiln's source tree (found from the executable's path, then from the source
// directory it was built from), preferring one whose onnxruntime-node is
// installed. Error when none exists.
Expected<std::string> findOrtScript();

// Runs the ONNX model at `modelPath` in ONNX Runtime on `inputs` (in the
// order of `graph`'s inputs, which must be the imported form of that model).
// Values named in `extraOutputs` that a top-level ONNX node produces are
// appended to the model's outputs (in a rewritten copy in workDir) and go to
// `sink`; names the model does not produce are skipped. Returns the model's
// own outputs.
Expected<std::vector<RtValue>> runOrt(const std::string &modelPath, const Graph &graph,
                                      const std::vector<RtValue> &inputs,
                                      const std::vector<std::string> &extraOutputs,
                                      const OrtOptions &options, const ValueSink &sink);

} // namespace kiln::verify
