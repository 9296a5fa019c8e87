// The Kernel IR verifier: one walk over the body in program order, keeping
// which SSA values and loop variables are visible at each point (the rules
// are listed in kernel/verifier.h). Nothing here trusts an index in the
// kernel before checking it, so any kernel, however broken, gets an error
// rather than a crash.
#include "kernel/verifier.h"

#include "kernel/printer.h"

#include <limits>
#include <type_traits>
#include <unordered_set>

namespace kiln {
namespace {

using kir::Affine;
using kir::Inst;
using kir::Kernel;
using kir::Opcode;
using kir::Schedule;

// Where a number stands at the current point of the walk.
enum class Seen : uint8_t { Never, Visible, Gone };

std::string typeName(DType t) {
  return std::string(dtypeName(t));
}

bool isFloatOnly(Opcode op) {
  return (op >= Opcode::Exp && op <= Opcode::Atanh) || op == Opcode::Pow;
}
bool isNumericOnly(Opcode op) {
  return op == Opcode::Neg || op == Opcode::Abs || (op >= Opcode::Add && op <= Opcode::Min) ||
         (op >= Opcode::Lt && op <= Opcode::Ge);
}
bool isBitwise(Opcode op) {
  return op == Opcode::Not || op == Opcode::And || op == Opcode::Or || op == Opcode::Xor;
}
bool isShift(Opcode op) { return op == Opcode::Shl || op == Opcode::Shr; }

// The range of an integer type's values, as int64 (u64 takes any bits).
bool fitsType(DType t, int64_t v) {
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  visitDType(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && sizeof(T) < 8) {
      lo = std::numeric_limits<T>::min();
      hi = std::numeric_limits<T>::max();
    }
  });
  if (t == DType::Bool) lo = 0, hi = 1;
  return v >= lo && v <= hi;
}

size_t operandCount(Opcode op) {
  if (op == Opcode::Const || op == Opcode::Load || op == Opcode::VarRead || op == Opcode::Loop ||
      op == Opcode::Index)
    return 0;
  if (isBinary(op) || isCompare(op)) return 2;
  return op == Opcode::Select ? 3 : 1;
}

class Verifier {
public:
  explicit Verifier(const Kernel &k) : k_(k) {}

  Status run() {
    KILN_RETURN_IF_ERROR(signature());
    values_.assign(static_cast<size_t>(k_.numValues), Seen::Never);
    types_.assign(static_cast<size_t>(k_.numValues), DType::F32);
    loopVars_.assign(static_cast<size_t>(k_.numLoopVars), Seen::Never);
    for (const Inst &i : k_.body)
      hasParallel_ |= i.op == Opcode::Loop && i.schedule.kind == Schedule::Kind::Parallel;
    return block(k_.body, 0, false);
  }

private:
  template <class T> static bool inRange(const std::vector<T> &v, int i) {
    return i >= 0 && static_cast<size_t>(i) < v.size();
  }

  Error fail(const std::string &message) const {
    return makeError("kernel '", k_.name, "': ", message);
  }
  Error fail(const Inst &i, const std::string &message) const {
    return fail(label(i) + ": " + message);
  }

  // How an instruction is named in errors: "%5 = add", "store %y", "for %i0".
  std::string label(const Inst &i) const {
    switch (i.op) {
    case Opcode::Loop:
      return scheduleText(i.schedule) + " %i" + std::to_string(i.loopVar);
    case Opcode::If:
      return "if";
    case Opcode::Store:
      return "store" + (inRange(k_.buffers, i.buffer) ? " %" + k_.buffers[i.buffer].name : "");
    case Opcode::VarWrite:
      return "write" + (inRange(k_.vars, i.var) ? " %" + k_.vars[i.var].name : "");
    default:
      return "%" + std::to_string(i.result) + " = " + kir::opcodeName(i.op);
    }
  }

  // ---- Signature (rule 1) ----

