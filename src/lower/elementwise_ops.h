// The scalar meaning of each elementwise Graph op, written as Kernel IR
// instructions. One function per question: can this node be lowered, and
// what does it compute from its operands' scalar values. The fusion passes
// ask the first question, the elementwise lowerings the second, so the two
// cannot disagree.
//
// The semantics are the interpreter's (interp/kernels/unary.cpp, binary.cpp,
// elementwise.cpp, cast.cpp): integers wrap, integer division truncates,
// f16/bf16 compute in f32 and round once per op, composite activations
// (softplus, mish, celu...) compute in the op's compute type and round once.
#pragma once

#include "ir/graph.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

#include <functional>
#include <string>
#include <vector>

namespace kiln::lower {

// Element types the elementwise lowerings compute in: every numeric type,
// bool, and the 16-bit floats (computed in f32); not strings.
bool isLowerableDType(DType t);

// Whether `op` is an elementwise op (one output element from the operands'
// elements at the same broadcast position).
bool isElementwiseOp(OpKind op);

// Whether emitElementwise covers `node`'s op on its input dtypes (an error
// naming the form when it does not). Broadcasting is the lowering's
// business, not checked here.
Status checkElementwiseForm(const Node &node);

// The run-time errors `node`'s scalar math may raise, by message (integer
// division by zero, ...); most nodes raise none. A lowering that passes a
// RaiseFn declares their status codes before its kernels.
std::vector<std::string> elementwiseErrors(const Node &node);

// True when `node` is an elementwise op with a scalar expansion here that
// needs no run-time error (so it can sit in any fused loop), with tensor
// inputs and one tensor output of lowerable dtypes.
bool canLowerElementwise(const Node &node);

// Reports a run-time error where the bool SSA value `cond` holds; the
// message is one of elementwiseErrors(node).
using RaiseFn = std::function<void(int cond, const std::string &message)>;

// Emits the scalar computation of `node` given the SSA values of its inputs
// (one per input slot; absent optional inputs are -1) and returns the
// result's SSA value. Nodes with elementwiseErrors need `raise`.
Expected<int> emitElementwise(kir::KernelBuilder &b, const Node &node,
                              const std::vector<int> &operands, const RaiseFn &raise = {});

} // namespace kiln::lower
