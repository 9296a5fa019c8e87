// Graph passes: the Pass interface, the registry of named passes and the
// pipeline driver. A pass's name is its registry key, its `kiln opt --passes`
// flag and its tag in dumps (DESIGN.md principle 3). The driver runs the
// verifier after every pass, so a pass that breaks the IR is caught at once
// and reported by name.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Pass {
public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // Rewrites the model in place; returns whether anything changed. On error
  // the model may be partly rewritten and should be dropped.
  virtual Expected<bool> run(Model &model) = 0;
};

// A new instance of the pass with this name, or null when there is none.
std::unique_ptr<Pass> findPass(std::string_view name);
// Every registered name, in registry order.
std::vector<std::string> allPassNames();
// Whether the decompose pass (passes/decompose.cpp, run at every level)
// rewrites nodes of `op` into other ops, so backends never see it.
bool decomposes(OpKind op);

struct PipelineOptions {
  // Pass names after which the model is printed to `out`; "all" means every
  // pass.
  std::set<std::string> printAfter;
  // When not empty, the model is written to DIR/NN-<pass>.kir after each pass
  // (NN counts from 01); the directory is created if needed.
  std::string dumpDir;
  // Where --print-after output goes; null means nowhere.
  std::ostream *out = nullptr;
};

// Runs the named passes in order, verifying after each. Unknown names are
// reported before anything runs, with the list of registered passes.
Status runPipeline(Model &model, const std::vector<std::string> &names,
                   const PipelineOptions &options = {});

} // namespace kiln
