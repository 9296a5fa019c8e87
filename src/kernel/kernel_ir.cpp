#include "kernel/kernel_ir.h"

#include <cassert>
#include <cstring>

namespace kiln::kir {

namespace {

struct OpcodeInfo {
  Opcode op;
  const char *name;
};

constexpr OpcodeInfo kOpcodes[] = {
    {Opcode::Const, "const"},     {Opcode::Load, "load"},       {Opcode::VarRead, "read"},
    {Opcode::Index, "index"},     {Opcode::Store, "store"},     {Opcode::VarWrite, "write"},
    {Opcode::Loop, "loop"},       {Opcode::If, "if"},           {Opcode::Neg, "neg"},
    {Opcode::Abs, "abs"},         {Opcode::Exp, "exp"},         {Opcode::Log, "log"},
    {Opcode::Sqrt, "sqrt"},       {Opcode::Rsqrt, "rsqrt"},     {Opcode::Tanh, "tanh"},
    {Opcode::Sigmoid, "sigmoid"}, {Opcode::Erf, "erf"},         {Opcode::Floor, "floor"},
    {Opcode::Ceil, "ceil"},       {Opcode::Round, "round"},     {Opcode::Recip, "recip"},
    {Opcode::Sin, "sin"},         {Opcode::Cos, "cos"},         {Opcode::Tan, "tan"},
    {Opcode::Asin, "asin"},       {Opcode::Acos, "acos"},       {Opcode::Atan, "atan"},
    {Opcode::Sinh, "sinh"},       {Opcode::Cosh, "cosh"},       {Opcode::Asinh, "asinh"},
    {Opcode::Acosh, "acosh"},     {Opcode::Atanh, "atanh"},     {Opcode::Not, "not"},
    {Opcode::Add, "add"},         {Opcode::Sub, "sub"},         {Opcode::Mul, "mul"},
    {Opcode::Div, "div"},         {Opcode::Max, "max"},         {Opcode::Min, "min"},
    {Opcode::Pow, "pow"},         {Opcode::Mod, "mod"},         {Opcode::And, "and"},
    {Opcode::Or, "or"},           {Opcode::Xor, "xor"},         {Opcode::Shl, "shl"},
    {Opcode::Shr, "shr"},         {Opcode::Lt, "lt"},           {Opcode::Le, "le"},
    {Opcode::Gt, "gt"},           {Opcode::Ge, "ge"},           {Opcode::Eq, "eq"},
    {Opcode::Ne, "ne"},           {Opcode::Select, "select"},   {Opcode::Cast, "cast"},
};

} // namespace

const char *opcodeName(Opcode op) {
  for (const OpcodeInfo &i : kOpcodes)
    if (i.op == op) return i.name;
  return "?";
}

bool opcodeFromName(const std::string &name, Opcode &out) {
  for (const OpcodeInfo &i : kOpcodes)
    if (name == i.name) {
      out = i.op;
      return true;
    }
  return false;
}

bool isUnary(Opcode op) { return op >= Opcode::Neg && op <= Opcode::Not; }
bool isBinary(Opcode op) { return op >= Opcode::Add && op <= Opcode::Shr; }
bool isCompare(Opcode op) { return op >= Opcode::Lt && op <= Opcode::Ne; }

const Inst *Kernel::parallelLoop() const {
  for (const Inst &i : body)
    if (i.op == Opcode::Loop && i.schedule.kind == Schedule::Kind::Parallel) return &i;
  return nullptr;
}

int KernelBuilder::addBuffer(std::string name, DType dtype, bool output) {
  k_.buffers.push_back(BufferArg{std::move(name), dtype, output});
  return static_cast<int>(k_.buffers.size()) - 1;
}

int KernelBuilder::addParam(std::string name) {
  k_.params.push_back(std::move(name));
  return static_cast<int>(k_.params.size()) - 1;
}

int KernelBuilder::addVar(std::string name, DType dtype) {
  k_.vars.push_back(VarDecl{std::move(name), dtype});
  return static_cast<int>(k_.vars.size()) - 1;
}

std::vector<Inst> &KernelBuilder::current() {
  return blocks_.empty() ? k_.body : blocks_.back().body;
}

int KernelBuilder::emit(Inst inst) {
  if (inst.op != Opcode::Store && inst.op != Opcode::VarWrite) inst.result = k_.numValues++;
  int r = inst.result;
  current().push_back(std::move(inst));
  return r;
}

int KernelBuilder::constant(DType type, double value) {
  Inst i;
  i.op = Opcode::Const;
  i.type = type;
  if (isFloat(type)) i.fimm = value;
  else i.iimm = static_cast<int64_t>(value);
  return emit(std::move(i));
}

int KernelBuilder::intConstant(DType type, int64_t value) {
  Inst i;
  i.op = Opcode::Const;
  i.type = type;
  i.iimm = value;
  if (isFloat(type)) i.fimm = static_cast<double>(value);
  return emit(std::move(i));
}

int KernelBuilder::load(int buffer, Affine index, int dynIndex) {
  Inst i;
  i.op = Opcode::Load;
  i.type = k_.buffers[buffer].dtype;
  i.buffer = buffer;
  i.index = std::move(index);
  i.dynIndex = dynIndex;
  return emit(std::move(i));
}

void KernelBuilder::store(int buffer, Affine index, int value, int dynIndex) {
  Inst i;
  i.op = Opcode::Store;
  i.type = k_.buffers[buffer].dtype;
  i.buffer = buffer;
  i.index = std::move(index);
  i.dynIndex = dynIndex;
  i.operands = {value};
  emit(std::move(i));
}

int KernelBuilder::index(Affine value) {
  Inst i;
  i.op = Opcode::Index;
  i.type = DType::I64;
  i.index = std::move(value);
  return emit(std::move(i));
}

int KernelBuilder::varRead(int var) {
  Inst i;
  i.op = Opcode::VarRead;
  i.type = k_.vars[var].dtype;
  i.var = var;
  return emit(std::move(i));
}

void KernelBuilder::varWrite(int var, int value) {
  Inst i;
  i.op = Opcode::VarWrite;
  i.type = k_.vars[var].dtype;
  i.var = var;
  i.operands = {value};
  emit(std::move(i));
}

int KernelBuilder::unary(Opcode op, DType type, int a) {
  assert(isUnary(op));
  Inst i;
  i.op = op;
  i.type = type;
  i.operands = {a};
  return emit(std::move(i));
}

int KernelBuilder::binary(Opcode op, DType type, int a, int b) {
  assert(isBinary(op));
  Inst i;
  i.op = op;
  i.type = type;
  i.operands = {a, b};
  return emit(std::move(i));
}

int KernelBuilder::compare(Opcode op, DType operandType, int a, int b) {
  assert(isCompare(op));
  Inst i;
  i.op = op;
  i.type = DType::Bool;
  i.castFrom = operandType;
  i.operands = {a, b};
  return emit(std::move(i));
}

int KernelBuilder::select(DType type, int cond, int a, int b) {
  Inst i;
  i.op = Opcode::Select;
  i.type = type;
  i.operands = {cond, a, b};
  return emit(std::move(i));
}

int KernelBuilder::cast(DType to, DType from, int a) {
  Inst i;
  i.op = Opcode::Cast;
  i.type = to;
  i.castFrom = from;
  i.operands = {a};
  return emit(std::move(i));
}

int KernelBuilder::beginLoop(Affine upper, Schedule schedule) {
  Inst i;
  i.op = Opcode::Loop;
  i.loopVar = k_.numLoopVars++;
  i.upper = std::move(upper);
  i.schedule = schedule;
  blocks_.push_back(std::move(i));
  return blocks_.back().loopVar;
}

void KernelBuilder::endLoop() {
  assert(!blocks_.empty() && blocks_.back().op == Opcode::Loop);
  Inst loop = std::move(blocks_.back());
  blocks_.pop_back();
  current().push_back(std::move(loop));
}

void KernelBuilder::beginIf(int cond) {
  Inst i;
  i.op = Opcode::If;
  i.operands = {cond};
  blocks_.push_back(std::move(i));
}

void KernelBuilder::endIf() {
  assert(!blocks_.empty() && blocks_.back().op == Opcode::If);
  Inst block = std::move(blocks_.back());
  blocks_.pop_back();
  current().push_back(std::move(block));
}

Kernel KernelBuilder::finish() {
  assert(blocks_.empty());
  return std::move(k_);
}

} // namespace kiln::kir
