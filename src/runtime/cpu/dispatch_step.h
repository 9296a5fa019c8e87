// A dispatch: the generated kernels of one lowered node (or fused group)
// with the recipe that runs them on each run's shapes. It is the step most
// ops compile to (lower/dispatch.h writes the recipe next to the Kernel IR;
// DESIGN.md "How an op gets compiled", way 1):
//
//   1. the shape program (runtime/shape_program.h) reads the input shapes
//      and any small input values it needs (Slice's starts, Range's limits)
//      and computes every size: output dims, scratch sizes, kernel params;
//   2. outputs and scratch buffers are allocated (scratch zero-filled);
//   3. each launch calls one kernel with all buffers (inputs, outputs,
//      scratch, then the status word when there is one) and its params, its
//      parallel loop split over the pool;
//   4. a non-zero status word (a kernel found a bad index) is an error with
//      the message of that code.
//
// Nothing in it knows the op: every op that lowers to Kernel IR runs here.
#pragma once

#include "runtime/cpu/program.h"
#include "runtime/cpu/steps.h"
#include "runtime/shape_program.h"

#include <string>
#include <vector>

namespace kiln::cpu {

struct DispatchRecipe {
  struct Output {
    DType dtype = DType::F32;
    std::vector<int> dims; // shape-program values
    // -1: the output has dims.size() dims. Else a value: the output has that
    // many, the last of `dims` (the others are 1: padding of a rank the
    // graph does not know).
    int rank = -1;
    template <class A> void io(A &a) { a(dtype, dims, rank); }
  };
  struct Scratch { // zero-filled before the launches
    DType dtype = DType::F32;
    int numel = -1; // a shape-program value
    template <class A> void io(A &a) { a(dtype, numel); }
  };
  struct Launch {
    std::string symbol;      // the kernel in the object code
    std::vector<int> params; // shape-program values, in the kernel's param order
    int extent = -1;         // the parallel loop's trip count (a value); -1: one call
    int work = -1;           // elements per parallel iteration (a value), for chunking; -1: 1
    template <class A> void io(A &a) { a(symbol, params, extent, work); }
  };

  runtime::ShapeProgram shapes;
  std::vector<Output> outputs;
  std::vector<Scratch> scratch;
  std::vector<Launch> launches;
  // Status code k (1-based) means statusMessages[k-1]; when non-empty, an
  // i64 status word follows the scratch buffers.
  std::vector<std::string> statusMessages;

  template <class A> void io(A &a) { a(shapes, outputs, scratch, launches, statusMessages); }
  Status validate(size_t numInputs) const;
  // Output `o`'s shape from the shape program's `values` (every target
  // sizes outputs this way); the error names the output, not the step.
  Status outputShape(size_t o, const std::vector<int64_t> &values, Shape64 &shape) const;
};

class DispatchStep : public Step {
public:
  // `in`: the node's input slots (-1: absent optional input); `out`: its
  // output slots (-1: an output nobody reads, still computed).
  DispatchStep(std::string label, std::vector<int> in, std::vector<int> out, DispatchRecipe recipe);
  DispatchStep() = default;

  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }
  StepKind kind() const override { return StepKind::Dispatch; }
  template <class A> void io(A &a) { a(label_, in_, out_, recipe_); }

  const DispatchRecipe &recipe() const { return recipe_; }
  // The node's input slots (-1: absent) and output slots (-1: unread).
  const std::vector<int> &inputSlots() const { return in_; }
  const std::vector<int> &outputSlots() const { return out_; }
  // Entries of the launches, in order, once the code is linked or loaded.
  void setEntries(std::vector<KernelEntry> entries) { entries_ = std::move(entries); }
  Status prepare(); // checks the fields, sets reads/writes

private:
  std::string label_;
  std::vector<int> in_, out_;
  DispatchRecipe recipe_;
  std::vector<KernelEntry> entries_;
};

// Runs fn over [0, outer) of a kernel's parallel loop, in chunks of about
// kChunkElements elements (`rowElements` per iteration) across the pool.
void launchParallel(ExecContext &ctx, KernelEntry fn, void *const *buffers, const int64_t *params,
                    int64_t outer, int64_t rowElements);

} // namespace kiln::cpu
