// The Kernel IR: a target-neutral loop-level program for one fused group of
// graph nodes (DESIGN.md, layer `kernel/`). It sits between the fused Graph
// IR and a target's code generator (LLVM for CPU today; NVPTX and SPIR-V
// later), so it knows neither ONNX nor LLVM nor x86.
//
// A Kernel has
//   * buffer arguments: typed element pointers (inputs read-only, outputs
//     written), indexed in elements;
//   * size parameters: int64 run-time arguments (dims, strides, offsets).
//     Symbolic dims of the model stay symbolic: a kernel is compiled once and
//     the executor passes the sizes of each run (principle 5);
//   * mutable scalar variables (accumulators of reductions);
//   * a body: instructions in SSA form (each result numbered once) and loops.
//
// Indices and loop bounds are affine: a sum of terms c * [param] * [loopvar],
// so a load's address is known to be affine in the loop variables with
// coefficients fixed per run. That is what lets a backend vectorize (unit or
// zero stride in the innermost loop), tile, or map loops to GPU threads.
//
// The semantics are scalar and sequential; a loop's Schedule (parallel,
// vector width, unroll) is a hint that never changes results beyond float
// reassociation inside a loop marked vector. Entry ABI, shared by every
// backend (and the runtime's executor):
//
//   void kernel(void *const *buffers, const int64_t *params,
//               int64_t begin, int64_t end);
//
// Element types: 16-bit floats (f16, bf16) are storage types. Loads widen
// them, every instruction of a 16-bit float type computes in f32 and rounds
// its result to the type (round to nearest even), so a chain of f16 ops
// gives what ONNX's per-op f16 arithmetic gives; a lowering that wants f32
// intermediates casts to f32 first.
//
// At most one loop, at the outermost level, may be Parallel: the executor
// splits its range into chunks and each call runs iterations [begin, end) of
// it (clamped to its bounds). A kernel without a parallel loop ignores them.
//
// Text form (kernel/printer.h; grammar in kernel/parser.h; round-trips):
//   kernel @add_relu(%x: f32, %b: f32, %y: f32 out) params(%n0, %n1, %sb0) {
//     parallel %i0 = 0 to %n0 {
//       vector(8) %i1 = 0 to %n1 {
//         %0 = load %x[%i0 * %n1 + %i1]
//         %1 = load %b[%i0 * %sb0]
//         %2 = add %0, %1 : f32
//         %3 = const 0.0 : f32
//         %4 = max %2, %3 : f32
//         store %y[%i0 * %n1 + %i1], %4
//       }
//     }
//   }
// Values are %<N>, loop variables %i<N>, buffers, params and vars %<name>;
// an affine term prints as `coeff * %loopvar * %param` without 1s; loops are
// `for`, `parallel`, `vector(W)` or `unroll(U)`; vars(%acc: f32) follows
// params. The rules every kernel obeys are in kernel/verifier.h.
#pragma once

#include "support/dtype.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::kir {

// One term of an affine expression: coeff * params[param] * loopvar, where a
// missing param or loop variable (-1) reads as 1.
struct Term {
  int64_t coeff = 1;
  int param = -1;
  int loopVar = -1;
};

// Sum of terms; empty means 0.
struct Affine {
  std::vector<Term> terms;

  static Affine constant(int64_t c) { return Affine{{Term{c, -1, -1}}}; }
  static Affine param(int p, int64_t c = 1) { return Affine{{Term{c, p, -1}}}; }
  Affine &add(int64_t coeff, int param, int loopVar) {
    terms.push_back(Term{coeff, param, loopVar});
    return *this;
  }
  bool usesLoopVar(int v) const {
    for (const Term &t : terms)
      if (t.loopVar == v) return true;
    return false;
  }
};

