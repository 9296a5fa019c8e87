// The Kernel IR printer: one pass over the kernel, appending to a string.
// Every index into the kernel's tables is checked, because invalid kernels
// are dumped too (a verifier failure prints the kernel at fault).
#include "kernel/printer.h"

#include <charconv>
#include <cmath>
#include <cstdint>

namespace kiln {
namespace {

using kir::Affine;
using kir::Inst;
using kir::Kernel;
using kir::Opcode;
using kir::Schedule;

// Shortest text that reads back to the same F, always with a '.' or an
// exponent so it reads as a float: 1.0, 0.1, 1e-05, -0.0.
template <class F> std::string shortestFloat(F v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Shortest text that reads back to the same 16-bit float H: "0.1" for the
// f16 nearest 0.1 (0.0999755859375), as for f32.
template <class H> std::string shortestHalf(H h) {
  float exact = static_cast<float>(h);
  for (int precision = 1; precision <= 9; ++precision) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), exact, std::chars_format::general, precision);
    float candidate = 0;
    std::from_chars(buf, r.ptr, candidate);
    if (H(candidate).bits == h.bits) return shortestFloat(candidate);
  }
  return shortestFloat(exact);
}

// The constant as a value of its type: an f32 constant built from the double
// 0.1 prints as 0.1 (the float the kernel uses), not 0.10000000000000001.
// NaN payloads are not kept: a kernel constant has no use for them.
std::string floatConstText(DType type, double v) {
  double rounded = type == DType::F64 ? v : static_cast<float>(v);
  if (type == DType::F16) rounded = static_cast<float>(Half(static_cast<float>(v)));
  if (type == DType::BF16) rounded = static_cast<float>(BFloat16(static_cast<float>(v)));
  if (std::isnan(rounded)) return "nan";
  if (std::isinf(rounded)) return rounded < 0 ? "-inf" : "inf";
  switch (type) {
  case DType::F64:
    return shortestFloat(v);
  case DType::F16:
    return shortestHalf(Half(static_cast<float>(v)));
  case DType::BF16:
    return shortestHalf(BFloat16(static_cast<float>(v)));
  default:
    return shortestFloat(static_cast<float>(v));
  }
}

std::string intConstText(DType type, int64_t v) {
  if (type == DType::Bool && (v == 0 || v == 1)) return v ? "true" : "false";
  // u64 constants above 2^63 are stored as negative int64 (the same bits).
  if (type == DType::U64) return std::to_string(static_cast<uint64_t>(v));
  return std::to_string(v);
}

class Printer {
public:
  explicit Printer(const Kernel &k) : k_(k) {}

  std::string kernel() {
    out_ += "kernel @" + k_.name + "(";
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const kir::BufferArg &b = k_.buffers[i];
      out_ += (i ? ", %" : "%") + b.name + ": " + std::string(dtypeName(b.dtype));
      if (b.output) out_ += " out";
    }
    out_ += ")";
    // Empty lists are left out: one spelling per kernel.
    if (!k_.params.empty()) {
      out_ += " params(";
      for (size_t i = 0; i < k_.params.size(); ++i) out_ += (i ? ", %" : "%") + k_.params[i];
      out_ += ")";
    }
    if (!k_.vars.empty()) {
      out_ += " vars(";
      for (size_t i = 0; i < k_.vars.size(); ++i)
        out_ +=
            (i ? ", %" : "%") + k_.vars[i].name + ": " + std::string(dtypeName(k_.vars[i].dtype));
      out_ += ")";
    }
    out_ += " {\n";
    for (const Inst &i : k_.body) inst(i, 1);
    out_ += "}\n";
    return std::move(out_);
  }

