// The shared check of every Kernel IR lowering (ggml's test-backend-ops in
// spirit): a small model in IR text is compiled to a `.kiln` artifact in
// memory, loaded by the runtime library and run; each output must match the
// reference interpreter's on the same inputs (integers and bools exactly,
// floats within atol + rtol * |want|). Going through the artifact proves
// the node compiled: a program that needs the interpreter cannot be saved.
#pragma once

#include "support/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::testing {

// Seeded random values: floats uniform in [lo, hi), integers uniform in
// [lo, hi) (truncated), bools with probability 1/2.
Tensor randomTensor(DType dtype, const Shape64 &shape, uint64_t seed, double lo = -2,
                    double hi = 2);

struct OpCheckOptions {
  double rtol = 1e-5, atol = 1e-6;
  int optLevel = 3;
  int threads = 1;
  // false: Slice, Concat, Split and Transpose run their Kernel IR lowering
  // (the general variant) instead of their memcpy copy steps.
  bool specializedSteps = true; // false: general variants only (CompileOptions)
};

// Runs the check with gtest assertions; `model` is IR text (a kiln.model
// with one graph), `inputs` are in graph-input order.
void expectArtifactMatchesInterpreter(const std::string &model, const std::vector<Tensor> &inputs,
                                      const OpCheckOptions &options = {});

// The compile error of `model` through the artifact path ("" when it
// compiles).
std::string artifactCompileError(const std::string &model);

// The run-time error of `model` through the artifact on `inputs` ("" when
// it runs); a model that does not compile fails the test.
std::string artifactRunError(const std::string &model, const std::vector<Tensor> &inputs);

} // namespace kiln::testing
