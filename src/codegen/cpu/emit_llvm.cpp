#include "codegen/cpu/emit_llvm.h"

#include "codegen/cpu/emit_math.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

namespace kiln::codegen {

namespace {

using kir::Inst;
using kir::Opcode;

// The LLVM type of a value of `t` in registers (Bool is i1) or in memory
// (Bool is a byte).
llvm::Type *registerType(llvm::LLVMContext &c, DType t) {
  switch (t) {
  case DType::F32: return llvm::Type::getFloatTy(c);
  case DType::F64: return llvm::Type::getDoubleTy(c);
  case DType::F16: return llvm::Type::getHalfTy(c);
  case DType::BF16: return llvm::Type::getBFloatTy(c);
  case DType::Bool: return llvm::Type::getInt1Ty(c);
  default: return llvm::Type::getIntNTy(c, static_cast<unsigned>(dtypeSize(t) * 8));
  }
}

llvm::Type *memoryType(llvm::LLVMContext &c, DType t) {
  return t == DType::Bool ? llvm::Type::getInt8Ty(c) : registerType(c, t);
}

class Emitter {
public:
  Emitter(const kir::Kernel &k, const CpuTarget &target, llvm::Module &m)
      : k_(k), target_(target), m_(m), c_(m.getContext()), b_(c_) {}

  Status run();

private:
  Status emitBlock(const std::vector<Inst> &insts);
  Status emitInst(const Inst &i);
  Status emitLoop(const Inst &loop);
  llvm::Value *affine(const kir::Affine &a);
  llvm::Value *address(const Inst &i);
  llvm::Value *value(int n) const { return values_[n]; }
  Expected<llvm::Value *> unary(const Inst &i, llvm::Value *a);
  Expected<llvm::Value *> binary(const Inst &i, llvm::Value *a, llvm::Value *b);
  llvm::Value *compare(const Inst &i, llvm::Value *a, llvm::Value *b);
  llvm::Value *cast(const Inst &i, llvm::Value *a);
  Error unsupported(const Inst &i) const {
    return makeError("kernel '", k_.name, "': cpu codegen does not support '", kir::opcodeName(i.op),
                     "' on ", dtypeName(i.type));
  }

  const kir::Kernel &k_;
  const CpuTarget &target_;
  llvm::Module &m_;
  llvm::LLVMContext &c_;
  llvm::IRBuilder<> b_;
  llvm::Function *fn_ = nullptr;
  std::vector<llvm::Value *> buffers_, params_, loopVars_, values_;
  std::vector<llvm::AllocaInst *> vars_;
  llvm::Value *begin_ = nullptr, *end_ = nullptr;
  int vectorDepth_ = 0; // > 0 inside a loop scheduled Vector
};

Status Emitter::run() {
  llvm::Type *ptr = llvm::PointerType::getUnqual(c_);
  llvm::Type *i64 = b_.getInt64Ty();

  // The body takes every buffer as a noalias pointer and every param as a
  // value, so LLVM knows buffers do not overlap and sizes are loop
  // invariant; the entry function (the ABI) unpacks the arrays and calls it,
  // and the inliner folds the two into one.
  std::vector<llvm::Type *> bodyArgs(k_.buffers.size(), ptr);
  bodyArgs.insert(bodyArgs.end(), k_.params.size() + 2, i64);
  auto *bodyType = llvm::FunctionType::get(b_.getVoidTy(), bodyArgs, false);
  fn_ = llvm::Function::Create(bodyType, llvm::Function::InternalLinkage, k_.name + ".body", m_);
  fn_->addFnAttr(llvm::Attribute::AlwaysInline);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  if (target_.vectorBits >= 512) fn_->addFnAttr("prefer-vector-width", "512");
  for (size_t i = 0; i < k_.buffers.size(); ++i) {
    fn_->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
    buffers_.push_back(fn_->getArg(static_cast<unsigned>(i)));
  }
  for (size_t i = 0; i < k_.params.size(); ++i)
    params_.push_back(fn_->getArg(static_cast<unsigned>(k_.buffers.size() + i)));
  begin_ = fn_->getArg(static_cast<unsigned>(k_.buffers.size() + k_.params.size()));
  end_ = fn_->getArg(static_cast<unsigned>(k_.buffers.size() + k_.params.size() + 1));

  b_.SetInsertPoint(llvm::BasicBlock::Create(c_, "entry", fn_));
  for (const kir::VarDecl &v : k_.vars)
    vars_.push_back(b_.CreateAlloca(registerType(c_, v.dtype), nullptr, v.name));
  values_.assign(k_.numValues, nullptr);
  loopVars_.assign(k_.numLoopVars, nullptr);
  KILN_RETURN_IF_ERROR(emitBlock(k_.body));
  b_.CreateRetVoid();

  // The entry point with the ABI of kernel_ir.h.
  auto *entryType = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64, i64}, false);
  llvm::Function *entry =
      llvm::Function::Create(entryType, llvm::Function::ExternalLinkage, k_.name, m_);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  b_.SetInsertPoint(llvm::BasicBlock::Create(c_, "entry", entry));
  std::vector<llvm::Value *> args;
  for (size_t i = 0; i < k_.buffers.size(); ++i)
    args.push_back(b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), i)));
  for (size_t i = 0; i < k_.params.size(); ++i)
    args.push_back(b_.CreateLoad(i64, b_.CreateConstInBoundsGEP1_64(i64, entry->getArg(1), i)));
  args.push_back(entry->getArg(2));
  args.push_back(entry->getArg(3));
  b_.CreateCall(fn_, args);
  b_.CreateRetVoid();
  return Status::success();
}

