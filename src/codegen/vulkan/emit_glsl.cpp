#include "codegen/vulkan/emit_glsl.h"

#include "support/erfc_poly.h"
#include "support/half.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace kiln::codegen {

namespace {

using kir::Inst;
using kir::Opcode;

bool isHalfFloat(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

// The GLSL type of a value of `t` in registers (16-bit floats compute in
// f32, kernel_ir.h).
const char *registerType(DType t) {
  switch (t) {
  case DType::F32:
  case DType::F16:
  case DType::BF16:
    return "float";
  case DType::F64:
    return "double";
  case DType::Bool:
    return "bool";
  case DType::I8:
    return "int8_t";
  case DType::U8:
    return "uint8_t";
  case DType::I16:
    return "int16_t";
  case DType::U16:
    return "uint16_t";
  case DType::I32:
    return "int";
  case DType::U32:
    return "uint";
  case DType::I64:
    return "int64_t";
  case DType::U64:
    return "uint64_t";
  default:
    return nullptr;
  }
}

// ... and in a buffer: 16-bit floats as their bits, bool as a byte.
const char *memoryType(DType t) {
  if (isHalfFloat(t)) return "uint16_t";
  return t == DType::Bool ? "uint8_t" : registerType(t);
}

int bitsOf(DType t) {
  return int(dtypeSize(t) * 8);
}

// The GLSL infix operator that computes binary or compare opcode `op` on
// values of `t` exactly, or null (the op needs spelling out).
const char *infixOperator(Opcode op, DType t) {
  const bool logical = t == DType::Bool;
  switch (op) {
  case Opcode::Add:
    return logical ? nullptr : "+";
  case Opcode::Sub:
    return logical ? nullptr : "-";
  case Opcode::Mul:
    return logical ? nullptr : "*";
  case Opcode::Div:
    return isFloat(t) ? "/" : nullptr; // integers never trap: spelled out
  case Opcode::And:
    return isFloat(t) ? nullptr : logical ? "&&" : "&";
  case Opcode::Or:
    return isFloat(t) ? nullptr : logical ? "||" : "|";
  case Opcode::Xor:
    return isFloat(t) ? nullptr : logical ? "^^" : "^";
  case Opcode::Lt:
    return "<";
  case Opcode::Le:
    return "<=";
  case Opcode::Gt:
    return ">";
  case Opcode::Ge:
    return ">=";
  case Opcode::Eq:
    return "==";
  default:
    return nullptr;
  }
}

// Helpers every shader carries (a driver drops the ones it does not call).
// Bit-exact with support/half.h and codegen/cpu's conversions.
constexpr const char *kHelpers = R"(
float kiln_h2f(uint h) {
  uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
  if (e == 0u) { float v = float(m) * (1.0 / 16777216.0); return sign != 0u ? -v : v; }
  return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}
uint kiln_f2h(float f) {
  uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) return sign | (floatBitsToUint(uintBitsToFloat(a) + 0.5) - 0x3f000000u);
  return sign | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13);
}
uint kiln_f2bf(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
float kiln_bf2f(uint b) { return uintBitsToFloat(b << 16); }
float kiln_rh(float x) { return kiln_h2f(kiln_f2h(x)); }
float kiln_rbf(float x) { return kiln_bf2f(kiln_f2bf(x)); }
float kiln_max(float a, float b) { return isnan(a) ? a : isnan(b) ? b : max(a, b); }
float kiln_min(float a, float b) { return isnan(a) ? a : isnan(b) ? b : min(a, b); }
double kiln_max(double a, double b) { return isnan(a) ? a : isnan(b) ? b : max(a, b); }
double kiln_min(double a, double b) { return isnan(a) ? a : isnan(b) ? b : min(a, b); }
float kiln_tanh(float x) { return isnan(x) ? x : tanh(clamp(x, -10.0, 10.0)); }
float kiln_sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }
float kiln_pow(float a, float b) {
  if (b == 0.0 || a == 1.0) return 1.0;
  if (isnan(a) || isnan(b)) return a + b;
  if (b == 1.0) return a;
  if (b == 2.0) return a * a;
  if (b == 0.5 && a >= 0.0) return sqrt(a);
  bool integral = floor(b) == b;
  bool odd = integral && abs(b) < 16777216.0 && (int(mod(abs(b), 2.0)) == 1);
  if (a < 0.0 && !integral && !isinf(b)) return uintBitsToFloat(0x7fc00000u);
  float r = (a == 0.0) ? (b < 0.0 ? uintBitsToFloat(0x7f800000u) : 0.0) : pow(abs(a), b);
  return (a < 0.0 || (a == 0.0 && floatBitsToUint(a) != 0u)) && odd ? -r : r;
}
double kiln_pow(double a, double b) {
  if (b == 0.0 || a == 1.0) return 1.0;
  if (isnan(a) || isnan(b)) return a + b;
  if (abs(b) > 1073741824.0 || a == 0.0 || isinf(a)) return double(kiln_pow(float(a), float(b)));
  // a^b = a^floor(b), by squaring in f64 (exact for integer results to
  // 2^53), times a^fract(b) in f32 (in [min(1, a), max(1, a)]: no overflow).
  double whole = floor(b), r = 1.0, base = a;
  for (uint64_t n = uint64_t(abs(whole)); n != 0ul; n >>= 1) {
    if ((n & 1ul) != 0ul) r *= base;
    base *= base;
  }
  if (whole < 0.0) r = 1.0 / r;
  return whole == b ? r : r * double(kiln_pow(float(a), float(b - whole)));
}
// sin and cos in f64 (GLSL has them for float only): x reduced by pi/2 in
// two parts (fdlibm's split), then Taylor series on [-pi/4, pi/4], whose
// truncation is below 5e-17. DFT and STFT twiddles need this accuracy.
double kiln_sincos_poly(double r, bool wantSin) {
  double r2 = r * r, s = 0.0, c = 0.0;
  s = r * (1.0 + r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0
      + r2 * (-1.0 / 39916800.0 + r2 * (1.0 / 6227020800.0 + r2 * (-1.0 / 1307674368000.0
      + r2 * (1.0 / 355687428096000.0)))))))));
  c = 1.0 + r2 * (-1.0 / 2.0 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0
      + r2 * (-1.0 / 3628800.0 + r2 * (1.0 / 479001600.0 + r2 * (-1.0 / 87178291200.0
      + r2 * (1.0 / 20922789888000.0 + r2 * (-1.0 / 6402373705728000.0)))))))));
  return wantSin ? s : c;
}
double kiln_sincos(double x, bool wantSin) {
  if (isnan(x) || isinf(x)) return isnan(x) ? x : double(uintBitsToFloat(0x7fc00000u));
  double k = roundEven(x * 0.63661977236758134308);
  double r = (x - k * 1.57079632673412561417) - k * 6.07710050650619224932e-11;
  int q = int(int64_t(k) & 3l) + (wantSin ? 0 : 1);
  double v = kiln_sincos_poly(r, (q & 1) == 0);
  return (q & 2) != 0 ? -v : v;
}
float kiln_fmod(float a, float b) { return isinf(b) && !isinf(a) ? a : a - b * trunc(a / b); }
double kiln_fmod(double a, double b) { return isinf(b) && !isinf(a) ? a : a - b * trunc(a / b); }
float kiln_keepnan(float x, float r) { return isnan(x) ? x : r; }
)";

