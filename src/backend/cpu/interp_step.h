// The JIT path's fallback: runs one node with the interpreter's kernel (ops
// the CPU backend does not compile). Nodes with regions (Loop, Scan...) get
// an environment holding the outer values their regions read. Programs
// holding such a step cannot be stored in an artifact (program_io.h).
#pragma once

#include "interp/interpreter.h"
#include "ir/graph.h"
#include "runtime/cpu/program.h"

namespace kiln::cpu {

class InterpStep : public Step {
public:
  InterpStep(const Node &node, std::vector<int> inputSlots, std::vector<int> outputSlots,
             std::vector<std::pair<const Value *, int>> regionReads);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override;
  StepKind kind() const override { return StepKind::Interp; }

private:
  const Node &node_;
  std::vector<int> in_, out_;
  std::vector<std::pair<const Value *, int>> regionReads_;
};

} // namespace kiln::cpu