Status Emitter::emitBlock(const std::vector<Inst> &insts) {
  for (const Inst &i : insts) KILN_RETURN_IF_ERROR(emitInst(i));
  return Status::success();
}

llvm::Value *Emitter::affine(const kir::Affine &a) {
  llvm::Value *sum = nullptr;
  for (const kir::Term &t : a.terms) {
    llvm::Value *term = nullptr;
    auto mul = [&](llvm::Value *x) { term = term ? b_.CreateNSWMul(term, x) : x; };
    if (t.param >= 0) mul(params_[t.param]);
    if (t.loopVar >= 0) mul(loopVars_[t.loopVar]);
    if (!term) term = b_.getInt64(t.coeff);
    else if (t.coeff != 1) term = b_.CreateNSWMul(term, b_.getInt64(t.coeff));
    sum = sum ? b_.CreateNSWAdd(sum, term) : term;
  }
  return sum ? sum : b_.getInt64(0);
}

llvm::Value *Emitter::address(const Inst &i) {
  return b_.CreateInBoundsGEP(memoryType(c_, k_.buffers[i.buffer].dtype), buffers_[i.buffer],
                              affine(i.index));
}

Status Emitter::emitInst(const Inst &i) {
  switch (i.op) {
  case Opcode::Loop:
    return emitLoop(i);
  case Opcode::Const: {
    llvm::Type *t = registerType(c_, i.type);
    values_[i.result] = isFloat(i.type) ? llvm::ConstantFP::get(t, i.fimm)
                                        : llvm::ConstantInt::get(t, static_cast<uint64_t>(i.iimm));
    return Status::success();
  }
  case Opcode::Load: {
    llvm::Value *v = b_.CreateLoad(memoryType(c_, i.type), address(i));
    if (i.type == DType::Bool) v = b_.CreateICmpNE(v, b_.getInt8(0));
    values_[i.result] = v;
    return Status::success();
  }
  case Opcode::Store: {
    llvm::Value *v = value(i.operands[0]);
    if (i.type == DType::Bool) v = b_.CreateZExt(v, b_.getInt8Ty());
    b_.CreateStore(v, address(i));
    return Status::success();
  }
  case Opcode::VarRead:
    values_[i.result] = b_.CreateLoad(registerType(c_, i.type), vars_[i.var]);
    return Status::success();
  case Opcode::VarWrite:
    b_.CreateStore(value(i.operands[0]), vars_[i.var]);
    return Status::success();
  case Opcode::Select:
    values_[i.result] =
        b_.CreateSelect(value(i.operands[0]), value(i.operands[1]), value(i.operands[2]));
    return Status::success();
  case Opcode::Cast:
    values_[i.result] = cast(i, value(i.operands[0]));
    return Status::success();
  default:
    break;
  }
  if (kir::isUnary(i.op)) {
    KILN_ASSIGN_OR_RETURN(values_[i.result], unary(i, value(i.operands[0])));
  } else if (kir::isBinary(i.op)) {
    KILN_ASSIGN_OR_RETURN(values_[i.result], binary(i, value(i.operands[0]), value(i.operands[1])));
  } else if (kir::isCompare(i.op)) {
    values_[i.result] = compare(i, value(i.operands[0]), value(i.operands[1]));
  } else {
    return unsupported(i);
  }
  return Status::success();
}