private:
  template <class T> static bool inRange(const std::vector<T> &v, int i) {
    return i >= 0 && static_cast<size_t>(i) < v.size();
  }
  static std::string bad(const char *what, int64_t i) {
    return "%<bad " + std::string(what) + " " + std::to_string(i) + ">";
  }

  std::string param(int p) const {
    return inRange(k_.params, p) ? "%" + k_.params[p] : bad("param", p);
  }
  std::string buffer(int b) const {
    return inRange(k_.buffers, b) ? "%" + k_.buffers[b].name : bad("buffer", b);
  }
  std::string var(int v) const {
    return inRange(k_.vars, v) ? "%" + k_.vars[v].name : bad("var", v);
  }
  static std::string loopVar(int v) {
    return v >= 0 ? "%i" + std::to_string(v) : bad("loop var", v);
  }
  static std::string value(int v) { return v >= 0 ? "%" + std::to_string(v) : bad("value", v); }
  static std::string operand(const Inst &i, size_t n) {
    return n < i.operands.size() ? value(i.operands[n]) : "%<missing operand>";
  }
  static std::string type(DType t) { return std::string(dtypeName(t)); }

  // coeff * %loopvar * %param, leaving out a coefficient of 1 unless it is
  // the whole term; terms are joined by " + " (a negative coefficient keeps
  // its sign: `%i0 + -1`), and no terms is `0`.
  // A load's or store's index: the affine part, then the dynamic value as a
  // last term (`%i0 * %n + %7`; `%7` alone when the affine part is empty).
  std::string index(const Inst &i) const {
    if (i.dynIndex < 0) return affine(i.index);
    if (i.index.terms.empty()) return value(i.dynIndex);
    return affine(i.index) + " + " + value(i.dynIndex);
  }

  std::string affine(const Affine &a) const {
    if (a.terms.empty()) return "0";
    std::string s;
    for (size_t t = 0; t < a.terms.size(); ++t) {
      const kir::Term &term = a.terms[t];
      std::string factors;
      auto factor = [&](const std::string &f) { factors += (factors.empty() ? "" : " * ") + f; };
      bool hasVar = term.loopVar != -1, hasParam = term.param != -1;
      if (term.coeff != 1 || (!hasVar && !hasParam)) factor(std::to_string(term.coeff));
      if (hasVar) factor(loopVar(term.loopVar));
      if (hasParam) factor(param(term.param));
      s += (t ? " + " : "") + factors;
    }
    return s;
  }

  void inst(const Inst &i, int depth) {
    out_.append(2 * static_cast<size_t>(depth), ' ');
    switch (i.op) {
    case Opcode::Loop:
      out_ += scheduleText(i.schedule) + " " + loopVar(i.loopVar) + " = 0 to " + affine(i.upper) +
              " {\n";
      for (const Inst &b : i.body) inst(b, depth + 1);
      out_.append(2 * static_cast<size_t>(depth), ' ');
      out_ += "}\n";
      return;
    case Opcode::If:
      out_ += "if " + operand(i, 0) + " {\n";
      for (const Inst &b : i.body) inst(b, depth + 1);
      out_.append(2 * static_cast<size_t>(depth), ' ');
      out_ += "}\n";
      return;
    case Opcode::Store:
      out_ += "store " + buffer(i.buffer) + "[" + index(i) + "], " + operand(i, 0) + "\n";
      return;
    case Opcode::VarWrite:
      out_ += "write " + var(i.var) + ", " + operand(i, 0) + "\n";
      return;
    default:
      break;
    }
    out_ += value(i.result) + " = " + kir::opcodeName(i.op) + " ";
    if (i.op == Opcode::Const) {
      out_ += isFloat(i.type) ? floatConstText(i.type, i.fimm) : intConstText(i.type, i.iimm);
      out_ += " : " + type(i.type);
    } else if (i.op == Opcode::Load) {
      out_ += buffer(i.buffer) + "[" + index(i) + "]";
    } else if (i.op == Opcode::Index) {
      out_ += affine(i.index);
    } else if (i.op == Opcode::VarRead) {
      out_ += var(i.var);
    } else if (i.op == Opcode::Cast) {
      out_ += operand(i, 0) + " : " + type(i.castFrom) + " to " + type(i.type);
    } else {
      // Unary, binary, compare (typed by its operands) and select.
      size_t n = kir::isUnary(i.op) ? 1 : i.op == Opcode::Select ? 3 : 2;
      for (size_t k = 0; k < n; ++k) out_ += (k ? ", " : "") + operand(i, k);
      out_ += " : " + type(kir::isCompare(i.op) ? i.castFrom : i.type);
    }
    out_ += "\n";
  }

  const Kernel &k_;
  std::string out_;
};

} // namespace

bool isKernelIrName(std::string_view s) {
  auto start = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (s.empty() || !start(s[0])) return false;
  bool allDigitsAfterI = s[0] == 'i' && s.size() > 1;
  for (size_t k = 1; k < s.size(); ++k) {
    if (!start(s[k]) && !digit(s[k]) && s[k] != '.') return false;
    allDigitsAfterI &= digit(s[k]);
  }
  return !allDigitsAfterI;
}

std::string scheduleText(const Schedule &s) {
  switch (s.kind) {
  case Schedule::Kind::Serial:
    return "for";
  case Schedule::Kind::Parallel:
    return "parallel";
  case Schedule::Kind::Vector:
    return "vector(" + std::to_string(s.width) + ")";
  case Schedule::Kind::Unroll:
    return "unroll(" + std::to_string(s.width) + ")";
  }
  return "<bad schedule>";
}

std::string printKernel(const kir::Kernel &kernel) {
  return Printer(kernel).kernel();
}

std::string printKernels(const std::vector<kir::Kernel> &kernels) {
  std::string s;
  for (size_t i = 0; i < kernels.size(); ++i) s += (i ? "\n" : "") + printKernel(kernels[i]);
  return s;
}

} // namespace kiln
