// Builds a dispatch (runtime/cpu/dispatch_step.h) for one graph node: the
// Kernel IR of its kernels together with the shape program that sizes them
// on every run. This is the one mechanism through which ops become Kernel
// IR (DESIGN.md, "How an op gets compiled"): a lowering describes
//
//   * sizes as shape values (SVal): input dims, small input values, and
//     arithmetic on them. A value that is known at compile time (a static
//     dim, an element of a constant) folds to a constant, so a static
//     model's kernels see constants while a symbolic one's read params;
//   * outputs (dtype and dims as shape values), scratch buffers and status
//     codes (errors a kernel may report, e.g. an index out of range);
//   * kernels, written with kir::KernelBuilder. Every kernel of a dispatch
//     takes the same buffers: the node's inputs (absent optional inputs are
//     null), its outputs, the scratch buffers, then the status word.
//     Shape values reach a kernel as params (param(), term(), value()).
//
// Nothing here is specific to the CPU: a GPU target consumes the same
// kernels and the same recipe.
#pragma once

#include "ir/graph.h"
#include "kernel/kernel_ir.h"
#include "runtime/cpu/dispatch_step.h"
#include "support/status.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace kiln::lower {

// A shape value: an index into the shape program.
struct SVal {
  int id = -1;
  bool valid() const { return id >= 0; }
};

// The compile-time value of a graph value, or null when it is only known
// at run time.
using ConstantLookup = std::function<const Tensor *(const Value *)>;

struct LoweredDispatch {
  std::vector<kir::Kernel> kernels; // launch k runs kernels[k]
  cpu::DispatchRecipe recipe;        // launch symbols are the kernels' names
};

class DispatchBuilder {
public:
  DispatchBuilder(const Node &node, std::string name, ConstantLookup constants = {});

  const Node &node() const { return node_; }
  // The node's input i (null when absent) and its dtype / static rank.
  const Value *input(int i) const;
  DType inputType(int i) const;
  int inputRank(int i) const;
  DType outputType(int i) const;

  // ---- shape values ----
  SVal c(int64_t v);
  SVal cf(double v);
  SVal dim(int input, int axis);
  std::vector<SVal> dims(int input); // every dim of a ranked input
  SVal numel(int input);
  SVal present(int input);
  // For inputs of any rank (known or not): the rank, and dim k counted from
  // the last (0: the last), 1 past the rank, as broadcasting pads shapes.
  SVal rank(int input);
  SVal dimFromEnd(int input, int k);
  SVal elem(int input, SVal index);
  SVal elem(int input, int64_t index) { return elem(input, c(index)); }
  SVal elemF(int input, SVal index);
  SVal add(SVal a, SVal b);
  SVal sub(SVal a, SVal b);
  SVal mul(SVal a, SVal b);
  SVal floorDiv(SVal a, SVal b);
  SVal floorMod(SVal a, SVal b);
  SVal ceilDiv(SVal a, SVal b); // for b > 0
  SVal min(SVal a, SVal b);
  SVal max(SVal a, SVal b);
  SVal clamp(SVal v, SVal lo, SVal hi) { return min(max(v, lo), hi); }
  SVal lt(SVal a, SVal b);
  SVal le(SVal a, SVal b);
  SVal eq(SVal a, SVal b);
  SVal ne(SVal a, SVal b);
  SVal land(SVal a, SVal b);
  SVal lor(SVal a, SVal b);
  SVal lnot(SVal a);
  SVal select(SVal cond, SVal a, SVal b);
  SVal fadd(SVal a, SVal b);
  SVal fsub(SVal a, SVal b);
  SVal fmul(SVal a, SVal b);
  SVal fdiv(SVal a, SVal b);
  SVal ffloor(SVal a);
  SVal fceil(SVal a);
  SVal flt(SVal a, SVal b);
  SVal toF(SVal a);
  SVal toI(SVal a);
  SVal product(const std::vector<SVal> &values);
  // The compile-time value, when known.
  std::optional<int64_t> constant(SVal v) const;
  std::optional<double> constantF(SVal v) const;
  // A run-time error unless `cond` holds; "{}" in the message prints the
  // next of `args`. The step's label is prefixed.
  void check(SVal cond, std::string message, std::vector<SVal> args = {});

  // ---- buffers ----
  void setOutput(int i, std::vector<SVal> dims, std::optional<DType> dtype = std::nullopt);
  // An output whose rank is only known at run time: `dims` are its dims
  // padded with leading 1s to a fixed rank, `rank` how many of the last ones
  // it has.
  void setOutputOfRank(int i, std::vector<SVal> dims, SVal rank);
  int addScratch(DType dtype, SVal numel); // returns the scratch index
  int statusCode(std::string message);     // a code (>= 1) kernels may report

  // ---- kernels ----
  // Starts a kernel, run as one launch after those begun before. `extent`
  // is its parallel loop's trip count (invalid: no parallel loop, one call)
  // and `work` the elements one iteration handles (for chunking).
  kir::KernelBuilder &beginKernel(SVal extent = {}, SVal work = {});
  void endKernel();
  kir::KernelBuilder &kb() { return *kernel_; }
  // Buffer indices in every kernel of this dispatch.
  int in(int i) const { return i; }
  int out(int i) const { return numInputs_ + i; }
  int scratch(int j) const { return numInputs_ + numOutputs_ + j; }
  int status() const { return numInputs_ + numOutputs_ + int(recipe_.scratch.size()); }
  // The current kernel's param carrying `v` (added on first use).
  int param(SVal v);
  // coeff * v * loopVar as one affine term (a constant v folds into the
  // coefficient; loopVar -1 means none), appended to `a`.
  kir::Affine &addTerm(kir::Affine &a, SVal v, int loopVar = -1, int64_t coeff = 1);
  kir::Affine term(SVal v, int loopVar = -1, int64_t coeff = 1) {
    kir::Affine a;
    return addTerm(a, v, loopVar, coeff);
  }
  // `v` as an i64 SSA value of the current kernel.
  int value(SVal v);
  // Opens a loop over [0, upper) in the current kernel.
  int loop(SVal upper, kir::Schedule schedule = {});
  // Stores `code` into the status word when `cond` (a bool SSA value) holds.
  void raise(int cond, int code);

  Expected<LoweredDispatch> finish();

private:
  SVal emit(runtime::ShapeProgram::Inst inst);
  // Folds an instruction whose operands are all constants by running it.
  std::optional<int64_t> fold(const runtime::ShapeProgram::Inst &inst);

  const Node &node_;
  std::string name_;
  ConstantLookup constants_;
  int numInputs_ = 0, numOutputs_ = 0;
  cpu::DispatchRecipe recipe_;
  std::vector<bool> outputSet_;
  std::map<std::tuple<int, int, int, int, int64_t>, int> cse_;
  std::vector<std::optional<int64_t>> known_; // per value: its constant
  std::vector<kir::Kernel> kernels_;
  std::optional<kir::KernelBuilder> kernel_;
  std::map<int, int> kernelParams_; // value -> param of the current kernel
  std::vector<int> kernelParamValues_;
  bool hasStatus_ = false;
};

// A readable listing of a shape program, one value per line
// ("%3 = mul %1, %2"), for dumps.
std::string printShapeProgram(const runtime::ShapeProgram &p);

// The i64 value of an integer index loaded from a buffer of any integer type.
int castToIndex(kir::KernelBuilder &b, DType from, int value);

} // namespace kiln::lower
