// Inline expansions of transcendental functions as straight-line LLVM IR
// (no calls), so that loops using them vectorize. Accuracy: a few ulp over
// the ranges that matter, exact at the saturation points (exp overflows to
// +inf and underflows to 0, sigmoid(-100) = 0, tanh(±20) = ±1) and NaN in,
// NaN out. Works on scalars and vectors alike.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln::codegen {

llvm::Value *emitExp(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emitSigmoid(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emitTanh(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emitErf(llvm::IRBuilder<> &b, llvm::Value *x);

} // namespace kiln::codegen
