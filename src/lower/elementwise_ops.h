// The scalar meaning of each elementwise Graph op, written as Kernel IR
// instructions. One function per question: can this node be lowered, and
// what does it compute from its operands' scalar values. The fusion passes
// ask the first question, the elementwise lowering the second, so the two
// cannot disagree.
#pragma once

#include "ir/graph.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

#include <vector>

namespace kiln::lower {

// Element types the elementwise lowering computes in (f16/bf16 and strings
// are not among them yet).
bool isLowerableDType(DType t);

// True when `node` is an elementwise op with a scalar expansion here, with
// tensor inputs and output of lowerable dtypes. Broadcasting is checked by
// the group lowering, not here.
bool canLowerElementwise(const Node &node);

// Emits the scalar computation of `node` given the SSA values of its
// present inputs (absent optional inputs are -1) and returns the result's
// SSA value.
Expected<int> emitElementwise(kir::KernelBuilder &b, const Node &node,
                              const std::vector<int> &operands);

} // namespace kiln::lower
