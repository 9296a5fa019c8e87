#include "codegen/cpu/emit_llvm.h"

#include "codegen/cpu/emit_convert.h"
#include "codegen/cpu/emit_math.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <cmath>

namespace kiln::codegen {

namespace {

using kir::Inst;
using kir::Opcode;

// The LLVM type of a value of `t` in registers (Bool is i1; 16-bit floats
// are computed in f32, kernel_ir.h) or in memory (Bool is a byte, 16-bit
// floats are their bits).
llvm::Type *registerType(llvm::LLVMContext &c, DType t) {
  switch (t) {
  case DType::F32: case DType::F16: case DType::BF16: return llvm::Type::getFloatTy(c);
  case DType::F64: return llvm::Type::getDoubleTy(c);
  case DType::Bool: return llvm::Type::getInt1Ty(c);
  default: return llvm::Type::getIntNTy(c, static_cast<unsigned>(dtypeSize(t) * 8));
  }
}

llvm::Type *memoryType(llvm::LLVMContext &c, DType t) {
  if (t == DType::F16 || t == DType::BF16) return llvm::Type::getInt16Ty(c);
  return t == DType::Bool ? llvm::Type::getInt8Ty(c) : registerType(c, t);
}

bool isHalfFloat(DType t) { return t == DType::F16 || t == DType::BF16; }

// Whether `body` calls a C library function that LLVM cannot vectorize
// (libmCall below); a vector hint on such a loop would only make LLVM warn
// that it could not honour it.
bool callsScalarLibm(const std::vector<Inst> &body) {
  for (const Inst &i : body) {
    switch (i.op) {
    case Opcode::Tan: case Opcode::Asin: case Opcode::Acos: case Opcode::Atan:
    case Opcode::Sinh: case Opcode::Cosh: case Opcode::Asinh: case Opcode::Acosh:
    case Opcode::Atanh:
      return true;
    default:
      if (!i.body.empty() && callsScalarLibm(i.body)) return true;
    }
  }
  return false;
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
  // kVector: the vectorize hint; kVectorTail: also no interleaving and the
  // tail folded into masked iterations (emitLoop says why).
  enum class LoopForm { kPlain, kVector, kVectorTail };
  Status emitCountedLoop(const Inst &loop, llvm::Value *lower, llvm::Value *upper, LoopForm form);
  Status emitIf(const Inst &branch);
  llvm::Value *toMemory(DType t, llvm::Value *v);
  llvm::Value *fromMemory(DType t, llvm::Value *v);
  // Rounds an f32 register value to the precision of a 16-bit float type.
  llvm::Value *roundTo(DType t, llvm::Value *v) { return fromMemory(t, toMemory(t, v)); }
  llvm::Value *libmCall(const char *name, llvm::Value *a);
  llvm::Value *safeDivisor(const Inst &i, llvm::Value *a, llvm::Value *b);
  llvm::Value *affine(const kir::Affine &a);
  llvm::Value *address(const Inst &i);
  llvm::Value *value(int n) const { return values_[n]; }
  Expected<llvm::Value *> unary(const Inst &i, llvm::Value *a);
  Expected<llvm::Value *> binary(const Inst &i, llvm::Value *a, llvm::Value *b);
  llvm::Value *compare(const Inst &i, llvm::Value *a, llvm::Value *b);
  llvm::Value *cast(const Inst &i, llvm::Value *a);
  llvm::Value *roundToOddFloat(llvm::Value *d);
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
  // Halfs convert in hardware (F16C). Widening is a plain fpext only where
  // the target also computes on halfs (AVX512-FP16): otherwise InstCombine
  // narrows f32 work on a widened half (a compare with 0, a select: Relu
  // after a Cast to f16) into <16 x half> operations that the backend
  // scalarizes element by element (7x slower on such a kernel), so F16C
  // targets widen through a placeholder that becomes the fpext after
  // optimization (emit_convert.h), and targets without F16C in integers.
  bool nativeFloatToHalf_ = false, nativeHalfToFloat_ = false;
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
  const std::string features = "," + target_.features + ",";
  nativeFloatToHalf_ = features.find(",+f16c,") != std::string::npos;
  nativeHalfToFloat_ = nativeFloatToHalf_ && features.find(",+avx512fp16,") != std::string::npos;
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
  llvm::Value *index = affine(i.index);
  if (i.dynIndex >= 0) index = b_.CreateNSWAdd(index, value(i.dynIndex));
  return b_.CreateInBoundsGEP(memoryType(c_, k_.buffers[i.buffer].dtype), buffers_[i.buffer],
                              index);
}

llvm::Value *Emitter::toMemory(DType t, llvm::Value *v) {
  if (t == DType::Bool) return b_.CreateZExt(v, b_.getInt8Ty());
  if (t == DType::F16) return emitFloatToHalf(b_, v, nativeFloatToHalf_);
  if (t == DType::BF16) return emitFloatToBFloat(b_, v);
  return v;
}

llvm::Value *Emitter::fromMemory(DType t, llvm::Value *v) {
  if (t == DType::Bool) return b_.CreateICmpNE(v, b_.getInt8(0));
  if (t == DType::F16) {
    if (nativeFloatToHalf_ && !nativeHalfToFloat_) return emitHalfToFloatPlaceholder(b_, m_, v);
    return emitHalfToFloat(b_, v, nativeHalfToFloat_);
  }
  if (t == DType::BF16) return emitBFloatToFloat(b_, v);
  return v;
}

// A call of the C library's float (f32) or double (f64) function `name`.
llvm::Value *Emitter::libmCall(const char *name, llvm::Value *a) {
  const bool dbl = a->getType()->isDoubleTy();
  std::string symbol = dbl ? name : std::string(name) + "f";
  llvm::FunctionCallee fn = m_.getOrInsertFunction(symbol, a->getType(), a->getType());
  if (auto *f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    f->setDoesNotThrow();
    f->setWillReturn();
  }
  return b_.CreateCall(fn, {a});
}

Status Emitter::emitInst(const Inst &i) {
  switch (i.op) {
  case Opcode::Loop:
    return emitLoop(i);
  case Opcode::If:
    return emitIf(i);
  case Opcode::Const: {
    llvm::Type *t = registerType(c_, i.type);
    double f = i.fimm;
    if (i.type == DType::F16) f = static_cast<float>(Half(static_cast<float>(f)));
    if (i.type == DType::BF16) f = static_cast<float>(BFloat16(static_cast<float>(f)));
    values_[i.result] = isFloat(i.type) ? llvm::ConstantFP::get(t, f)
                                        : llvm::ConstantInt::get(t, static_cast<uint64_t>(i.iimm));
    return Status::success();
  }
  case Opcode::Index:
    values_[i.result] = affine(i.index);
    return Status::success();
  case Opcode::Load:
    values_[i.result] = fromMemory(i.type, b_.CreateLoad(memoryType(c_, i.type), address(i)));
    return Status::success();
  case Opcode::Store:
    b_.CreateStore(toMemory(i.type, value(i.operands[0])), address(i));
    return Status::success();
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
    if (isHalfFloat(i.type)) values_[i.result] = roundTo(i.type, values_[i.result]);
  } else if (kir::isBinary(i.op)) {
    KILN_ASSIGN_OR_RETURN(values_[i.result], binary(i, value(i.operands[0]), value(i.operands[1])));
    if (isHalfFloat(i.type)) values_[i.result] = roundTo(i.type, values_[i.result]);
  } else if (kir::isCompare(i.op)) {
    values_[i.result] = compare(i, value(i.operands[0]), value(i.operands[1]));
  } else {
    return unsupported(i);
  }
  return Status::success();
}

// A vector loop runs as two copies: the main one over the longest prefix
// that is a whole number of kInterleave vectors, with LLVM's own choice of
// interleaving, then the rest (under kInterleave vectors) in a copy that
// LLVM vectorizes without interleaving and with the tail folded into masked
// iterations (where the target has masked loads and stores of the loop's
// types; elsewhere less than one vector of it stays scalar). One loop
// would do the same work badly: LLVM interleaves a vector loop 4x (64
// floats per iteration at width 16) and runs what is left as scalar code,
// and with the width given it cannot vectorize that epilogue either, so a
// row of 49 (a Swin window's softmax) ran wholly scalar, exp and all (4.9
// -> 0.6 ms on [64,3,49,49]), a row of 300 ran 44 of its elements scalar.
// Masking every iteration instead costs long rows their speed
// (DynamicQuantizeLinear's min/max over a whole tensor: +13%).
constexpr int64_t kInterleave = 4;

Status Emitter::emitLoop(const Inst &loop) {
  const bool parallel = loop.schedule.kind == kir::Schedule::Kind::Parallel;
  llvm::Value *lower = b_.getInt64(0);
  llvm::Value *upper = affine(loop.upper);
  if (parallel) {
    // This call runs iterations [begin, end) of the parallel loop.
    lower = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, begin_, lower);
    upper = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, end_, upper);
  }
  const bool vector =
      loop.schedule.kind == kir::Schedule::Kind::Vector && !callsScalarLibm(loop.body);
  if (!vector) return emitCountedLoop(loop, lower, upper, LoopForm::kPlain);
  const int64_t block = kInterleave * std::max(1, loop.schedule.width);
  llvm::Value *trips =
      b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateSub(upper, lower), b_.getInt64(0));
  llvm::Value *mainEnd = b_.CreateAdd(
      lower, b_.CreateMul(b_.CreateUDiv(trips, b_.getInt64(block)), b_.getInt64(block)));
  // Constant bounds fold: a whole number of blocks needs no tail copy, and
  // fewer than one block no main copy (each copy is the body emitted again).
  if (mainEnd == upper) return emitCountedLoop(loop, lower, upper, LoopForm::kVector);
  if (mainEnd != lower)
    KILN_RETURN_IF_ERROR(emitCountedLoop(loop, lower, mainEnd, LoopForm::kVector));
  return emitCountedLoop(loop, mainEnd, upper, LoopForm::kVectorTail);
}