// erf as codegen/cpu/emit_math.cpp computes it.
std::string erfHelper() {
  std::ostringstream s;
  s.precision(17);
  s << "float kiln_erf(float x) {\n"
    << "  float ax = abs(x), x2 = x * x;\n"
    << "  float series = x * 1.1283791670955126 * (1.0 + x2 * (-1.0 / 3.0 + x2 * (1.0 / 10.0 + "
       "x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0 + x2 * (1.0 / 9360.0)))))));\n"
    << "  float t = 1.0 / (1.0 + ax * 0.5);\n"
    << "  float p = " << kErfcPoly[kErfcPolyTerms - 1] << ";\n";
  for (int i = kErfcPolyTerms - 2; i >= 0; --i) s << "  p = fma(p, t, " << kErfcPoly[i] << ");\n";
  s << "  float big = 1.0 - t * exp(p - ax * ax);\n"
    << "  float r = ax < 0.5 ? series : (x < 0.0 ? -big : big);\n"
    << "  return isnan(x) ? x : r;\n"
    << "}\n";
  return s.str();
}

} // namespace

std::string glslHelpers() {
  return kHelpers + erfHelper();
}

namespace {

std::string hex32(uint32_t bits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%08" PRIx32 "u", bits);
  return buf;
}

class Emitter {
public:
  Emitter(const kir::Kernel &k, const gpu::GridPlan &plan) : k_(k), plan_(plan) {}
  Expected<std::string> run();

private:
  Status block(const std::vector<Inst> &insts);
  Status inst(const Inst &i);
  Status loop(const Inst &l);
  Expected<std::string> unary(const Inst &i, const std::string &a);
  Expected<std::string> binary(const Inst &i, const std::string &a, const std::string &b);
  std::string compare(const Inst &i, const std::string &a, const std::string &b) const;
  Expected<std::string> cast(DType from, DType to, const std::string &a);
  std::string constant(const Inst &i) const;
  std::string affine(const kir::Affine &a) const;
  std::string element(const Inst &i) const;
  std::string v(int n) const { return "v" + std::to_string(n); }
  // A statement at the current depth.
  void line(const std::string &text) {
    body_ << std::string(size_t(2 * depth_), ' ') << text << "\n";
  }
  std::string fresh() { return "t" + std::to_string(temps_++); }
  Error unsupported(const Inst &i) const {
    return makeError("kernel '", k_.name, "': vulkan codegen does not support '",
                     kir::opcodeName(i.op), "' on ", dtypeName(i.type));
  }

