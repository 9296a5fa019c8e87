// The kinds of steps a CPU program is made of (program.h). Each is built
// by the compiler (compiler.cpp) and runs on its own.
#pragma once

#include "backend/cpu/program.h"
#include "codegen/cpu/jit.h"
#include "lower/elementwise.h"
#include "lower/reduce.h"

#include <memory>

namespace kiln::cpu {

// Runs one node with the interpreter's kernel (ops not compiled yet). Nodes
// with regions (Loop, Scan...) get an environment holding the outer values
// their regions read.
class InterpStep : public Step {
public:
  InterpStep(const Node &node, std::vector<int> inputSlots, std::vector<int> outputSlots,
             std::vector<std::pair<const Value *, int>> regionReads);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override;

private:
  const Node &node_;
  std::vector<int> in_, out_;
  std::vector<std::pair<const Value *, int>> regionReads_;
};

// A step that calls generated code; the entry is resolved after the object
// code is linked.
class KernelStep : public Step {
public:
  void setEntry(codegen::KernelEntry entry) { entry_ = entry; }

protected:
  // Calls the kernel over [0, outer) of its parallel loop, split across the
  // pool in chunks of about kChunkElements elements (rowElements each).
  void launchRows(ExecContext &ctx, void *const *buffers, const int64_t *params, int64_t outer,
                  int64_t rowElements) const;
  codegen::KernelEntry entry_ = nullptr;
};

// A generated elementwise kernel (one fused group or one node).
class ElementwiseStep : public KernelStep {
public:
  // `fallback` runs the node with the interpreter on the runs where the
  // kernel's shape speculation does not hold (see lower/elementwise.h).
  ElementwiseStep(std::string label, lower::ElementwiseKernel kernel, std::vector<int> inputSlots,
                  std::vector<int> outputSlots, std::vector<DType> outputTypes,
                  std::unique_ptr<InterpStep> fallback);
  const kir::Kernel &kernel() const { return kernel_.kernel; }
  bool usesArena() const override { return true; }
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }

private:
  void launch(ExecContext &ctx, const std::vector<void *> &buffers,
              const std::vector<int64_t> &extents) const;

  std::string label_;
  lower::ElementwiseKernel kernel_;
  std::vector<int> in_, out_;
  std::vector<DType> outTypes_;
  std::unique_ptr<InterpStep> fallback_;
};

// A generated reduction, softmax or layer norm (lower/reduce.h).
class ReductionStep : public KernelStep {
public:
  ReductionStep(std::string label, lower::ReductionKernel kernel, std::vector<int> inputSlots,
                int outputSlot, std::unique_ptr<InterpStep> fallback);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }

private:
  std::string label_;
  lower::ReductionKernel kernel_;
  std::vector<int> in_;
  int out_;
  std::unique_ptr<InterpStep> fallback_;
};

// If: runs the compiled branch the condition picks.
class IfStep : public Step {
public:
  IfStep(const Node &node, int condSlot, std::vector<int> outputSlots,
         std::unique_ptr<Program> thenBranch, std::unique_ptr<Program> elseBranch);
  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override;
  std::vector<const Program *> subPrograms() const override { return {then_.get(), else_.get()}; }

private:
  const Node &node_;
  int cond_;
  std::vector<int> out_;
  std::unique_ptr<Program> then_, else_;
};

// Numpy broadcasting of concrete shapes; an error names both shapes.
Expected<Shape64> broadcastShapes(const std::vector<Shape64> &shapes);

} // namespace kiln::cpu
