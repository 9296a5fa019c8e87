// How the CPU target compiles each op of the op table (`kiln ops`, and the
// test that no inference op is left out). Read off the compiler's own
// tables — the Kernel IR lowering registry, the microkernel steps, the host
// ops, the decompose pass, the sub-program steps — so the listing says what
// the compiler does, not what someone wrote down.
#pragma once

#include "ir/op.h"

#include <string>
#include <vector>

namespace kiln::cpu {

enum class Way : uint8_t {
  KernelIr,    // a dispatch of its Kernel IR lowering (lower/ops.h)
  Microkernel, // a handwritten microkernel step for its common forms
  View,        // a zero-copy view of its input (the runtime works out the shape)
  HostOp,      // a host op of the runtime library
  Decomposed,  // rewritten into other ops by the decompose pass
  SubProgram,  // control flow running compiled bodies (If, Loop, Scan...)
  Constant,    // a value in the program, no step
};

const char *wayName(Way way);

// The ways `op` compiles for the CPU, fastest first; empty when it does not.
std::vector<Way> cpuWaysOf(OpKind op);

} // namespace kiln::cpu
