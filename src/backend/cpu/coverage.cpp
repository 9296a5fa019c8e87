#include "backend/cpu/coverage.h"

#include "backend/cpu/compiler.h"
#include "lower/ops.h"
#include "passes/pass.h"
#include "runtime/cpu/host_op_step.h"

namespace kiln::cpu {

const char *wayName(Way way) {
  switch (way) {
  case Way::KernelIr: return "kernel-ir";
  case Way::Microkernel: return "microkernel";
  case Way::View: return "view";
  case Way::HostOp: return "host-op";
  case Way::Decomposed: return "decomposed";
  case Way::SubProgram: return "sub-program";
  case Way::Constant: return "constant";
  }
  return "?";
}

std::vector<Way> cpuWaysOf(OpKind op) {
  std::vector<Way> ways;
  if (op == OpKind::Constant) ways.push_back(Way::Constant);
  if (decomposes(op)) ways.push_back(Way::Decomposed);
  if (op == OpKind::If || op == OpKind::Loop || op == OpKind::Scan || op == OpKind::SequenceMap)
    ways.push_back(Way::SubProgram);
  if (hasMicrokernelStep(op)) ways.push_back(Way::Microkernel);
  if (lower::kernelLoweringOf(op)) ways.push_back(Way::KernelIr);
  // Reshape and its kin run as host ops whose result shares the input's
  // buffer (Tensor::reshaped): no bytes move.
  const bool view = op == OpKind::Reshape || op == OpKind::Flatten || op == OpKind::Squeeze ||
                    op == OpKind::Unsqueeze;
  if (view) ways.push_back(Way::View);
  else if (HostOpStep::covers(op)) ways.push_back(Way::HostOp);
  return ways;
}

} // namespace kiln::cpu