  const kir::Kernel &k_;
  const gpu::GridPlan &plan_;
  std::ostringstream body_;
  int depth_ = 1;
  int temps_ = 0;
};

Expected<std::string> Emitter::run() {
  bool bits8 = false, bits16 = false;
  for (const kir::BufferArg &b : k_.buffers) {
    if (!memoryType(b.dtype))
      return makeError("kernel '", k_.name, "': vulkan codegen has no buffer of ",
                       dtypeName(b.dtype), " ('", b.name, "')");
    bits8 |= dtypeSize(b.dtype) == 1;
    bits16 |= dtypeSize(b.dtype) == 2;
  }
  for (const kir::VarDecl &var : k_.vars)
    if (!registerType(var.dtype))
      return makeError("kernel '", k_.name, "': vulkan codegen has no variable of ",
                       dtypeName(var.dtype));

  const int params = int(k_.params.size());
  for (int p = 0; p < params; ++p)
    line("int64_t p" + std::to_string(p) + " = kp.v[" + std::to_string(p) + "];");
  line("int64_t kiln_begin = kp.v[" + std::to_string(params) + "], kiln_end = kp.v[" +
       std::to_string(params + 1) + "];");
  line("int64_t kiln_g = int64_t(gl_GlobalInvocationID.y) * int64_t(gl_NumWorkGroups.x * "
       "gl_WorkGroupSize.x) + int64_t(gl_GlobalInvocationID.x);");
  // Split grid levels, deepest first (grid_plan.h): kiln_j<d> is this
  // invocation's iteration of level d's loops, what remains of kiln_g the
  // parallel iteration.
  const int levels = int(plan_.levels.size());
  if (levels > 0) line("int64_t kiln_depth = kp.v[" + std::to_string(params + 2) + "];");
  for (int d = levels; d >= 1; --d) {
    const std::string j = "kiln_j" + std::to_string(d);
    const std::string size = "kp.v[" + std::to_string(params + 2 + d) + "]";
    line("int64_t " + j + " = 0;");
    line("if (kiln_depth >= " + std::to_string(d) + ") { " + j + " = kiln_g % " + size +
         "; kiln_g /= " + size + "; }");
  }
  if (!k_.parallelLoop()) line("if (kiln_g != 0) return;");
  for (size_t var = 0; var < k_.vars.size(); ++var)
    line(std::string(registerType(k_.vars[var].dtype)) + " kv" + std::to_string(var) + " = " +
         registerType(k_.vars[var].dtype) + "(0);");
  KILN_RETURN_IF_ERROR(block(k_.body));

  std::ostringstream s;
  s << "#version 450\n"
    << "// kiln kernel '" << k_.name << "'\n"
    << "#extension GL_EXT_shader_explicit_arithmetic_types : require\n";
  if (bits8) s << "#extension GL_EXT_shader_8bit_storage : require\n";
  if (bits16) s << "#extension GL_EXT_shader_16bit_storage : require\n";
  s << "layout(local_size_x_id = 0) in;\n";
  for (size_t b = 0; b < k_.buffers.size(); ++b) {
    const kir::BufferArg &arg = k_.buffers[b];
    s << "layout(std430, set = 0, binding = " << b << ") " << (arg.output ? "" : "readonly ")
      << "buffer B" << b << " { " << memoryType(arg.dtype) << " v[]; } b" << b << "; // "
      << arg.name << "\n";
  }
  s << "layout(std430, set = 0, binding = " << k_.buffers.size()
    << ") readonly buffer Params { int64_t v[]; } kp;\n"
    << glslHelpers() << "void main() {\n"
    << body_.str() << "}\n";
  return s.str();
}

Status Emitter::block(const std::vector<Inst> &insts) {
  for (const Inst &i : insts) KILN_RETURN_IF_ERROR(inst(i));
  return Status::success();
}

std::string Emitter::affine(const kir::Affine &a) const {
  if (a.terms.empty()) return "int64_t(0)";
  std::string sum;
  for (const kir::Term &t : a.terms) {
    std::string term = "int64_t(" + std::to_string(t.coeff) + ")";
    if (t.param >= 0) term += " * p" + std::to_string(t.param);
    if (t.loopVar >= 0) term += " * i" + std::to_string(t.loopVar);
    sum += (sum.empty() ? "" : " + ") + term;
  }
  return "(" + sum + ")";
}

// buffers[buffer][index (+ dynIndex)] as an lvalue. Storage buffers are
// indexed in 32 bits (a binding spans at most 4 GiB).
std::string Emitter::element(const Inst &i) const {
  std::string index = affine(i.index);
  if (i.dynIndex >= 0) index += " + " + v(i.dynIndex);
  return "b" + std::to_string(i.buffer) + ".v[uint(" + index + ")]";
}

std::string Emitter::constant(const Inst &i) const {
  if (i.type == DType::Bool) return i.iimm != 0 ? "true" : "false";
  if (i.type == DType::F64) {
    uint64_t bits;
    std::memcpy(&bits, &i.fimm, 8);
    return "packDouble2x32(uvec2(" + hex32(uint32_t(bits)) + ", " + hex32(uint32_t(bits >> 32)) +
           "))";
  }
  if (isFloat(i.type)) {
    float f = float(i.fimm);
    if (i.type == DType::F16) f = float(Half(f));
    if (i.type == DType::BF16) f = float(BFloat16(f));
    return "uintBitsToFloat(" + hex32(floatBits(f)) + ")";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s(uint64_t(0x%016" PRIx64 "ul))", registerType(i.type),
                uint64_t(i.iimm));
  return buf;
}

Status Emitter::inst(const Inst &i) {
  const char *type = registerType(i.type);
  if (!type && i.op != Opcode::Loop && i.op != Opcode::If)
    return makeError("kernel '", k_.name, "': vulkan codegen has no ", dtypeName(i.type),
                     " values");
  auto define = [&](const std::string &value) {
    line(std::string(type) + " " + v(i.result) + " = " + value + ";");
  };
  switch (i.op) {
  case Opcode::Loop:
    return loop(i);
  case Opcode::If:
    line("if (" + v(i.operands[0]) + ") {");
    ++depth_;
    KILN_RETURN_IF_ERROR(block(i.body));
    --depth_;
    line("}");
    return Status::success();
  case Opcode::Const:
    define(constant(i));
    return Status::success();
  case Opcode::Index:
    define(affine(i.index));
    return Status::success();
  case Opcode::Load: {
    const std::string x = element(i);
    if (i.type == DType::F16)
      define("kiln_h2f(uint(" + x + "))");
    else if (i.type == DType::BF16)
      define("kiln_bf2f(uint(" + x + "))");
    else if (i.type == DType::Bool)
      define("(" + x + " != uint8_t(0))");
    else
      define(x);
    return Status::success();
  }
  case Opcode::Store: {
    const std::string x = v(i.operands[0]);
    std::string stored = x;
    if (i.type == DType::F16)
      stored = "uint16_t(kiln_f2h(" + x + "))";
    else if (i.type == DType::BF16)
      stored = "uint16_t(kiln_f2bf(" + x + "))";
    else if (i.type == DType::Bool)
      stored = "uint8_t(" + x + " ? 1 : 0)";
    line(element(i) + " = " + stored + ";");
    return Status::success();
  }
  case Opcode::VarRead:
    define("kv" + std::to_string(i.var));
    return Status::success();
  case Opcode::VarWrite:
    line("kv" + std::to_string(i.var) + " = " + v(i.operands[0]) + ";");
    return Status::success();
  case Opcode::Select:
    define(v(i.operands[0]) + " ? " + v(i.operands[1]) + " : " + v(i.operands[2]));
    return Status::success();
  case Opcode::Cast: {
    KILN_ASSIGN_OR_RETURN(std::string c, cast(i.castFrom, i.type, v(i.operands[0])));
    define(c);
    return Status::success();
  }
  default:
    break;
  }
  std::string value;
  if (kir::isUnary(i.op)) {
    KILN_ASSIGN_OR_RETURN(value, unary(i, v(i.operands[0])));
  } else if (kir::isBinary(i.op)) {
    KILN_ASSIGN_OR_RETURN(value, binary(i, v(i.operands[0]), v(i.operands[1])));
  } else if (kir::isCompare(i.op)) {
    define(compare(i, v(i.operands[0]), v(i.operands[1])));
    return Status::success();
  } else {
    return unsupported(i);
  }
  // A 16-bit float op rounds its f32 result to its type (kernel_ir.h).
  if (i.type == DType::F16) value = "kiln_rh(" + value + ")";
  if (i.type == DType::BF16) value = "kiln_rbf(" + value + ")";
  define(value);
  return Status::success();
}

Status Emitter::loop(const Inst &l) {
  const std::string iv = "i" + std::to_string(l.loopVar);
  if (l.schedule.kind == kir::Schedule::Kind::Parallel) {
    // This invocation's one iteration of [max(begin, 0), min(end, upper)).
    line("{");
    ++depth_;
    line("int64_t " + iv + " = (kiln_begin > 0 ? kiln_begin : int64_t(0)) + kiln_g;");
    line("int64_t kiln_upper = " + affine(l.upper) + ";");
    line("if (" + iv + " < kiln_upper && " + iv + " < kiln_end) {");
  } else if (const int d = plan_.levelOf(l.loopVar); d > 0) {
    // A split level runs only this invocation's iteration.
    const std::string split = "kiln_depth >= " + std::to_string(d);
    const std::string j = "kiln_j" + std::to_string(d);
    const std::string end = "e" + std::to_string(l.loopVar);
    line("int64_t " + end + " = " + affine(l.upper) + ";");
    line("if (" + split + " && " + j + " + 1 < " + end + ") " + end + " = " + j + " + 1;");
    line("for (int64_t " + iv + " = " + split + " ? " + j + " : 0; " + iv + " < " + end + "; ++" +
         iv + ") {");
  } else {
    line("for (int64_t " + iv + " = 0; " + iv + " < " + affine(l.upper) + "; ++" + iv + ") {");
  }
  ++depth_;
  KILN_RETURN_IF_ERROR(block(l.body));
  --depth_;
  line("}");
  if (l.schedule.kind == kir::Schedule::Kind::Parallel) {
    --depth_;
    line("}");
  }
  return Status::success();
}

Expected<std::string> Emitter::unary(const Inst &i, const std::string &a) {
  if (isFloat(i.type)) {
    const bool dbl = i.type == DType::F64;
    const std::string one = dbl ? "double(1)" : "1.0";
    switch (i.op) {
    case Opcode::Neg:
      return "-" + a;
    case Opcode::Abs:
      return "abs(" + a + ")";
    case Opcode::Sqrt:
      return "sqrt(" + a + ")";
    case Opcode::Rsqrt:
      return one + " / sqrt(" + a + ")";
    case Opcode::Floor:
      return "floor(" + a + ")";
    case Opcode::Ceil:
      return "ceil(" + a + ")";
    case Opcode::Round:
      return "roundEven(" + a + ")";
    case Opcode::Recip:
      return one + " / " + a;
    default:
      break;
    }
    // GLSL has its transcendental functions for float only: f64 computes
    // them in f32 (see the header).
    const std::string x = dbl ? "float(" + a + ")" : a;
    auto f64 = [&](const std::string &e) { return dbl ? "double(" + e + ")" : e; };
    // A driver's built-in may not keep NaN (lavapipe's atan(NaN) is 0).
    auto builtin = [&](const char *f) {
      return f64("kiln_keepnan(" + x + ", " + f + "(" + x + "))");
    };
    switch (i.op) {
    case Opcode::Exp:
      return f64("exp(" + x + ")");
    case Opcode::Log:
      return f64("log(" + x + ")");
    case Opcode::Tanh:
      return f64("kiln_tanh(" + x + ")");
    case Opcode::Sigmoid:
      return f64("kiln_sigmoid(" + x + ")");
    case Opcode::Erf:
      return f64("kiln_erf(" + x + ")");
    case Opcode::Sin:
      return dbl ? "kiln_sincos(" + a + ", true)" : builtin("sin");
    case Opcode::Cos:
      return dbl ? "kiln_sincos(" + a + ", false)" : builtin("cos");
    case Opcode::Tan:
      return builtin("tan");
    case Opcode::Asin:
      return builtin("asin");
    case Opcode::Acos:
      return builtin("acos");
    case Opcode::Atan:
      return builtin("atan");
    case Opcode::Sinh:
      return builtin("sinh");
    case Opcode::Cosh:
      return builtin("cosh");
    case Opcode::Asinh:
      return builtin("asinh");
    case Opcode::Acosh:
      return builtin("acosh");
    case Opcode::Atanh:
      return builtin("atanh");
    default:
      return unsupported(i);
    }
  }
  const std::string t = registerType(i.type);
  switch (i.op) {
  case Opcode::Neg:
    return "-" + a;
  case Opcode::Abs:
    if (!isSignedInt(i.type)) return a;
    return "(" + a + " < " + t + "(0) ? -" + a + " : " + a + ")";
  case Opcode::Not:
    return i.type == DType::Bool ? "!" + a : "~" + a;
  default:
    return unsupported(i);
  }
}

Expected<std::string> Emitter::binary(const Inst &i, const std::string &a, const std::string &b) {
  if (const char *op = infixOperator(i.op, i.type)) return a + " " + op + " " + b;
  if (isFloat(i.type)) {
    switch (i.op) {
    case Opcode::Max:
      return "kiln_max(" + a + ", " + b + ")";
    case Opcode::Min:
      return "kiln_min(" + a + ", " + b + ")";
    case Opcode::Mod:
      return "kiln_fmod(" + a + ", " + b + ")";
    case Opcode::Pow:
      return "kiln_pow(" + a + ", " + b + ")";
    default:
      return unsupported(i);
    }
  }
  const std::string t = registerType(i.type);
  switch (i.op) {
  case Opcode::Max:
    return "(" + a + " > " + b + " ? " + a + " : " + b + ")";
  case Opcode::Min:
    return "(" + a + " < " + b + " ? " + a + " : " + b + ")";
  case Opcode::Div:
  case Opcode::Mod: {
    // Never trap (verifier.h): x / 0 = 0, MIN / -1 = MIN, x % 0 = 0; the
    // remainder is C's (the dividend's sign), from the quotient.
    std::string bad = b + " == " + t + "(0)";
    if (isSignedInt(i.type)) {
      const std::string minValue =
          t + "(uint64_t(1ul) << " + std::to_string(bitsOf(i.type) - 1) + ")";
      bad = "(" + bad + " || (" + a + " == " + minValue + " && " + b + " == " + t + "(-1)))";
    }
    const std::string d = fresh(), q = fresh();
    line(t + " " + d + " = " + bad + " ? " + t + "(1) : " + b + ";");
    if (i.type == DType::I64 || i.type == DType::U64) {
      // 64-bit division is slow on GPUs (emulated) and index arithmetic
      // rarely needs it: a 32-bit quotient where both operands fit, which
      // is the same quotient (MIN32 is left out, so no 32-bit overflow).
      const bool s64 = i.type == DType::I64;
      const std::string fits =
          s64 ? "(" + a + " >= int64_t(-2147483647) && " + a + " <= int64_t(2147483647) && " + d +
                    " >= int64_t(-2147483647) && " + d + " <= int64_t(2147483647))"
              : "(" + a + " <= uint64_t(4294967295u) && " + d + " <= uint64_t(4294967295u))";
      const std::string narrow = s64 ? "int" : "uint";
      line(t + " " + q + " = " + fits + " ? " + t + "(" + narrow + "(" + a + ") / " + narrow + "(" +
           d + ")) : " + a + " / " + d + ";");
    } else {
      line(t + " " + q + " = " + a + " / " + d + ";");
    }
    const std::string r = i.op == Opcode::Div ? q : a + " - " + q + " * " + d;
    return "(" + b + " == " + t + "(0) ? " + t + "(0) : " + r + ")";
  }
  case Opcode::Shl:
  case Opcode::Shr: {
    // Shifts by the width or more (or negative amounts) give 0 (sign bits
    // for an arithmetic right shift).
    const int bits = bitsOf(i.type);
    const std::string tooFar = "(uint64_t(" + b + ") >= uint64_t(" + std::to_string(bits) + "))";
    const std::string amount = "int(" + b + ")";
    if (i.op == Opcode::Shl) return "(" + tooFar + " ? " + t + "(0) : " + a + " << " + amount + ")";
    if (!isSignedInt(i.type))
      return "(" + tooFar + " ? " + t + "(0) : " + a + " >> " + amount + ")";
    return "(" + tooFar + " ? " + a + " >> " + std::to_string(bits - 1) + " : " + a + " >> " +
           amount + ")";
  }
  default:
    return unsupported(i);
  }
}

std::string Emitter::compare(const Inst &i, const std::string &a0, const std::string &b0) const {
  // Bools order as 0 < 1.
  const std::string a = i.castFrom == DType::Bool ? "int(" + a0 + ")" : a0;
  const std::string b = i.castFrom == DType::Bool ? "int(" + b0 + ")" : b0;
  if (const char *op = infixOperator(i.op, DType::I32)) return a + " " + op + " " + b;
  return "!(" + a + " == " + b + ")"; // Ne, unordered for floats: NaN != x
}

Expected<std::string> Emitter::cast(DType from, DType to, const std::string &a) {
  const char *t = registerType(to);
  if (!t || !registerType(from))
    return makeError("kernel '", k_.name, "': vulkan codegen cannot cast ", dtypeName(from), " to ",
                     dtypeName(to));
  if (from == to) return a;
  if (from == DType::Bool) {
    const std::string x = "(" + a + " ? " + std::string(t) + "(1) : " + t + "(0))";
    return to == DType::F16 || to == DType::BF16 ? "(" + a + " ? 1.0 : 0.0)" : x;
  }
  if (isHalfFloat(to)) {
    // Through f32, then rounded to the 16-bit type. From f64 and 32/64-bit
    // integers the first rounding is to odd (toward zero, the last bit set
    // when inexact), so the second gives the correctly rounded result.
    std::string f;
    if (from == DType::F64 || (isInt(from) && dtypeSize(from) >= 4)) {
      const std::string d = fresh(), r = fresh();
      line("double " + d + " = double(" + a + ");");
      line("float " + r + " = float(" + d + ");");
      line("if (!isnan(" + d + ") && double(" + r + ") != " + d + ") { uint u = floatBitsToUint(" +
           r + "); if (abs(double(" + r + ")) > abs(" + d + ")) u -= 1u; " + r +
           " = uintBitsToFloat(u | 1u); }");
      f = r;
    } else {
      KILN_ASSIGN_OR_RETURN(f, cast(from, DType::F32, a));
    }
    return (to == DType::F16 ? "kiln_rh(" : "kiln_rbf(") + f + ")";
  }
  if (to == DType::Bool) {
    if (isFloat(from)) return "!(" + a + " == " + registerType(from) + "(0))";
    return a + " != " + std::string(registerType(from)) + "(0)";
  }
  if (isFloat(from) && isFloat(to)) return std::string(t) + "(" + a + ")";
  if (isFloat(from)) {
    // Saturating: NaN gives 0, the range's ends clamp, the rest truncates
    // toward zero.
    const std::string ft = registerType(from);
    const int bits = bitsOf(to);
    const bool s = isSignedInt(to);
    // The bounds as exact float literals: -2^(bits-1) and 2^(bits-1) (signed),
    // 0 and 2^bits (unsigned); at or above the upper one saturates.
    char lo[64], hi[64];
    std::snprintf(lo, sizeof lo, "%s(%.1f)", ft.c_str(), s ? -std::ldexp(1.0, bits - 1) : 0.0);
    std::snprintf(hi, sizeof hi, "%s(%.1f)", ft.c_str(), std::ldexp(1.0, s ? bits - 1 : bits));
    const std::string maxValue =
        s ? std::string(t) + "(uint64_t(0xfffffffffffffffful) >> " + std::to_string(65 - bits) + ")"
          : std::string(t) + "(uint64_t(0xfffffffffffffffful))";
    const std::string minValue = s ? "-" + maxValue + " - " + t + "(1)" : std::string(t) + "(0)";
    const std::string wide = bits <= 32 ? (s ? "int" : "uint") : t;
    return "(isnan(" + a + ") ? " + t + "(0) : " + a + " >= " + hi + " ? " + maxValue + " : " + a +
           " < " + lo + " ? " + minValue + " : " + t + "(" + wide + "(" + a + ")))";
  }
  return std::string(t) + "(" + a + ")";
}

} // namespace

Expected<std::string> emitGlsl(const kir::Kernel &kernel, const gpu::GridPlan &plan) {
  return Emitter(kernel, plan).run();
}

} // namespace kiln::codegen