  Status signature() {
    if (!isKernelIrName(k_.name))
      return fail("the kernel's name is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not "
                  "i<digits>)");
    std::unordered_set<std::string> names;
    auto declare = [&](const std::string &name, const char *what) -> Status {
      if (!isKernelIrName(name))
        return fail(strCat(what, " name '", name,
                           "' is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not i<digits>)"));
      if (!names.insert(name).second) return fail("name %" + name + " is declared twice");
      return Status::success();
    };
    for (const kir::BufferArg &b : k_.buffers) {
      KILN_RETURN_IF_ERROR(declare(b.name, "buffer"));
      if (b.dtype == DType::String) return fail("buffer %" + b.name + " has type string");
    }
    for (const std::string &p : k_.params) KILN_RETURN_IF_ERROR(declare(p, "param"));
    for (const kir::VarDecl &v : k_.vars) {
      KILN_RETURN_IF_ERROR(declare(v.name, "var"));
      if (v.dtype == DType::String) return fail("var %" + v.name + " has type string");
    }
    if (k_.numValues < 0 || k_.numValues > kMaxKernelNumbers)
      return fail(strCat("has ", k_.numValues, " values; expected 0 to ", kMaxKernelNumbers));
    if (k_.numLoopVars < 0 || k_.numLoopVars > kMaxKernelNumbers)
      return fail(
          strCat("has ", k_.numLoopVars, " loop variables; expected 0 to ", kMaxKernelNumbers));
    return Status::success();
  }

  // ---- Body (rules 2 and 3) ----

  Status block(const std::vector<Inst> &body, int depth, bool inParallel) {
    for (const Inst &i : body) {
      if (i.op == Opcode::Loop)
        KILN_RETURN_IF_ERROR(loop(i, depth, inParallel));
      else if (i.op == Opcode::If)
        KILN_RETURN_IF_ERROR(conditional(i, depth, inParallel));
      else
        KILN_RETURN_IF_ERROR(inst(i, inParallel));
    }
    return Status::success();
  }

  // An if is a scope like a loop's body (its values are not visible after
  // it) and counts as nesting, so a parallel loop cannot hide inside one.
  Status conditional(const Inst &i, int depth, bool inParallel) {
    if (i.result != -1) return fail(i, "an if has no result");
    if (i.operands.size() != 1) return fail(i, strCat("has ", i.operands.size(), " operands, expected 1"));
    KILN_RETURN_IF_ERROR(expectOperand(i, 0, DType::Bool));
    size_t mark = scope_.size();
    KILN_RETURN_IF_ERROR(block(i.body, depth + 1, inParallel));
    for (size_t s = mark; s < scope_.size(); ++s) values_[scope_[s]] = Seen::Gone;
    scope_.resize(mark);
    return Status::success();
  }

  Status loop(const Inst &i, int depth, bool inParallel) {
    if (i.result != -1) return fail(i, "a loop has no result");
    if (!i.operands.empty()) return fail(i, "a loop has no operands");
    if (!inRange(loopVars_, i.loopVar))
      return fail(i, strCat("loop variable %i", i.loopVar, " is out of range (the kernel has ",
                            k_.numLoopVars, ")"));
    if (loopVars_[i.loopVar] != Seen::Never)
      return fail(i, strCat("loop variable %i", i.loopVar, " is defined twice"));
    using K = Schedule::Kind;
    K kind = i.schedule.kind;
    if (kind != K::Serial && kind != K::Parallel && kind != K::Vector && kind != K::Unroll)
      return fail(i, "unknown schedule");
    bool widthed = kind == K::Vector || kind == K::Unroll;
    if (widthed && i.schedule.width < 1)
      return fail(i, strCat("width ", i.schedule.width, " is less than 1"));
    if (!widthed && i.schedule.width != 1)
      return fail(i, strCat("width ", i.schedule.width, " on a loop without one (expected 1)"));
    if (kind == K::Parallel && depth != 0)
      return fail(i, "a parallel loop must be at the top level");
    if (kind == K::Parallel && parallelSeen_)
      return fail(i, "a kernel has at most one parallel loop");
    parallelSeen_ |= kind == K::Parallel;
    if (!vectorLoops_.empty())
      return fail(i, strCat("a loop inside vector loop %i", vectorLoops_.back(),
                            " (a vector loop is innermost)"));
    KILN_RETURN_IF_ERROR(affine(i, i.upper, "upper bound", false));

    // The loop's scope: its variable and the values its body defines.
    loopVars_[i.loopVar] = Seen::Visible;
    size_t mark = scope_.size();
    if (kind == K::Vector) vectorLoops_.push_back(i.loopVar);
    KILN_RETURN_IF_ERROR(block(i.body, depth + 1, inParallel || kind == K::Parallel));
    if (kind == K::Vector) vectorLoops_.pop_back();
    for (size_t s = mark; s < scope_.size(); ++s) values_[scope_[s]] = Seen::Gone;
    scope_.resize(mark);
    loopVars_[i.loopVar] = Seen::Gone;
    return Status::success();
  }