// One copy of `loop` over [lower, upper), with the schedule as loop
// metadata for LLVM's vectorizer and unroller.
Status Emitter::emitCountedLoop(const Inst &loop, llvm::Value *lower, llvm::Value *upper,
                                LoopForm form) {
  llvm::Type *i64 = b_.getInt64Ty();
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
  // Float math in a loop scheduled Vector may be reassociated (below), with
  // or without the vectorize hint.
  const bool vector = loop.schedule.kind == kir::Schedule::Kind::Vector;
  if (vector) ++vectorDepth_;
  KILN_RETURN_IF_ERROR(emitBlock(loop.body));
  if (vector) --vectorDepth_;
  llvm::Value *next = b_.CreateNSWAdd(iv, b_.getInt64(1));
  llvm::BranchInst *latch = b_.CreateBr(header);
  iv->addIncoming(next, b_.GetInsertBlock());

  std::vector<llvm::Metadata *> md{nullptr};
  auto hint = [&](const char *name, llvm::Metadata *v) {
    md.push_back(llvm::MDNode::get(c_, {llvm::MDString::get(c_, name), v}));
  };
  auto i32 = [&](int v) { return llvm::ConstantAsMetadata::get(b_.getInt32(v)); };
  auto i1 = [&](bool v) { return llvm::ConstantAsMetadata::get(b_.getInt1(v)); };
  if (form != LoopForm::kPlain) {
    hint("llvm.loop.vectorize.enable", i1(true));
    hint("llvm.loop.vectorize.width", i32(loop.schedule.width));
    if (form == LoopForm::kVectorTail) {
      hint("llvm.loop.interleave.count", i32(1));
      hint("llvm.loop.vectorize.predicate.enable", i1(true));
    }
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

Status Emitter::emitIf(const Inst &branch) {
  llvm::BasicBlock *then = llvm::BasicBlock::Create(c_, "then", fn_);
  llvm::BasicBlock *done = llvm::BasicBlock::Create(c_, "endif", fn_);
  b_.CreateCondBr(value(branch.operands[0]), then, done);
  b_.SetInsertPoint(then);
  KILN_RETURN_IF_ERROR(emitBlock(branch.body));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
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
    case Opcode::Sin: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sin, a);
    case Opcode::Cos: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::cos, a);
    case Opcode::Tan: return libmCall("tan", a);
    case Opcode::Asin: return libmCall("asin", a);
    case Opcode::Acos: return libmCall("acos", a);
    case Opcode::Atan: return libmCall("atan", a);
    case Opcode::Sinh: return libmCall("sinh", a);
    case Opcode::Cosh: return libmCall("cosh", a);
    case Opcode::Asinh: return libmCall("asinh", a);
    case Opcode::Acosh: return libmCall("acosh", a);
    case Opcode::Atanh: return libmCall("atanh", a);
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
  case Opcode::Div: case Opcode::Mod: {
    // Never trap (verifier.h): x / 0 = 0, MIN / -1 = MIN, x % 0 = 0.
    llvm::Value *zero = llvm::ConstantInt::get(a->getType(), 0);
    llvm::Value *divisorZero = b_.CreateICmpEQ(b, zero);
    llvm::Value *d = safeDivisor(i, a, b);
    llvm::Value *r = i.op == Opcode::Div ? (isSigned ? b_.CreateSDiv(a, d) : b_.CreateUDiv(a, d))
                                         : (isSigned ? b_.CreateSRem(a, d) : b_.CreateURem(a, d));
    return b_.CreateSelect(divisorZero, zero, r);
  }
  case Opcode::Shl: case Opcode::Shr: {
    // Shifts by the width or more (or negative amounts) give 0 (sign bits
    // for an arithmetic right shift), where LLVM would give poison.
    const unsigned bits = a->getType()->getScalarSizeInBits();
    llvm::Value *tooFar = b_.CreateICmpUGE(b, llvm::ConstantInt::get(a->getType(), bits));
    llvm::Value *amount = b_.CreateSelect(tooFar, llvm::ConstantInt::get(a->getType(), 0), b);
    if (i.op == Opcode::Shl)
      return b_.CreateSelect(tooFar, llvm::ConstantInt::get(a->getType(), 0), b_.CreateShl(a, amount));
    if (!isSigned)
      return b_.CreateSelect(tooFar, llvm::ConstantInt::get(a->getType(), 0), b_.CreateLShr(a, amount));
    return b_.CreateSelect(tooFar, b_.CreateAShr(a, llvm::ConstantInt::get(a->getType(), bits - 1)),
                           b_.CreateAShr(a, amount));
  }
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

// The divisor with the trapping cases (0, and -1 under MIN for signed
// types) replaced by 1; the caller selects the results of those cases.
llvm::Value *Emitter::safeDivisor(const Inst &i, llvm::Value *a, llvm::Value *b) {
  llvm::Type *t = a->getType();
  llvm::Value *one = llvm::ConstantInt::get(t, 1);
  llvm::Value *bad = b_.CreateICmpEQ(b, llvm::ConstantInt::get(t, 0));
  if (isSignedInt(i.type)) {
    const unsigned bits = t->getScalarSizeInBits();
    llvm::Value *minValue = llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(bits));
    llvm::Value *overflow = b_.CreateAnd(b_.CreateICmpEQ(a, minValue),
                                         b_.CreateICmpEQ(b, llvm::ConstantInt::getSigned(t, -1)));
    // MIN / 1 = MIN (the wrapped quotient) and MIN % 1 = 0, as wanted.
    bad = b_.CreateOr(bad, overflow);
  }
  return b_.CreateSelect(bad, one, b);
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

// A double rounded to float to odd: toward zero, then the last bit set when
// the result is inexact. NaN and exact values pass unchanged.
llvm::Value *Emitter::roundToOddFloat(llvm::Value *d) {
  llvm::Value *f = b_.CreateFPTrunc(d, b_.getFloatTy());
  llvm::Value *back = b_.CreateFPExt(f, b_.getDoubleTy());
  llvm::Value *exact = b_.CreateOr(b_.CreateFCmpOEQ(back, d), b_.CreateFCmpUNO(d, d));
  llvm::Value *away =
      b_.CreateFCmpOGT(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                       b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, d));
  llvm::Value *bits = b_.CreateBitCast(f, b_.getInt32Ty());
  bits = b_.CreateSelect(away, b_.CreateSub(bits, b_.getInt32(1)), bits); // one step to zero
  bits = b_.CreateOr(bits, b_.getInt32(1));
  return b_.CreateSelect(exact, f, b_.CreateBitCast(bits, b_.getFloatTy()));
}