enum class Opcode : uint8_t {
  // Leaves
  Const,   // result = fimm (float types) or iimm (integer / bool types)
  Load,    // result = buffers[buffer][index (+ dynIndex)]
  VarRead, // result = vars[var]
  Index,   // result (i64) = the value of `index`: params, loop variables, constants
  // Effects (no result)
  Store,    // buffers[buffer][index (+ dynIndex)] = operands[0]
  VarWrite, // vars[var] = operands[0]
  Loop,     // for loopVar in [0, upper): body
  If,       // if operands[0] (bool): body
  // Unary math (operand and result of `type`)
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Erf, Floor, Ceil, Round, Recip,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh,
  Not,
  // Binary math
  Add, Sub, Mul, Div, Max, Min, Pow, Mod, And, Or, Xor, Shl, Shr,
  // Comparisons (result Bool, operands of `compareType`)
  Lt, Le, Gt, Ge, Eq, Ne,
  Select, // operands: cond (Bool), then, else
  Cast,   // operand of `castFrom`, result of `type`
};

// "add", "load", ... (the text form's mnemonics).
const char *opcodeName(Opcode op);
bool opcodeFromName(const std::string &name, Opcode &out);
bool isUnary(Opcode op);
bool isBinary(Opcode op);
bool isCompare(Opcode op);

// How a loop runs; never changes results (see the file comment).
struct Schedule {
  enum class Kind : uint8_t { Serial, Parallel, Vector, Unroll };
  Kind kind = Kind::Serial;
  int width = 1; // vector width or unroll factor
};

struct Inst {
  Opcode op = Opcode::Const;
  DType type = DType::F32; // result type (Store/VarWrite: the stored type)
  int result = -1;         // SSA number, or -1 for effects
  std::vector<int> operands;

  double fimm = 0; // Const of a float type
  int64_t iimm = 0; // Const of an integer or bool type
  int buffer = -1;  // Load/Store
  Affine index;     // Load/Store: element index into the buffer; Index: the value
  // Load/Store: an i64 SSA value added to `index` (a data-dependent index:
  // gathers, scatters, computed coordinates), or -1.
  int dynIndex = -1;
  int var = -1;     // VarRead/VarWrite
  DType castFrom = DType::F32; // Cast; also the operand type of comparisons

  // Loop
  int loopVar = -1;
  Affine upper; // loop runs [0, upper); affine in params only
  Schedule schedule;
  std::vector<Inst> body; // Loop and If

};

struct BufferArg {
  std::string name;
  DType dtype = DType::F32;
  bool output = false; // written by the kernel
};

struct VarDecl {
  std::string name;
  DType dtype = DType::F32;
};

struct Kernel {
  std::string name;
  std::vector<BufferArg> buffers;
  std::vector<std::string> params;
  std::vector<VarDecl> vars;
  std::vector<Inst> body;
  int numValues = 0;   // SSA results are numbered 0..numValues-1
  int numLoopVars = 0; // loop variables are numbered 0..numLoopVars-1

  // The top-level Parallel loop, or null.
  const Inst *parallelLoop() const;
};

// Builds a kernel with fresh SSA numbers and loop variables; instructions go
// into the innermost open loop.
class KernelBuilder {
public:
  explicit KernelBuilder(std::string name) { k_.name = std::move(name); }

  int addBuffer(std::string name, DType dtype, bool output);
  int addParam(std::string name);
  int addVar(std::string name, DType dtype);

  int constant(DType type, double value);
  // An integer constant of any width (constant() goes through a double).
  int intConstant(DType type, int64_t value);
  int load(int buffer, Affine index, int dynIndex = -1);
  void store(int buffer, Affine index, int value, int dynIndex = -1);
  int index(Affine value);
  int varRead(int var);
  void varWrite(int var, int value);
  int unary(Opcode op, DType type, int a);
  int binary(Opcode op, DType type, int a, int b);
  int compare(Opcode op, DType operandType, int a, int b);
  int select(DType type, int cond, int a, int b);
  int cast(DType to, DType from, int a);

  // Opens a loop and returns its variable; instructions go into it until
  // endLoop().
  int beginLoop(Affine upper, Schedule schedule = {});
  void endLoop();
  // Opens a conditional block; instructions go into it until endIf().
  void beginIf(int cond);
  void endIf();

  DType bufferType(int buffer) const { return k_.buffers[buffer].dtype; }
  Kernel finish();

private:
  int emit(Inst inst);
  std::vector<Inst> &current();

  Kernel k_;
  std::vector<Inst> blocks_; // loops and ifs being built (innermost last)
};

} // namespace kiln::kir
