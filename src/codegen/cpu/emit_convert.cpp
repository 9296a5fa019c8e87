#include "codegen/cpu/emit_convert.h"

#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <string>

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

namespace {

constexpr const char *kHalfToFloat = "kiln_half_to_float";
// The vector widths the loop vectorizer may pick (kernel schedules use
// powers of two up to 64 lanes).
constexpr unsigned kPlaceholderWidths[] = {2, 4, 8, 16, 32, 64};

std::string vectorVariant(unsigned width) {
  return std::string(kHalfToFloat) + "_v" + std::to_string(width);
}

bool isPlaceholder(const llvm::Function &f) {
  return f.isDeclaration() && f.getName().starts_with(kHalfToFloat);
}

} // namespace

llvm::Value *emitHalfToFloatPlaceholder(llvm::IRBuilder<> &b, llvm::Module &m, llvm::Value *bits) {
  if (bits->getType()->isVectorTy()) return emitHalfToFloat(b, bits, true);
  llvm::Function *scalar = m.getFunction(kHalfToFloat);
  if (!scalar) {
    auto pure = [&](llvm::Function *f) {
      f->setDoesNotThrow();
      f->setWillReturn();
      f->setDoesNotAccessMemory();
    };
    scalar =
        llvm::Function::Create(llvm::FunctionType::get(b.getFloatTy(), {b.getInt16Ty()}, false),
                               llvm::Function::ExternalLinkage, kHalfToFloat, m);
    pure(scalar);
    std::string variants;
    std::vector<llvm::GlobalValue *> keep;
    for (unsigned w : kPlaceholderWidths) {
      auto *type = llvm::FunctionType::get(llvm::FixedVectorType::get(b.getFloatTy(), w),
                                           {llvm::FixedVectorType::get(b.getInt16Ty(), w)}, false);
      llvm::Function *v =
          llvm::Function::Create(type, llvm::Function::ExternalLinkage, vectorVariant(w), m);
      pure(v);
      keep.push_back(v);
      // _ZGV, ISA "_LLVM_", unmasked, width, one vector parameter.
      if (!variants.empty()) variants += ",";
      variants +=
          "_ZGV_LLVM_N" + std::to_string(w) + "v_" + kHalfToFloat + "(" + vectorVariant(w) + ")";
    }
    scalar->addFnAttr("vector-function-abi-variant", variants);
    // Unused declarations are dropped early in the pipeline; the
    // vectorizer only uses variants that still exist.
    llvm::appendToCompilerUsed(m, keep);
  }
  return b.CreateCall(scalar, {bits});
}

void lowerHalfToFloatPlaceholders(llvm::Module &m) {
  llvm::removeFromUsedLists(m, [](llvm::Constant *c) {
    auto *f = llvm::dyn_cast<llvm::Function>(c);
    return f && isPlaceholder(*f);
  });
  std::vector<llvm::Function *> placeholders;
  for (llvm::Function &f : m)
    if (isPlaceholder(f)) placeholders.push_back(&f);
  for (llvm::Function *f : placeholders) {
    f->removeDeadConstantUsers(); // the old used list's array
    for (llvm::User *user : llvm::make_early_inc_range(f->users())) {
      auto *call = llvm::dyn_cast<llvm::CallInst>(user);
      if (!call) continue;
      llvm::IRBuilder<> b(call);
      call->replaceAllUsesWith(emitHalfToFloat(b, call->getArgOperand(0), true));
      call->eraseFromParent();
    }
    if (f->use_empty()) f->eraseFromParent();
  }
}

} // namespace kiln::codegen