  Status affine(const Inst &i, const Affine &a, const char *what, bool allowLoopVars) const {
    for (const kir::Term &t : a.terms) {
      if (t.param != -1 && !inRange(k_.params, t.param))
        return fail(
            i, strCat(what, " uses param ", t.param, ", but the kernel has ", k_.params.size()));
      if (t.loopVar == -1) continue;
      std::string v = strCat("loop variable %i", t.loopVar);
      if (!allowLoopVars)
        return fail(i, strCat(what, " uses ", v, "; loop bounds use params only"));
      if (!inRange(loopVars_, t.loopVar) || loopVars_[t.loopVar] != Seen::Visible)
        return fail(i, strCat(what, " uses ", v, " outside its loop"));
    }
    return Status::success();
  }

  // The type of operand n, which must be visible here.
  Expected<DType> operand(const Inst &i, size_t n) const { return valueType(i, i.operands[n]); }
  Expected<DType> valueType(const Inst &i, int v) const {
    if (!inRange(values_, v) || values_[v] == Seen::Never)
      return fail(i, strCat("operand %", v, " is not defined before its use"));
    if (values_[v] == Seen::Gone)
      return fail(i, strCat("operand %", v, " is used outside the loop that defines it"));
    return types_[v];
  }
  Status expectOperand(const Inst &i, size_t n, DType want) const {
    KILN_ASSIGN_OR_RETURN(DType t, operand(i, n));
    if (t != want)
      return fail(i, strCat("operand %", i.operands[n], " has type ", typeName(t), ", expected ",
                            typeName(want)));
    return Status::success();
  }

  Status inst(const Inst &i, bool inParallel) {
    if (i.op > Opcode::Cast) return fail(i, "unknown opcode");
    if (i.dynIndex != -1 && i.op != Opcode::Load && i.op != Opcode::Store)
      return fail(i, "only loads and stores have a dynamic index");
    bool effect = i.op == Opcode::Store || i.op == Opcode::VarWrite;
    if (effect && i.result != -1) return fail(i, strCat("has a result %", i.result));
    if (!effect && !inRange(values_, i.result))
      return fail(i, strCat("result %", i.result, " is out of range (the kernel has ", k_.numValues,
                            " values)"));
    if (!effect && values_[i.result] != Seen::Never)
      return fail(i, strCat("%", i.result, " is defined twice"));
    size_t want = operandCount(i.op);
    if (i.operands.size() != want)
      return fail(i, strCat("has ", i.operands.size(), " operands, expected ", want));
    if (i.type == DType::String ||
        ((isCompare(i.op) || i.op == Opcode::Cast) && i.castFrom == DType::String))
      return fail(i, "type string is not allowed in a kernel");
    KILN_RETURN_IF_ERROR(types(i, inParallel));
    if (!effect) {
      values_[i.result] = Seen::Visible;
      types_[i.result] = i.type;
      scope_.push_back(i.result);
    }
    return Status::success();
  }

