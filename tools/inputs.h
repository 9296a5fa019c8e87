// Building a model's inputs for a run: tensors read from .npy files where the
// user named them, seeded random values elsewhere, with symbolic dims taken
// from --dim (default 1). Shared by `kiln run` and (later) `kiln verify`.
#pragma once

#include "support/value.h"
#include "ir/graph.h"
#include "support/status.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::cli {

struct InputSpec {
  std::map<std::string, std::string> files; // input name -> .npy path
  std::map<std::string, int64_t> dims;      // symbol -> size
  uint64_t seed = 0;
};

class Args;

// The --input NAME=FILE, --dim NAME=VALUE and --seed N flags of a command.
Expected<InputSpec> inputSpecFrom(const Args &args);

// Inputs in graph-input order. Errors name the input: unknown names in
// `files`, a file whose dtype or shape does not fit the declared type.
Expected<std::vector<RtValue>> prepareInputs(const Graph &graph, const InputSpec &spec);

// Seeded random tensor of a dtype: floats uniform in [-1, 1), integers in
// [0, 10), bools fair coin flips, strings empty.
Tensor randomTensor(DType dtype, const Shape64 &shape, uint64_t seed);

// "min=.. max=.. mean=.. [first values]" for printing.
std::string summarize(const Tensor &t);

} // namespace kiln::cli