Status Emitter::emitLoop(const Inst &loop) {
  llvm::Type *i64 = b_.getInt64Ty();
  const bool parallel = loop.schedule.kind == kir::Schedule::Kind::Parallel;
  llvm::Value *lower = b_.getInt64(0);
  llvm::Value *upper = affine(loop.upper);
  if (parallel) {
    // This call runs iterations [begin, end) of the parallel loop.
    lower = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, begin_, lower);
    upper = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, end_, upper);
  }
  llvm::BasicBlock *pre = b_.GetInsertBlock();
  llvm::BasicBlock *header = llvm::BasicBlock::Create(c_, "loop", fn_);
  llvm::BasicBlock *body = llvm::BasicBlock::Create(c_, "body", fn_);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(c_, "exit", fn_);
  b_.CreateBr(header);

  b_.SetInsertPoint(header);
  llvm::PHINode *iv = b_.CreatePHI(i64, 2, "i" + std::to_string(loop.loopVar));
  iv->addIncoming(lower, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(iv, upper), body, exit);

  b_.SetInsertPoint(body);
  loopVars_[loop.loopVar] = iv;
  const bool vector = loop.schedule.kind == kir::Schedule::Kind::Vector;
  if (vector) ++vectorDepth_;
  KILN_RETURN_IF_ERROR(emitBlock(loop.body));
  if (vector) --vectorDepth_;
  llvm::Value *next = b_.CreateNSWAdd(iv, b_.getInt64(1));
  llvm::BranchInst *latch = b_.CreateBr(header);
  iv->addIncoming(next, b_.GetInsertBlock());

  // The schedule, as loop metadata for LLVM's vectorizer and unroller.
  std::vector<llvm::Metadata *> md{nullptr};
  auto hint = [&](const char *name, llvm::Metadata *v) {
    md.push_back(llvm::MDNode::get(c_, {llvm::MDString::get(c_, name), v}));
  };
  auto i32 = [&](int v) { return llvm::ConstantAsMetadata::get(b_.getInt32(v)); };
  auto i1 = [&](bool v) { return llvm::ConstantAsMetadata::get(b_.getInt1(v)); };
  if (vector) {
    hint("llvm.loop.vectorize.enable", i1(true));
    hint("llvm.loop.vectorize.width", i32(loop.schedule.width));
  } else if (loop.schedule.kind == kir::Schedule::Kind::Unroll) {
    hint("llvm.loop.unroll.count", i32(loop.schedule.width));
  }
  if (md.size() > 1) {
    llvm::MDNode *node = llvm::MDNode::getDistinct(c_, md);
    node->replaceOperandWith(0, node);
    latch->setMetadata(llvm::LLVMContext::MD_loop, node);
  }
  b_.SetInsertPoint(exit);
  return Status::success();
}

Expected<llvm::Value *> Emitter::unary(const Inst &i, llvm::Value *a) {
  if (isFloat(i.type)) {
    // Inside vector loops float math may be reassociated and contracted
    // (the Kernel IR's stated semantics), which is what lets reductions
    // vectorize.
    llvm::FastMathFlags fmf;
    if (vectorDepth_ > 0) {
      fmf.setAllowReassoc();
      fmf.setAllowContract();
    }
    llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
    b_.setFastMathFlags(fmf);
    llvm::Type *t = a->getType();
    switch (i.op) {
    case Opcode::Neg: return b_.CreateFNeg(a);
    case Opcode::Abs: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a);
    case Opcode::Exp: return emitExp(b_, a);
    case Opcode::Log: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, a);
    case Opcode::Sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a);
    case Opcode::Rsqrt:
      return b_.CreateFDiv(llvm::ConstantFP::get(t, 1.0),
                           b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a));
    case Opcode::Tanh: return emitTanh(b_, a);
    case Opcode::Sigmoid: return emitSigmoid(b_, a);
    case Opcode::Erf: return emitErf(b_, a);
    case Opcode::Floor: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, a);
    case Opcode::Ceil: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, a);
    case Opcode::Round: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, a);
    case Opcode::Recip: return b_.CreateFDiv(llvm::ConstantFP::get(t, 1.0), a);
    default: return unsupported(i);
    }
  }
  switch (i.op) {
  case Opcode::Neg: return b_.CreateNeg(a);
  case Opcode::Abs:
    if (isUnsignedInt(i.type) || i.type == DType::Bool) return a;
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, a, b_.getFalse());
  case Opcode::Not: return b_.CreateNot(a);
  default: return unsupported(i);
  }
}

