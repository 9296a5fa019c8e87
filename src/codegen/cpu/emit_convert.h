// Conversions between the 16-bit float storage types (f16, bf16) and f32 as
// straight-line integer LLVM IR, for scalars and vectors alike. The Kernel
// IR computes on 16-bit floats in f32 (kernel_ir.h): values are widened
// when loaded and rounded (to nearest even, as support/half.h and ONNX
// Runtime do) when stored or cast. Where the caller says so (`nativeHalf`:
// F16C for rounding to f16; widening only where the target also computes on
// halfs, emit_llvm.cpp says why) the hardware instruction converts instead;
// bfloat16 always takes the integer path, which is a shift and an add.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln::codegen {

// i16 bits (or a vector of them) -> f32.
llvm::Value *emitHalfToFloat(llvm::IRBuilder<> &b, llvm::Value *bits, bool nativeHalf);
llvm::Value *emitBFloatToFloat(llvm::IRBuilder<> &b, llvm::Value *bits);
// f32 -> i16 bits, rounded to nearest even; NaN stays NaN, overflow is inf.
llvm::Value *emitFloatToHalf(llvm::IRBuilder<> &b, llvm::Value *f, bool nativeHalf);
llvm::Value *emitFloatToBFloat(llvm::IRBuilder<> &b, llvm::Value *f);

// F16C widening that the optimizer cannot narrow. fpext from half is what
// the hardware converts, but InstCombine then narrows f32 work on the
// widened value (a compare with 0, a select) into half vector operations,
// which the backend scalarizes on CPUs without AVX512-FP16. So a scalar i16
// is widened by a call of an opaque placeholder whose vector variants are
// declared (the VFABI attribute), which LLVM's loop vectorizer widens like
// a vector library call; after the optimization pipeline,
// lowerHalfToFloatPlaceholders replaces every call (scalar or vector) by
// the fpext, which codegen turns into vcvtph2ps.
llvm::Value *emitHalfToFloatPlaceholder(llvm::IRBuilder<> &b, llvm::Module &m, llvm::Value *bits);
void lowerHalfToFloatPlaceholders(llvm::Module &m);

} // namespace kiln::codegen
