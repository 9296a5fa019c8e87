// A seeded generator of small random models for differential testing: the
// same seed always gives the same graph, weights and inputs (std::mt19937_64
// and hand-rolled distributions, so the result does not depend on the
// standard library's distribution code).
//
// A graph starts from one f32 input (rank 1-4, dims drawn from
// {1,2,3,5,7,8,16,17,31,64}, so 1s and odd sizes are common), sometimes a
// second input that broadcasts against it, and appends 3-12 random ops, each
// reading values made before it: unary and broadcasting binary elementwise
// ops, reductions, softmax, layer norm, MatMul/Gemm, Conv (with batch norm,
// activation and residual epilogues), pooling, Reshape, Transpose, Slice,
// Concat and Flatten. Every op is chosen so that the graph is valid and its
// values stay in a sane range (Exp reads bounded values, Div divides by
// |y|+1, weights are scaled by 1/sqrt(fan-in)). Some graphs still amplify
// rounding (a layer norm of nearly constant rows); the perturbed twins of
// RandomGraphOptions::perturbation let a test measure by how much. The
// outputs are the last value, up to two intermediates (so fusion has to keep
// values that are used twice) and, rarely, an input passed through.
#pragma once

#include "support/value.h"
#include "ir/graph.h"
#include "support/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::testing {

struct RandomGraphOptions {
  int minOps = 3, maxOps = 12; // random ops appended (one op may emit a few nodes)
  int64_t maxInputElements = 2048;
  int64_t maxValueElements = 8192; // ops whose output would be larger are not picked
  // When > 0: the same graph, except that every f32 value (the inputs and
  // each op's output) is multiplied by 1+d, d uniform in [-perturbation,
  // perturbation] per element (drawn from perturbationSeed, so the weights
  // and inputs stay those of the seed). Running such twins shows how much an
  // output moves when values round differently: its sensitivity to
  // legitimate differences between implementations.
  double perturbation = 0;
  uint64_t perturbationSeed = 0;
};

struct RandomGraph {
  Model model;
  std::vector<RtValue> inputs; // f32 tensors in graph-input order
  // One entry per random op appended, e.g. "Conv+BatchNormalization+Relu".
  std::vector<std::string> ops;
};

// Random f32 tensors for a graph's inputs (uniform or normal, never 0);
// variant 0 is RandomGraph::inputs, others give fresh data of the same shapes.
std::vector<RtValue> randomInputs(const Graph &graph, uint64_t seed, uint64_t variant);

// Builds the graph of `seed`. An error means the generator made a graph that
// shape inference or the verifier rejects: a bug in the generator.
Expected<RandomGraph> generateRandomGraph(uint64_t seed, const RandomGraphOptions &options = {});

} // namespace kiln::testing
