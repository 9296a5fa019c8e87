// The Kernel IR verifier: what must hold of every kernel a pass or the
// lowering hands on, so that backends can generate code without checking
// again (STYLE.md: tests run it after every pass). It returns the first
// violation, naming the kernel and the instruction:
//   kernel 'k': %5 = add: operand %3 has type i64, expected f32
//
// Rules:
// 1. Names (kernel, buffers, params, vars) are identifiers that the text
//    form can tell apart from values and loop variables (isKernelIrName),
//    and buffers, params and vars share one namespace. Buffers and vars are
//    not of type string; nothing in a kernel is.
// 2. SSA: each result number is in [0, numValues) and defined once; an
//    operand is defined before its use, in the same loop or one enclosing
//    it (a value defined inside a loop is not visible after it). Effects
//    (store, write, loops) have no result.
// 3. Loops: each loop variable is in [0, numLoopVars) and defined once; it is
//    used only inside its loop; upper bounds use params only. At most one
//    loop is parallel, and only at the top level; when there is one, every
//    store is inside it (the executor runs the rest of the kernel once per
//    chunk). A vector loop contains no loops (it is innermost). Vector width
//    and unroll factor are >= 1; for and parallel loops have width 1, which
//    the text does not show.
// 4. Indices: params and buffers, vars and loop variables referred to exist.
// 5. Types: a load has its buffer's type, a store stores it; a dynamic
//    index (load/store only) is an i64 value visible there; `index` is i64
//    and its affine expression may use loop variables; an if's condition is
//    bool, and its body is a scope (like a loop's) nested one level deeper; read and write
//    have their var's type; stores go to output buffers only (output buffers
//    may also be loaded: a reduction reads what it wrote). Unary and binary
//    operands have the instruction's type; comparisons take operands of
//    castFrom and give bool; select's condition is bool and its other
//    operands have its type; a cast's operand has castFrom's type.
//    Integer constants fit their type (bool: 0 or 1; u64: any bits).
// 6. Opcodes by type class:
//      float only:          exp log sqrt rsqrt tanh sigmoid erf floor ceil
//                           round recip pow sin cos tan asin acos atan sinh
//                           cosh asinh acosh atanh
//      numeric (not bool):  neg abs add sub mul div max min, and the ordered
//                           comparisons lt le gt ge
//      numeric:             mod (the remainder of truncating division, as C's
//                           % and fmod: the sign of the dividend; ONNX's
//                           Python-style integer Mod is built from it).
//                           Integer div and mod never trap: a zero divisor
//                           gives 0, and MIN / -1 wraps to MIN (mod: 0).
//      integer or bool:     not and or xor (bitwise; logical on bool)
//      integer:             shl shr (a shift by the width or more gives 0;
//                           shr is arithmetic on signed types)
//      any type:            eq ne select cast const load store read write
#pragma once

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln {

// SSA numbers and loop variables are below this (the verifier and backends
// size tables by numValues; the parser rejects larger numbers).
inline constexpr int kMaxKernelNumbers = 1 << 24;

Status verifyKernel(const kir::Kernel &kernel);

} // namespace kiln
