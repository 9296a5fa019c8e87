// The host-side half of a dispatch: a straight-line program over the input
// shapes (and small input values) of one step that computes, on every run,
// the output shapes, the scratch sizes and the size parameters of the
// step's kernels. The compiler writes it next to the Kernel IR it lowers
// (lower/dispatch.h); the runtime only evaluates it, so the per-op shape
// logic lives in one place (the lowering) and every device inherits it.
//
// Values are numbered in order: instruction i defines value i, and operands
// refer to earlier values only. A value is an int64, or a double for the
// float instructions (stored as its bits), so data-dependent shapes such as
// Range's element count or Resize's scales are exact where the spec says.
//
// Checks are values that must be non-zero; a failed check is a run-time
// error whose message names the step and the values it prints ("{}" in the
// message is replaced by each argument in turn).
#pragma once

#include "support/status.h"
#include "support/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

struct ShapeProgram {
  enum class Op : uint8_t {
    Const,   // imm (int64)
    ConstF,  // imm holds the bits of a double
    Dim,     // dim `b` of input `a` (a static axis)
    Numel,   // element count of input `a`
    Present, // 1 when optional input `a` is given, else 0
    Elem,    // element (value b) of input `a` as int64 (floats truncate)
    ElemF,   // element (value b) of input `a` as double
    // Integer arithmetic on values a, b (c for Select).
    Add, Sub, Mul,
    FloorDiv, // floor(a / b); b == 0 is an error
    FloorMod, // a - b * floor(a / b), the sign of b; b == 0 is an error
    Min, Max, Lt, Le, Eq, Ne, And, Or, Not,
    Select, // a ? b : c
    // Float arithmetic (values are doubles) and conversions.
    FAdd, FSub, FMul, FDiv, FFloor, FCeil,
    FLt,   // int: a < b on doubles
    ToF,   // int64 -> double
    ToI,   // double -> int64, truncating (NaN and out-of-range are errors)
    // Inputs of a rank the graph does not know (lowerings pad them to a
    // fixed rank with leading 1s, as broadcasting does).
    Rank,       // the rank of input `a`
    DimFromEnd, // dim `b` counted from the last of input `a` (0: the last); 1 past its rank
    Count,
  };
  struct Inst {
    Op op = Op::Const;
    int32_t a = -1, b = -1, c = -1;
    int64_t imm = 0;
    template <class A> void io(A &ar) { ar(op, a, b, c, imm); }
  };
  struct Check {
    int value = -1;
    std::string message; // "{}" takes the next argument
    std::vector<int> args;
    template <class A> void io(A &ar) { ar(value, message, args); }
  };

  std::vector<Inst> insts;
  std::vector<Check> checks;

  template <class A> void io(A &ar) { ar(insts, checks); }

  // Every operand refers to an earlier value, every input index is below
  // `numInputs`, every opcode is known (a loaded program may be corrupt).
  Status validate(size_t numInputs) const;
  // Evaluates the program on the step's inputs (null: an absent optional
  // input) into `values`; the checks run last. Errors are messages about
  // the values, which the step prefixes with its label.
  Status run(const std::vector<const Tensor *> &inputs, std::vector<int64_t> &values) const;
};

} // namespace kiln::runtime
