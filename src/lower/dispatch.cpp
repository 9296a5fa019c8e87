#include "lower/dispatch.h"

#include <bit>
#include <cassert>

namespace kiln::lower {

namespace {

using Op = runtime::ShapeProgram::Op;
using Inst = runtime::ShapeProgram::Inst;

bool readsValueA(Op op) {
  switch (op) {
  case Op::Const: case Op::ConstF: case Op::Dim: case Op::Numel: case Op::Present:
  case Op::Rank: case Op::DimFromEnd: case Op::Elem: case Op::ElemF:
    return false;
  default:
    return true;
  }
}
bool readsValueB(Op op) {
  switch (op) {
  case Op::Not: case Op::FFloor: case Op::FCeil: case Op::ToF: case Op::ToI:
    return false;
  default:
    return readsValueA(op) || op == Op::Elem || op == Op::ElemF;
  }
}

// How many value operands an opcode reads (a, b, c in order).
int valueOperands(Op op) {
  switch (op) {
  case Op::Const: case Op::ConstF: case Op::Dim: case Op::Numel: case Op::Present:
  case Op::Rank: case Op::DimFromEnd:
    return 0;
  case Op::Elem: case Op::ElemF: return 1; // b is the value
  case Op::Not: case Op::FFloor: case Op::FCeil: case Op::ToF: case Op::ToI: return 1;
  case Op::Select: return 3;
  default: return 2;
  }
}
double asF(int64_t v) { return std::bit_cast<double>(v); }

const char *opName(Op op) {
  static const char *const kNames[] = {
      "const", "constf", "dim", "numel", "present", "elem", "elemf", "add", "sub", "mul",
      "floordiv", "floormod", "min", "max", "lt", "le", "eq", "ne", "and", "or", "not",
      "select", "fadd", "fsub", "fmul", "fdiv", "ffloor", "fceil", "flt", "tof", "toi", "rank",
      "dimfromend"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == size_t(Op::Count));
  return size_t(op) < size_t(Op::Count) ? kNames[size_t(op)] : "?";
}

} // namespace

DispatchBuilder::DispatchBuilder(const Node &node, std::string name, ConstantLookup constants)
    : node_(node), name_(std::move(name)), constants_(std::move(constants)),
      numInputs_(node.numInputs()), numOutputs_(node.numOutputs()) {
  recipe_.outputs.resize(numOutputs_);
  outputSet_.assign(numOutputs_, false);
}

const Value *DispatchBuilder::input(int i) const {
  return i < node_.numInputs() ? node_.input(i) : nullptr;
}
DType DispatchBuilder::inputType(int i) const {
  const Value *v = input(i);
  return v && v->type().isTensor() ? v->type().dtype() : DType::F32;
}
int DispatchBuilder::inputRank(int i) const {
  const Value *v = input(i);
  return v && v->type().isTensor() && v->type().shape().rankKnown ? int(v->type().shape().rank()) : -1;
}
DType DispatchBuilder::outputType(int i) const {
  const Value *v = node_.output(i);
  return v && v->type().isTensor() ? v->type().dtype() : DType::F32;
}

// ---- shape values -----------------------------------------------------------------

std::optional<int64_t> DispatchBuilder::fold(const Inst &inst) {
  // Run the one instruction on constant operands with the shape program's
  // own evaluator, so folding cannot disagree with the runtime.
  runtime::ShapeProgram p;
  Inst copy = inst;
  int32_t *operands[] = {&copy.a, &copy.b, &copy.c};
  const bool elem = inst.op == Op::Elem || inst.op == Op::ElemF;
  for (int k = 0; k < 3; ++k) {
    const bool isValue = (k == 0 && readsValueA(inst.op)) || (k == 1 && readsValueB(inst.op)) ||
                         (k == 2 && inst.op == Op::Select);
    if (!isValue) continue;
    const int32_t v = *operands[k];
    if (!known_[size_t(v)]) return std::nullopt;
    *operands[k] = int32_t(p.insts.size());
    p.insts.push_back(Inst{Op::Const, -1, -1, -1, *known_[size_t(v)]});
  }
  std::vector<const Tensor *> inputs(size_t(numInputs_), nullptr);
  if (elem) {
    const Tensor *t = constants_ ? constants_(input(inst.a)) : nullptr;
    if (!t) return std::nullopt;
    inputs[size_t(inst.a)] = t;
  }
  p.insts.push_back(copy);
  std::vector<int64_t> values;
  if (!p.run(inputs, values).ok()) return std::nullopt; // left for run time to report
  return values.back();
}

SVal DispatchBuilder::emit(Inst inst) {
  std::optional<int64_t> k;
  if (inst.op == Op::Const || inst.op == Op::ConstF) k = inst.imm;
  else if (inst.op != Op::Dim && inst.op != Op::Numel && inst.op != Op::Present &&
           inst.op != Op::Rank && inst.op != Op::DimFromEnd)
    k = fold(inst);
  if (k && inst.op != Op::Const && inst.op != Op::ConstF) {
    // Float results stay floats.
    const bool isFloatResult = inst.op == Op::ElemF || inst.op == Op::FAdd ||
                               inst.op == Op::FSub || inst.op == Op::FMul || inst.op == Op::FDiv ||
                               inst.op == Op::FFloor || inst.op == Op::FCeil || inst.op == Op::ToF;
    inst = Inst{isFloatResult ? Op::ConstF : Op::Const, -1, -1, -1, *k};
  }
  auto key = std::make_tuple(int(inst.op), inst.a, inst.b, inst.c, inst.imm);
  auto it = cse_.find(key);
  if (it != cse_.end()) return SVal{it->second};
  const int id = int(recipe_.shapes.insts.size());
  recipe_.shapes.insts.push_back(inst);
  known_.push_back(k);
  cse_.emplace(key, id);
  return SVal{id};
}

SVal DispatchBuilder::c(int64_t v) { return emit(Inst{Op::Const, -1, -1, -1, v}); }
SVal DispatchBuilder::cf(double v) {
  return emit(Inst{Op::ConstF, -1, -1, -1, std::bit_cast<int64_t>(v)});
}

SVal DispatchBuilder::dim(int input, int axis) {
  const Value *v = this->input(input);
  if (v && v->type().isTensor() && v->type().shape().rankKnown && axis < v->type().shape().rank()) {
    const Dim &d = v->type().shape().dims[size_t(axis)];
    if (d.isStatic()) return c(d.value());
  }
  return emit(Inst{Op::Dim, input, axis, -1, 0});
}

std::vector<SVal> DispatchBuilder::dims(int input) {
  std::vector<SVal> out;
  for (int a = 0; a < inputRank(input); ++a) out.push_back(dim(input, a));
  return out;
}

SVal DispatchBuilder::numel(int input) {
  if (inputRank(input) >= 0) return product(dims(input));
  return emit(Inst{Op::Numel, input, -1, -1, 0});
}
SVal DispatchBuilder::present(int input) { return c(this->input(input) ? 1 : 0); }

SVal DispatchBuilder::rank(int input) {
  if (inputRank(input) >= 0) return c(inputRank(input));
  return emit(Inst{Op::Rank, input, -1, -1, 0});
}

SVal DispatchBuilder::dimFromEnd(int input, int k) {
  const int r = inputRank(input);
  if (r >= 0) return k < r ? dim(input, r - 1 - k) : c(1);
  return emit(Inst{Op::DimFromEnd, input, k, -1, 0});
}
SVal DispatchBuilder::elem(int input, SVal index) {
  return emit(Inst{Op::Elem, input, index.id, -1, 0});
}
SVal DispatchBuilder::elemF(int input, SVal index) {
  return emit(Inst{Op::ElemF, input, index.id, -1, 0});
}

#define KILN_BINARY(name, OP)                                                                      \
  SVal DispatchBuilder::name(SVal a, SVal b) { return emit(Inst{Op::OP, a.id, b.id, -1, 0}); }
KILN_BINARY(add, Add)
KILN_BINARY(sub, Sub)
KILN_BINARY(mul, Mul)
KILN_BINARY(floorDiv, FloorDiv)
KILN_BINARY(floorMod, FloorMod)
KILN_BINARY(min, Min)
KILN_BINARY(max, Max)
KILN_BINARY(lt, Lt)
KILN_BINARY(le, Le)
KILN_BINARY(eq, Eq)
KILN_BINARY(ne, Ne)
KILN_BINARY(land, And)
KILN_BINARY(lor, Or)
KILN_BINARY(fadd, FAdd)
KILN_BINARY(fsub, FSub)
KILN_BINARY(fmul, FMul)
KILN_BINARY(fdiv, FDiv)
KILN_BINARY(flt, FLt)
#undef KILN_BINARY

SVal DispatchBuilder::lnot(SVal a) { return emit(Inst{Op::Not, a.id, -1, -1, 0}); }
SVal DispatchBuilder::ffloor(SVal a) { return emit(Inst{Op::FFloor, a.id, -1, -1, 0}); }
SVal DispatchBuilder::fceil(SVal a) { return emit(Inst{Op::FCeil, a.id, -1, -1, 0}); }
SVal DispatchBuilder::toF(SVal a) { return emit(Inst{Op::ToF, a.id, -1, -1, 0}); }
SVal DispatchBuilder::toI(SVal a) { return emit(Inst{Op::ToI, a.id, -1, -1, 0}); }
SVal DispatchBuilder::select(SVal cond, SVal a, SVal b) {
  if (auto k = constant(cond)) return *k ? a : b;
  return emit(Inst{Op::Select, cond.id, a.id, b.id, 0});
}
SVal DispatchBuilder::ceilDiv(SVal a, SVal b) {
  return floorDiv(add(a, sub(b, c(1))), b);
}

SVal DispatchBuilder::product(const std::vector<SVal> &values) {
  SVal p = c(1);
  for (SVal v : values) p = mul(p, v);
  return p;
}

std::optional<int64_t> DispatchBuilder::constant(SVal v) const {
  if (!v.valid()) return std::nullopt;
  return known_[size_t(v.id)];
}
std::optional<double> DispatchBuilder::constantF(SVal v) const {
  auto k = constant(v);
  if (!k) return std::nullopt;
  return std::bit_cast<double>(*k);
}

void DispatchBuilder::check(SVal cond, std::string message, std::vector<SVal> args) {
  if (auto k = constant(cond); k && *k) return;
  runtime::ShapeProgram::Check ch;
  ch.value = cond.id;
  ch.message = std::move(message);
  for (SVal a : args) ch.args.push_back(a.id);
  recipe_.shapes.checks.push_back(std::move(ch));
}

// ---- buffers ------------------------------------------------------------------------

void DispatchBuilder::setOutput(int i, std::vector<SVal> dims, std::optional<DType> dtype) {
  assert(kernels_.empty() && !kernel_ && "outputs are declared before the kernels");
  cpu::DispatchRecipe::Output &o = recipe_.outputs[size_t(i)];
  o.dtype = dtype.value_or(outputType(i));
  o.dims.clear();
  for (SVal d : dims) o.dims.push_back(d.id);
  outputSet_[size_t(i)] = true;
}

void DispatchBuilder::setOutputOfRank(int i, std::vector<SVal> dims, SVal rank) {
  setOutput(i, std::move(dims));
  recipe_.outputs[size_t(i)].rank = rank.id;
}

int DispatchBuilder::addScratch(DType dtype, SVal numel) {
  assert(kernels_.empty() && !kernel_ && "scratch is declared before the kernels");
  recipe_.scratch.push_back({dtype, numel.id});
  return int(recipe_.scratch.size()) - 1;
}

int DispatchBuilder::statusCode(std::string message) {
  assert(kernels_.empty() && !kernel_ && "status codes are declared before the kernels");
  recipe_.statusMessages.push_back(std::move(message)); // the step prefixes its label
  hasStatus_ = true;
  return int(recipe_.statusMessages.size());
}

// ---- kernels ------------------------------------------------------------------------

kir::KernelBuilder &DispatchBuilder::beginKernel(SVal extent, SVal work) {
  assert(!kernel_);
  kernel_.emplace(name_ + "_" + std::to_string(kernels_.size()));
  kernelParams_.clear();
  kernelParamValues_.clear();
  for (int i = 0; i < numInputs_; ++i) kernel_->addBuffer("in" + std::to_string(i), inputType(i), false);
  for (int i = 0; i < numOutputs_; ++i)
    kernel_->addBuffer("out" + std::to_string(i), recipe_.outputs[size_t(i)].dtype, true);
  for (size_t j = 0; j < recipe_.scratch.size(); ++j)
    kernel_->addBuffer("scratch" + std::to_string(j), recipe_.scratch[j].dtype, true);
  if (hasStatus_) kernel_->addBuffer("status", DType::I64, true);
  cpu::DispatchRecipe::Launch launch;
  launch.extent = extent.id;
  launch.work = work.id;
  recipe_.launches.push_back(launch);
  return *kernel_;
}

void DispatchBuilder::endKernel() {
  assert(kernel_);
  kir::Kernel k = kernel_->finish();
  recipe_.launches.back().params = kernelParamValues_;
  recipe_.launches.back().symbol = k.name;
  kernels_.push_back(std::move(k));
  kernel_.reset();
}

int DispatchBuilder::param(SVal v) {
  assert(kernel_ && v.valid());
  auto it = kernelParams_.find(v.id);
  if (it != kernelParams_.end()) return it->second;
  const int p = kernel_->addParam("p" + std::to_string(v.id));
  kernelParams_.emplace(v.id, p);
  kernelParamValues_.push_back(v.id);
  return p;
}

kir::Affine &DispatchBuilder::addTerm(kir::Affine &a, SVal v, int loopVar, int64_t coeff) {
  if (auto k = constant(v)) {
    if (*k != 0 && coeff != 0) a.add(coeff * *k, -1, loopVar);
    return a;
  }
  a.add(coeff, param(v), loopVar);
  return a;
}

int DispatchBuilder::value(SVal v) {
  if (auto k = constant(v)) return kernel_->intConstant(DType::I64, *k);
  return kernel_->index(kir::Affine::param(param(v)));
}

int DispatchBuilder::loop(SVal upper, kir::Schedule schedule) {
  kir::Affine bound;
  addTerm(bound, upper);
  return kernel_->beginLoop(std::move(bound), schedule);
}

void DispatchBuilder::raise(int cond, int code) {
  kernel_->beginIf(cond);
  kernel_->store(status(), kir::Affine{}, kernel_->intConstant(DType::I64, code));
  kernel_->endIf();
}

Expected<LoweredDispatch> DispatchBuilder::finish() {
  if (kernel_) return makeError(node_.describe(), ": a kernel was not ended");
  for (int i = 0; i < numOutputs_; ++i)
    if (!outputSet_[size_t(i)]) return makeError(node_.describe(), ": output ", i, " has no shape");
  LoweredDispatch out;
  out.recipe = std::move(recipe_);
  out.kernels = std::move(kernels_);
  return out;
}

std::string printShapeProgram(const runtime::ShapeProgram &p) {
  std::string out;
  for (size_t i = 0; i < p.insts.size(); ++i) {
    const runtime::ShapeProgram::Inst &in = p.insts[i];
    out += "%" + std::to_string(i) + " = " + opName(in.op);
    switch (in.op) {
    case Op::Const: out += " " + std::to_string(in.imm); break;
    case Op::ConstF: out += " " + std::to_string(asF(in.imm)); break;
    case Op::Dim: out += " in" + std::to_string(in.a) + "[" + std::to_string(in.b) + "]"; break;
    case Op::Numel: case Op::Present: case Op::Rank: out += " in" + std::to_string(in.a); break;
    case Op::DimFromEnd:
      out += " in" + std::to_string(in.a) + "[-" + std::to_string(in.b + 1) + "]";
      break;
    case Op::Elem: case Op::ElemF:
      out += " in" + std::to_string(in.a) + "[%" + std::to_string(in.b) + "]";
      break;
    default: {
      const int32_t operands[] = {in.a, in.b, in.c};
      for (int k = 0; k < valueOperands(in.op); ++k)
        out += (k ? ", %" : " %") + std::to_string(operands[k]);
    }
    }
    out += "\n";
  }
  for (const runtime::ShapeProgram::Check &c : p.checks)
    out += "check %" + std::to_string(c.value) + " \"" + c.message + "\"\n";
  return out;
}


int castToIndex(kir::KernelBuilder &b, DType from, int value) {
  return from == DType::I64 ? value : b.cast(DType::I64, from, value);
}

} // namespace kiln::lower
