#include "codegen/cpu/emit_convert.h"

namespace kiln::codegen {

namespace {

// The type `scalar` with the shape (scalar or vector) of `like`.
llvm::Type *shaped(llvm::Type *scalar, llvm::Value *like) {
  if (auto *v = llvm::dyn_cast<llvm::VectorType>(like->getType()))
    return llvm::VectorType::get(scalar, v->getElementCount());
  return scalar;
}

llvm::Constant *splat(llvm::Type *t, uint64_t v) { return llvm::ConstantInt::get(t, v); }

} // namespace

llvm::Value *emitHalfToFloat(llvm::IRBuilder<> &b, llvm::Value *bits, bool nativeHalf) {
  llvm::Type *f32 = shaped(b.getFloatTy(), bits);
  if (nativeHalf) return b.CreateFPExt(b.CreateBitCast(bits, shaped(b.getHalfTy(), bits)), f32);
  // Rebias the exponent of normal numbers (+112), keep inf/nan's all-ones
  // exponent, and build subnormals as mant * 2^-24 exactly in float.
  llvm::Type *i32 = shaped(b.getInt32Ty(), bits);
  llvm::Value *h = b.CreateZExt(bits, i32);
  llvm::Value *sign = b.CreateShl(b.CreateAnd(h, splat(i32, 0x8000)), splat(i32, 16));
  llvm::Value *exp = b.CreateAnd(b.CreateLShr(h, splat(i32, 10)), splat(i32, 0x1f));
  llvm::Value *mant = b.CreateAnd(h, splat(i32, 0x3ff));
  llvm::Value *normal =
      b.CreateOr(b.CreateShl(b.CreateAdd(exp, splat(i32, 112)), splat(i32, 23)),
                 b.CreateShl(mant, splat(i32, 13)));
  llvm::Value *special = b.CreateOr(splat(i32, 0x7f800000), b.CreateShl(mant, splat(i32, 13)));
  llvm::Value *sub = b.CreateBitCast(
      b.CreateFMul(b.CreateUIToFP(mant, f32), llvm::ConstantFP::get(f32, 1.0 / 16777216.0)), i32);
  llvm::Value *isSpecial = b.CreateICmpEQ(exp, splat(i32, 0x1f));
  llvm::Value *isSub = b.CreateICmpEQ(exp, splat(i32, 0));
  llvm::Value *mag = b.CreateSelect(isSpecial, special, b.CreateSelect(isSub, sub, normal));
  return b.CreateBitCast(b.CreateOr(sign, mag), f32);
}

llvm::Value *emitBFloatToFloat(llvm::IRBuilder<> &b, llvm::Value *bits) {
  llvm::Type *i32 = shaped(b.getInt32Ty(), bits);
  return b.CreateBitCast(b.CreateShl(b.CreateZExt(bits, i32), splat(i32, 16)),
                         shaped(b.getFloatTy(), bits));
}

llvm::Value *emitFloatToHalf(llvm::IRBuilder<> &b, llvm::Value *f, bool nativeHalf) {
  llvm::Type *i16 = shaped(b.getInt16Ty(), f);
  if (nativeHalf) return b.CreateBitCast(b.CreateFPTrunc(f, shaped(b.getHalfTy(), f)), i16);
  // support/half.h's Half::fromFloat, branch-free.
  llvm::Type *i32 = shaped(b.getInt32Ty(), f);
  llvm::Type *f32 = f->getType();
  llvm::Value *x = b.CreateBitCast(f, i32);
  llvm::Value *sign = b.CreateAnd(b.CreateLShr(x, splat(i32, 16)), splat(i32, 0x8000));
  llvm::Value *absx = b.CreateAnd(x, splat(i32, 0x7fffffff));
  llvm::Value *nanOrInf = b.CreateOr(
      splat(i32, 0x7c00),
      b.CreateSelect(b.CreateICmpUGT(absx, splat(i32, 0x7f800000)), splat(i32, 0x200),
                     splat(i32, 0)));
  llvm::Value *magic = llvm::ConstantFP::get(f32, 0.5);
  llvm::Value *subV = b.CreateFAdd(b.CreateBitCast(absx, f32), magic);
  llvm::Value *sub = b.CreateSub(b.CreateBitCast(subV, i32), splat(i32, 0x3f000000));
  llvm::Value *odd = b.CreateAnd(b.CreateLShr(absx, splat(i32, 13)), splat(i32, 1));
  llvm::Value *normal = b.CreateLShr(b.CreateAdd(b.CreateAdd(absx, splat(i32, 0xc8000fff)), odd),
                                     splat(i32, 13));
  llvm::Value *mag = b.CreateSelect(
      b.CreateICmpUGE(absx, splat(i32, 0x7f800000)), nanOrInf,
      b.CreateSelect(b.CreateICmpUGE(absx, splat(i32, 0x477ff000)), splat(i32, 0x7c00),
                     b.CreateSelect(b.CreateICmpULT(absx, splat(i32, 0x38800000)), sub, normal)));
  return b.CreateTrunc(b.CreateOr(sign, mag), i16);
}

llvm::Value *emitFloatToBFloat(llvm::IRBuilder<> &b, llvm::Value *f) {
  llvm::Type *i32 = shaped(b.getInt32Ty(), f);
  llvm::Type *i16 = shaped(b.getInt16Ty(), f);
  llvm::Value *x = b.CreateBitCast(f, i32);
  llvm::Value *isNan = b.CreateICmpUGT(b.CreateAnd(x, splat(i32, 0x7fffffff)), splat(i32, 0x7f800000));
  llvm::Value *rounding =
      b.CreateAdd(splat(i32, 0x7fff), b.CreateAnd(b.CreateLShr(x, splat(i32, 16)), splat(i32, 1)));
  llvm::Value *rounded = b.CreateLShr(b.CreateAdd(x, rounding), splat(i32, 16));
  llvm::Value *nan = b.CreateOr(b.CreateLShr(x, splat(i32, 16)), splat(i32, 0x40));
  return b.CreateTrunc(b.CreateSelect(isNan, nan, rounded), i16);
}

} // namespace kiln::codegen