Expected<llvm::Value *> Emitter::binary(const Inst &i, llvm::Value *a, llvm::Value *b) {
  if (isFloat(i.type)) {
    llvm::FastMathFlags fmf;
    if (vectorDepth_ > 0) {
      fmf.setAllowReassoc();
      fmf.setAllowContract();
    }
    llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
    b_.setFastMathFlags(fmf);
    switch (i.op) {
    case Opcode::Add: return b_.CreateFAdd(a, b);
    case Opcode::Sub: return b_.CreateFSub(a, b);
    case Opcode::Mul: return b_.CreateFMul(a, b);
    case Opcode::Div: return b_.CreateFDiv(a, b);
    // NaN-propagating, like numpy's maximum and the interpreter.
    case Opcode::Max: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, a, b);
    case Opcode::Min: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, a, b);
    case Opcode::Pow: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, b);
    case Opcode::Mod: return b_.CreateFRem(a, b);
    default: return unsupported(i);
    }
  }
  const bool isSigned = isSignedInt(i.type);
  switch (i.op) {
  case Opcode::Add: return b_.CreateAdd(a, b);
  case Opcode::Sub: return b_.CreateSub(a, b);
  case Opcode::Mul: return b_.CreateMul(a, b);
  case Opcode::Div: return isSigned ? b_.CreateSDiv(a, b) : b_.CreateUDiv(a, b);
  case Opcode::Mod: return isSigned ? b_.CreateSRem(a, b) : b_.CreateURem(a, b);
  case Opcode::Max:
    return b_.CreateBinaryIntrinsic(isSigned ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, a, b);
  case Opcode::Min:
    return b_.CreateBinaryIntrinsic(isSigned ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, a, b);
  case Opcode::And: return b_.CreateAnd(a, b);
  case Opcode::Or: return b_.CreateOr(a, b);
  case Opcode::Xor: return b_.CreateXor(a, b);
  default: return unsupported(i);
  }
}

llvm::Value *Emitter::compare(const Inst &i, llvm::Value *a, llvm::Value *b) {
  if (isFloat(i.castFrom)) {
    switch (i.op) {
    case Opcode::Lt: return b_.CreateFCmpOLT(a, b);
    case Opcode::Le: return b_.CreateFCmpOLE(a, b);
    case Opcode::Gt: return b_.CreateFCmpOGT(a, b);
    case Opcode::Ge: return b_.CreateFCmpOGE(a, b);
    case Opcode::Eq: return b_.CreateFCmpOEQ(a, b);
    default: return b_.CreateFCmpUNE(a, b);
    }
  }
  const bool s = isSignedInt(i.castFrom);
  switch (i.op) {
  case Opcode::Lt: return s ? b_.CreateICmpSLT(a, b) : b_.CreateICmpULT(a, b);
  case Opcode::Le: return s ? b_.CreateICmpSLE(a, b) : b_.CreateICmpULE(a, b);
  case Opcode::Gt: return s ? b_.CreateICmpSGT(a, b) : b_.CreateICmpUGT(a, b);
  case Opcode::Ge: return s ? b_.CreateICmpSGE(a, b) : b_.CreateICmpUGE(a, b);
  case Opcode::Eq: return b_.CreateICmpEQ(a, b);
  default: return b_.CreateICmpNE(a, b);
  }
}

llvm::Value *Emitter::cast(const Inst &i, llvm::Value *a) {
  const DType from = i.castFrom, to = i.type;
  llvm::Type *t = registerType(c_, to);
  if (from == to) return a;
  if (to == DType::Bool) {
    if (isFloat(from)) return b_.CreateFCmpUNE(a, llvm::ConstantFP::get(a->getType(), 0.0));
    return b_.CreateICmpNE(a, llvm::ConstantInt::get(a->getType(), 0));
  }
  if (isFloat(from) && isFloat(to)) return b_.CreateFPCast(a, t);
  if (isFloat(from))
    // Saturating, so out-of-range values give a defined result instead of
    // LLVM poison.
    return b_.CreateIntrinsic(isSignedInt(to) ? llvm::Intrinsic::fptosi_sat
                                              : llvm::Intrinsic::fptoui_sat,
                              {t, a->getType()}, {a});
  if (isFloat(to))
    return isSignedInt(from) ? b_.CreateSIToFP(a, t) : b_.CreateUIToFP(a, t);
  return b_.CreateIntCast(a, t, isSignedInt(from));
}

} // namespace

Status emitKernel(const kir::Kernel &kernel, const CpuTarget &target, llvm::Module &module) {
  return Emitter(kernel, target, module).run();
}

} // namespace kiln::codegen