  // Rules 4 to 6.
  Status types(const Inst &i, bool inParallel) const {
    switch (i.op) {
    case Opcode::Const:
      if (!isFloat(i.type) && !fitsType(i.type, i.iimm))
        return fail(i, strCat("constant ", i.iimm, " does not fit ", typeName(i.type)));
      return Status::success();
    case Opcode::Load:
    case Opcode::Store: {
      bool store = i.op == Opcode::Store;
      if (!inRange(k_.buffers, i.buffer))
        return fail(i, strCat("buffer ", i.buffer, " is out of range (the kernel has ",
                              k_.buffers.size(), ")"));
      const kir::BufferArg &b = k_.buffers[i.buffer];
      if (i.type != b.dtype)
        return fail(i, strCat("has type ", typeName(i.type), ", but buffer %", b.name, " holds ",
                              typeName(b.dtype)));
      KILN_RETURN_IF_ERROR(affine(i, i.index, "index", true));
      if (i.dynIndex != -1) {
        KILN_ASSIGN_OR_RETURN(DType t, valueType(i, i.dynIndex));
        if (t != DType::I64)
          return fail(i, strCat("dynamic index %", i.dynIndex, " has type ", typeName(t),
                                ", expected i64"));
      }
      if (!store) return Status::success();
      if (!b.output) return fail(i, "buffer %" + b.name + " is an input; stores go to outputs");
      if (hasParallel_ && !inParallel)
        return fail(i, "a store outside the parallel loop (it would run once per chunk)");
      return expectOperand(i, 0, b.dtype);
    }
    case Opcode::VarRead:
    case Opcode::VarWrite: {
      if (!inRange(k_.vars, i.var))
        return fail(
            i, strCat("var ", i.var, " is out of range (the kernel has ", k_.vars.size(), ")"));
      const kir::VarDecl &v = k_.vars[i.var];
      if (i.type != v.dtype)
        return fail(i, strCat("has type ", typeName(i.type), ", but var %", v.name, " is ",
                              typeName(v.dtype)));
      return i.op == Opcode::VarWrite ? expectOperand(i, 0, v.dtype) : Status::success();
    }
    case Opcode::Select:
      KILN_RETURN_IF_ERROR(expectOperand(i, 0, DType::Bool));
      KILN_RETURN_IF_ERROR(expectOperand(i, 1, i.type));
      return expectOperand(i, 2, i.type);
    case Opcode::Cast:
      return expectOperand(i, 0, i.castFrom);
    case Opcode::Index:
      if (i.type != DType::I64) return fail(i, "has type " + typeName(i.type) + ", expected i64");
      return affine(i, i.index, "index", true);
    default:
      break;
    }
    // Unary, binary and compare: operands of one type, checked by class.
    DType t = isCompare(i.op) ? i.castFrom : i.type;
    if (isCompare(i.op) && i.type != DType::Bool)
      return fail(i, "result type is " + typeName(i.type) + ", expected bool");
    if (isFloatOnly(i.op) && !isFloat(t))
      return fail(i, "type " + typeName(t) + " is not a float type");
    if (isNumericOnly(i.op) && !isNumeric(t))
      return fail(i, "type " + typeName(t) + " is not a numeric type");
    if (i.op == Opcode::Mod && !isNumeric(t))
      return fail(i, "type " + typeName(t) + " is not a numeric type");
    if (isBitwise(i.op) && !isInt(t) && t != DType::Bool)
      return fail(i, "type " + typeName(t) + " is not an integer or bool type");
    if (isShift(i.op) && !isInt(t)) return fail(i, "type " + typeName(t) + " is not an integer type");
    for (size_t n = 0; n < i.operands.size(); ++n) KILN_RETURN_IF_ERROR(expectOperand(i, n, t));
    return Status::success();
  }

  const Kernel &k_;
  std::vector<Seen> values_, loopVars_;
  std::vector<DType> types_;
  std::vector<int> scope_;       // values defined in the open loops, in order
  std::vector<int> vectorLoops_; // the open vector loops' variables
  bool hasParallel_ = false, parallelSeen_ = false;
};

} // namespace

Status verifyKernel(const kir::Kernel &kernel) {
  return Verifier(kernel).run();
}

} // namespace kiln
