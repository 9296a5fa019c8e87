// Short spellings of Kernel IR expressions for the lowerings whose kernels
// compute coordinates, weights and gate values inline (sampling, signal
// and recurrent ops): each call appends one instruction to the kernel
// being built and returns its SSA value, so a formula reads close to the
// interpreter's C++ it must match, e.g. e.add(F64, e.mul(F64, x, s), half).
#pragma once

#include "kernel/kernel_ir.h"

#include <cstdint>

namespace kiln::lower {

struct KExpr {
  kir::KernelBuilder &b;

  // ---- constants and indices ----
  int f(DType t, double v) { return b.constant(t, v); }
  int i64(int64_t v) { return b.intConstant(DType::I64, v); }
  int boolean(bool v) { return b.intConstant(DType::Bool, v ? 1 : 0); }
  // The value of loop variable `loopVar` (i64).
  int var(int loopVar) { return b.index(kir::Affine{}.add(1, -1, loopVar)); }

  // ---- arithmetic (operands and result of type t) ----
  int add(DType t, int x, int y) { return b.binary(kir::Opcode::Add, t, x, y); }
  int sub(DType t, int x, int y) { return b.binary(kir::Opcode::Sub, t, x, y); }
  int mul(DType t, int x, int y) { return b.binary(kir::Opcode::Mul, t, x, y); }
  int div(DType t, int x, int y) { return b.binary(kir::Opcode::Div, t, x, y); }
  int mod(DType t, int x, int y) { return b.binary(kir::Opcode::Mod, t, x, y); }
  int neg(DType t, int x) { return b.unary(kir::Opcode::Neg, t, x); }
  int un(kir::Opcode op, DType t, int x) { return b.unary(op, t, x); }
  // min / max as std::min / std::max write them (the first operand wins a
  // tie or a NaN comparison), so results match the interpreter bit for bit.
  int min(DType t, int x, int y) { return sel(t, lt(t, y, x), y, x); }
  int max(DType t, int x, int y) { return sel(t, lt(t, x, y), y, x); }
  // std::clamp(v, lo, hi).
  int clamp(DType t, int v, int lo, int hi) {
    return sel(t, lt(t, v, lo), lo, sel(t, lt(t, hi, v), hi, v));
  }

  // ---- comparisons and logic (bool results) ----
  int lt(DType t, int x, int y) { return b.compare(kir::Opcode::Lt, t, x, y); }
  int le(DType t, int x, int y) { return b.compare(kir::Opcode::Le, t, x, y); }
  int gt(DType t, int x, int y) { return b.compare(kir::Opcode::Gt, t, x, y); }
  int ge(DType t, int x, int y) { return b.compare(kir::Opcode::Ge, t, x, y); }
  int eq(DType t, int x, int y) { return b.compare(kir::Opcode::Eq, t, x, y); }
  int ne(DType t, int x, int y) { return b.compare(kir::Opcode::Ne, t, x, y); }
  int land(int x, int y) { return b.binary(kir::Opcode::And, DType::Bool, x, y); }
  int lor(int x, int y) { return b.binary(kir::Opcode::Or, DType::Bool, x, y); }
  int lnot(int x) { return b.unary(kir::Opcode::Not, DType::Bool, x); }
  int sel(DType t, int cond, int x, int y) { return b.select(t, cond, x, y); }

  // A conversion, nothing when the types agree.
  int cast(DType to, DType from, int v) { return to == from ? v : b.cast(to, from, v); }
};

} // namespace kiln::lower
