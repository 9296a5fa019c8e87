// The interface between the interpreter and its kernels. A kernel reads the
// node's attributes and its input values and produces every output; it checks
// what the verifier could not (run-time shapes and values) and reports
// failures as errors naming the node.
//
// Each op family registers its kernels in its own file (kernels/*.cpp) through
// a register*Kernels(KernelTable&) function listed in kernel_registry.cpp.
#pragma once

#include "support/value.h"
#include "ir/graph.h"
#include "support/status.h"

#include <array>
#include <string>
#include <vector>

namespace kiln {

class Interpreter;
class Environment;

struct InterpOptions {
  // Accumulate reductions, matmuls and convolutions in float64 (the strictest
  // oracle, used by `kiln verify --reference interp-f64`).
  bool accumulateF64 = false;
  // Seed for random ops (RandomUniformLike etc.).
  uint64_t seed = 0;
};

class KernelContext {
public:
  KernelContext(const Node &node, std::vector<const RtValue *> inputs, Interpreter &interp,
                const InterpOptions &options, const Environment &env)
      : node_(node), inputs_(std::move(inputs)), interp_(interp), options_(options), env_(env),
        outputs_(node.numOutputs()) {}

  const Node &node() const { return node_; }
  const InterpOptions &options() const { return options_; }
  Interpreter &interpreter() { return interp_; }
  // The scope the node runs in; regions run by control-flow kernels resolve
  // outer-scope values through it.
  const Environment &environment() const { return env_; }

  int numInputs() const { return static_cast<int>(inputs_.size()); }
  // True when input i is present (not an omitted optional input).
  bool has(int i) const { return i < numInputs() && inputs_[i] != nullptr; }
  const RtValue &value(int i) const { return *inputs_[i]; }
  // Input i as a tensor (the caller has checked has(i); non-tensor values are
  // rejected by the interpreter before kernels that want tensors run).
  const Tensor &in(int i) const { return inputs_[i]->tensor; }

  int numOutputs() const { return static_cast<int>(outputs_.size()); }
  void setOutput(int i, RtValue v) { outputs_[i] = std::move(v); }
  void setOutput(int i, Tensor t) { outputs_[i] = RtValue(std::move(t)); }
  std::vector<RtValue> takeOutputs() { return std::move(outputs_); }

  // An error that names the node: "node 'x' (Conv): <message>".
  template <class... Args> Error error(const Args &...args) const {
    return makeError(node_.describe(), ": ", args...);
  }

private:
  const Node &node_;
  std::vector<const RtValue *> inputs_;
  Interpreter &interp_;
  const InterpOptions &options_;
  const Environment &env_;
  std::vector<RtValue> outputs_;
};

using KernelFn = Status (*)(KernelContext &);

class KernelTable {
public:
  void add(OpKind op, KernelFn fn) { fns_[static_cast<size_t>(op)] = fn; }
  KernelFn find(OpKind op) const { return fns_[static_cast<size_t>(op)]; }

private:
  std::array<KernelFn, static_cast<size_t>(OpKind::NumOps)> fns_{};
};

// The table with every family registered (built once).
const KernelTable &kernelTable();

} // namespace kiln