llvm::Value *Emitter::cast(const Inst &i, llvm::Value *a) {
  const DType from = i.castFrom, to = i.type;
  llvm::Type *t = registerType(c_, to);
  if (from == to) return a;
  if (isHalfFloat(to) && from != DType::Bool) {
    // Through f32 (the register type), then rounded to the 16-bit type.
    // From f64 and 32/64-bit integers the first rounding is to odd, so that
    // the second one gives the correctly rounded result (as the
    // interpreter's ew::roundToOddFloat does); a plain double rounding can
    // be one ulp off.
    if (from == DType::F64 || (isInt(from) && dtypeSize(from) >= 4)) {
      llvm::Value *d = from == DType::F64 ? a
                       : isSignedInt(from) ? b_.CreateSIToFP(a, b_.getDoubleTy())
                                           : b_.CreateUIToFP(a, b_.getDoubleTy());
      return roundTo(to, roundToOddFloat(d));
    }
    Inst toF32 = i;
    toF32.type = DType::F32;
    return roundTo(to, cast(toF32, a));
  }
  if (to == DType::Bool) {
    if (isFloat(from)) return b_.CreateFCmpUNE(a, llvm::ConstantFP::get(a->getType(), 0.0));
    return b_.CreateICmpNE(a, llvm::ConstantInt::get(a->getType(), 0));
  }
  if (isFloat(from) && isFloat(to)) return b_.CreateFPCast(a, t);
  if (isFloat(from) && dtypeSize(to) <= 2) {
    // To an 8/16-bit integer (every quantize): the saturating conversion
    // below spelled out, so that it vectorizes. x86 has no vector
    // fptoui.sat to bytes and LLVM scalarized it (a clamp, a convert and a
    // byte insert per lane: DynamicQuantizeLinear ran at 1 ns per value).
    // NaN gives 0, the range's ends clamp, the rest truncates toward zero;
    // every bound is exact in f32 and i32, so this equals fpto[su]i.sat.
    llvm::Type *ft = a->getType();
    const double lo = isSignedInt(to) ? -std::ldexp(1.0, 8 * int(dtypeSize(to)) - 1) : 0.0;
    const double hi = isSignedInt(to) ? -lo - 1 : std::ldexp(1.0, 8 * int(dtypeSize(to))) - 1;
    llvm::Value *x = b_.CreateSelect(b_.CreateFCmpUNO(a, a), llvm::ConstantFP::get(ft, 0.0), a);
    x = b_.CreateSelect(b_.CreateFCmpOLT(x, llvm::ConstantFP::get(ft, lo)),
                        llvm::ConstantFP::get(ft, lo), x);
    x = b_.CreateSelect(b_.CreateFCmpOGT(x, llvm::ConstantFP::get(ft, hi)),
                        llvm::ConstantFP::get(ft, hi), x);
    llvm::Type *i32 = b_.getInt32Ty();
    if (auto *vt = llvm::dyn_cast<llvm::VectorType>(ft))
      i32 = llvm::VectorType::get(i32, vt->getElementCount());
    return b_.CreateTrunc(b_.CreateFPToSI(x, i32), t);
  }
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
