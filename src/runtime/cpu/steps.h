// The kinds of steps a CPU program is made of (program.h), apart from the
// microkernel steps that have their own headers. Each is built by the
// compiler (backend/cpu/compiler.cpp) or loaded from an artifact
// (program_io.cpp), and runs on its own.
#pragma once

#include "runtime/cpu/launch.h"
#include "runtime/cpu/program.h"

#include <algorithm>
#include <memory>

namespace kiln::cpu {

// The entry ABI of every generated kernel (codegen/cpu/emit_llvm.h):
// buffers, size parameters, and the [begin, end) range of its outer loop.
using KernelEntry = void (*)(void *const *buffers, const int64_t *params, int64_t begin,
                             int64_t end);

// A step that calls generated code; the entry is resolved after the object
// code is linked (JIT) or loaded (artifact).
class KernelStep : public Step {
public:
  void setEntry(KernelEntry entry) { entry_ = entry; }

protected:
  // Calls the kernel over [0, outer) of its parallel loop, split across the
  // pool in chunks of about kChunkElements elements (rowElements each).
  void launchRows(ExecContext &ctx, void *const *buffers, const int64_t *params, int64_t outer,
                  int64_t rowElements) const;
  KernelEntry entry_ = nullptr;
};

// A generated elementwise kernel (one fused group or one node).
class ElementwiseStep : public KernelStep {
public:
  // `fallback` runs the node on the runs where the kernel's shape
  // speculation does not hold (see lower/elementwise.h); a loaded program
  // has none and reports an error instead.
  ElementwiseStep(std::string label, ElementwiseLaunch launch, std::vector<int> inputSlots,
                  std::vector<int> outputSlots, std::vector<DType> outputTypes,
                  std::unique_ptr<Step> fallback);
  ElementwiseStep() = default;
  const ElementwiseLaunch &launch() const { return launch_; }
  bool usesArena() const override { return true; }
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  StepKind kind() const override { return StepKind::Elementwise; }
  template <class A> void io(A &a) { a(label_, launch_, in_, out_, outTypes_); }
  Status validate() const;
  void setSlots(); // reads/writes from the fields

private:
  void launch(ExecContext &ctx, const std::vector<void *> &buffers,
              const std::vector<int64_t> &extents) const;

  std::string label_;
  ElementwiseLaunch launch_;
  std::vector<int> in_, out_;
  std::vector<DType> outTypes_;
};

// A generated reduction, softmax or layer norm (lower/reduce.h).
class ReductionStep : public KernelStep {
public:
  ReductionStep(std::string label, ReductionLaunch launch, std::vector<int> inputSlots,
                int outputSlot, std::unique_ptr<Step> fallback);
  ReductionStep() = default;
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }
  StepKind kind() const override { return StepKind::Reduction; }
  template <class A> void io(A &a) { a(label_, launch_, in_, out_); }
  const ReductionLaunch &launch() const { return launch_; }
  void setSlots(); // reads/writes from the fields
  Status validate() const;

private:
  std::string label_;
  ReductionLaunch launch_;
  std::vector<int> in_;
  int out_ = -1;
};

// If: runs the compiled branch the condition picks.
class IfStep : public Step {
public:
  IfStep(std::string label, int condSlot, std::vector<int> outputSlots,
         std::unique_ptr<Program> thenBranch, std::unique_ptr<Program> elseBranch);
  IfStep() = default;
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  std::vector<const Program *> subPrograms() const override { return {then_.get(), else_.get()}; }
  StepKind kind() const override { return StepKind::If; }
  template <class A> void io(A &a) { a(label_, cond_, out_); } // branches: program_io.cpp
  void setSlots(); // reads/writes from the fields and the branches' captures

  std::string label_;
  int cond_ = -1;
  std::vector<int> out_;
  std::unique_ptr<Program> then_, else_;
};

// Runs `fallback` (a step's general variant) when there is one, else fails
// with `label: why`.
Status runFallback(const Step *fallback, Frame &frame, ExecContext &ctx, const std::string &label,
                   const std::string &why);

// The tensor at input `index` of a step's input slots (-1 for an absent
// optional input), or null when the input is absent or not a tensor.
inline const Tensor *optionalTensor(const Frame &frame, const std::vector<int> &slots, int index) {
  if (index >= int(slots.size()) || slots[size_t(index)] < 0) return nullptr;
  const RtValue &v = frame.slots[size_t(slots[size_t(index)])];
  return v.isTensor() ? &v.tensor : nullptr;
}

// The present (>= 0) slots of `slots`, each once: what a step whose general
// variant reads every input declares as its reads.
inline std::vector<int> presentSlots(const std::vector<int> &slots) {
  std::vector<int> out;
  for (int slot : slots)
    if (slot >= 0 && std::find(out.begin(), out.end(), slot) == out.end()) out.push_back(slot);
  return out;
}

// Numpy broadcasting of concrete shapes; an error names both shapes.
Expected<Shape64> broadcastShapes(const std::vector<Shape64> &shapes);

} // namespace kiln::cpu
