#include "runtime/shape_program.h"

#include <bit>
#include <cmath>
#include <limits>

namespace kiln::runtime {

namespace {

using Op = ShapeProgram::Op;

double asF(int64_t v) { return std::bit_cast<double>(v); }
int64_t ofF(double v) { return std::bit_cast<int64_t>(v); }

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

bool readsInput(Op op) {
  return op == Op::Dim || op == Op::Numel || op == Op::Present || op == Op::Rank ||
         op == Op::DimFromEnd || op == Op::Elem ||
         op == Op::ElemF;
}

// Wrapping arithmetic: sizes never come near 2^63, and a wrapped value
// from a corrupt input is caught by the checks and the allocation limits.
int64_t wrapAdd(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t wrapSub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t wrapMul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }


} // namespace

Status ShapeProgram::validate(size_t numInputs) const {
  for (size_t i = 0; i < insts.size(); ++i) {
    const Inst &in = insts[i];
    if (in.op >= Op::Count) return makeError("shape program: unknown opcode at value ", i);
    const int n = valueOperands(in.op);
    const int32_t operands[] = {in.a, in.b, in.c};
    const bool elem = in.op == Op::Elem || in.op == Op::ElemF;
    for (int k = 0; k < n; ++k) {
      const int32_t v = elem ? in.b : operands[k];
      if (v < 0 || size_t(v) >= i) return makeError("shape program: value ", i, " reads value ", v);
    }
    if (readsInput(in.op) && (in.a < 0 || size_t(in.a) >= numInputs))
      return makeError("shape program: value ", i, " reads input ", in.a);
    if ((in.op == Op::Dim || in.op == Op::DimFromEnd) && (in.b < 0 || in.b > 64))
      return makeError("shape program: value ", i, " reads axis ", in.b);
  }
  for (const Check &c : checks) {
    if (c.value < 0 || size_t(c.value) >= insts.size())
      return makeError("shape program: a check reads value ", c.value);
    for (int a : c.args)
      if (a < 0 || size_t(a) >= insts.size())
        return makeError("shape program: a check prints value ", a);
  }
  return Status::success();
}

Status ShapeProgram::run(const std::vector<const Tensor *> &inputs,
                         std::vector<int64_t> &values) const {
  values.resize(insts.size());
  auto input = [&](int32_t a) -> Expected<const Tensor *> {
    const Tensor *t = inputs[size_t(a)];
    if (!t) return makeError("input ", a, " is required here but not given");
    return t;
  };
  for (size_t i = 0; i < insts.size(); ++i) {
    const Inst &in = insts[i];
    const int64_t a = valueOperands(in.op) > 0 && in.op != Op::Elem && in.op != Op::ElemF
                          ? values[size_t(in.a)] : 0;
    const int64_t b = valueOperands(in.op) > 1 ? values[size_t(in.b)] : 0;
    int64_t &r = values[i];
    switch (in.op) {
    case Op::Const: case Op::ConstF: r = in.imm; break;
    case Op::Dim: {
      KILN_ASSIGN_OR_RETURN(const Tensor *t, input(in.a));
      if (in.b >= t->rank())
        return makeError("input ", in.a, " has rank ", t->rank(), ", expected more than ", in.b);
      r = t->dim(in.b);
      break;
    }
    case Op::Numel: {
      KILN_ASSIGN_OR_RETURN(const Tensor *t, input(in.a));
      r = t->numel();
      break;
    }
    case Op::Present: r = inputs[size_t(in.a)] != nullptr; break;
    case Op::Rank: {
      KILN_ASSIGN_OR_RETURN(const Tensor *t, input(in.a));
      r = t->rank();
      break;
    }
    case Op::DimFromEnd: {
      KILN_ASSIGN_OR_RETURN(const Tensor *t, input(in.a));
      r = in.b < t->rank() ? t->dim(t->rank() - 1 - in.b) : 1;
      break;
    }
    case Op::Elem: case Op::ElemF: {
      KILN_ASSIGN_OR_RETURN(const Tensor *t, input(in.a));
      const int64_t at = values[size_t(in.b)];
      if (at < 0 || at >= t->numel())
        return makeError("input ", in.a, " has ", t->numel(), " elements; element ", at,
                         " is needed");
      if (t->dtype() == DType::String) return makeError("input ", in.a, " holds strings");
      if (in.op == Op::ElemF) {
        r = ofF(t->getDouble(at));
      } else if (isFloat(t->dtype())) {
        const double d = t->getDouble(at);
        if (!(std::fabs(d) < 9.2e18)) return makeError("input ", in.a, " holds ", d, ", not a size");
        r = static_cast<int64_t>(d);
      } else {
        r = t->getInt(at);
      }
      break;
    }
    case Op::Add: r = wrapAdd(a, b); break;
    case Op::Sub: r = wrapSub(a, b); break;
    case Op::Mul: r = wrapMul(a, b); break;
    case Op::FloorDiv: case Op::FloorMod: {
      if (b == 0) return makeError("division by zero in a shape computation");
      if (a == std::numeric_limits<int64_t>::min() && b == -1) {
        r = in.op == Op::FloorDiv ? a : 0;
        break;
      }
      int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) --q, m += b;
      r = in.op == Op::FloorDiv ? q : m;
      break;
    }
    case Op::Min: r = std::min(a, b); break;
    case Op::Max: r = std::max(a, b); break;
    case Op::Lt: r = a < b; break;
    case Op::Le: r = a <= b; break;
    case Op::Eq: r = a == b; break;
    case Op::Ne: r = a != b; break;
    case Op::And: r = a != 0 && b != 0; break;
    case Op::Or: r = a != 0 || b != 0; break;
    case Op::Not: r = a == 0; break;
    case Op::Select: r = a != 0 ? b : values[size_t(in.c)]; break;
    case Op::FAdd: r = ofF(asF(a) + asF(b)); break;
    case Op::FSub: r = ofF(asF(a) - asF(b)); break;
    case Op::FMul: r = ofF(asF(a) * asF(b)); break;
    case Op::FDiv: r = ofF(asF(a) / asF(b)); break;
    case Op::FFloor: r = ofF(std::floor(asF(a))); break;
    case Op::FCeil: r = ofF(std::ceil(asF(a))); break;
    case Op::FLt: r = asF(a) < asF(b); break;
    case Op::ToF: r = ofF(static_cast<double>(a)); break;
    case Op::ToI: {
      const double d = asF(a);
      if (!(std::fabs(d) < 9.2e18)) return makeError("the size ", d, " is not a finite integer");
      r = static_cast<int64_t>(d);
      break;
    }
    case Op::Count: return makeError("shape program: unknown opcode");
    }
  }
  for (const Check &c : checks) {
    if (values[size_t(c.value)] != 0) continue;
    std::string message;
    size_t arg = 0;
    for (size_t k = 0; k < c.message.size(); ++k) {
      if (c.message.compare(k, 2, "{}") == 0 && arg < c.args.size()) {
        message += std::to_string(values[size_t(c.args[arg++])]);
        ++k;
      } else {
        message += c.message[k];
      }
    }
    return makeError(message);
  }
  return Status::success();
}

} // namespace kiln::runtime
