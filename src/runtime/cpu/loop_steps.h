// The steps that run a compiled body program once per iteration: Loop,
// Scan and SequenceMap. Like If (steps.h), the body is a Program built by
// the compiler from the node's region and stored inline in the artifact
// (program_io.cpp); values of enclosing programs reach it as captures. The
// semantics are the reference interpreter's (interp/kernels/control_flow.cpp):
//
//   Loop(M, cond, carried...) -> (carried..., scan outputs...): the body
//     (iteration, cond, carried...) -> (cond, carried..., scan slices...)
//     runs while iteration < M and cond; scan slices are stacked along a
//     new axis 0.
//   Scan(states..., scan inputs...) -> (states..., scan outputs...): the
//     body (states..., one slice of each scan input) -> (states..., scan
//     output slices...) runs once per slice along scan_input_axes (reverse
//     where scan_input_directions is 1); outputs are stacked along
//     scan_output_axes (reversed where scan_output_directions is 1).
//   SequenceMap(seq, more...) -> (seqs...): the body runs per element of the
//     input sequences (tensor inputs passed to every iteration); each output
//     is the sequence of the per-iteration values.
//
// A scan output of zero iterations is an empty tensor shaped from the
// body's declared output type (ScanOutputType).
#pragma once

#include "runtime/cpu/program.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {
class Node;
}

namespace kiln::cpu {

// What a body declares for a scan output, for the empty result of zero
// iterations: its dtype (f32 when not a tensor), rank (-1 unknown) and dims
// when all are static.
struct ScanOutputType {
  DType dtype = DType::F32;
  int64_t rank = -1;
  bool staticDims = false;
  std::vector<int64_t> dims;
  template <class A> void io(A &a) { a(dtype, rank, staticDims, dims); }
};

// What the three steps share: a label, slots, the body and the slots it
// reads from the enclosing frame.
class BodyStep : public Step {
public:
  // The step of a Loop, Scan or SequenceMap node whose body compiled to
  // `body`; an error names a form that does not fit
  // (backend/cpu/loop_step_factory.cpp).
  static Expected<std::unique_ptr<BodyStep>> create(const Node &node, std::vector<int> in,
                                                    std::vector<int> out,
                                                    std::unique_ptr<Program> body);

  std::string describe() const override { return label_; }
  std::vector<const Program *> subPrograms() const override { return {body_.get()}; }
  void setBody(std::unique_ptr<Program> body) { body_ = std::move(body); }
  const Program *body() const { return body_.get(); }
  // Checks the fields against the body, sets reads/writes.
  virtual Status prepare() = 0;

protected:
  // Runs the body once on `inputs`, the captures read from `frame`.
  Expected<std::vector<RtValue>> runBody(Frame &frame, std::vector<RtValue> inputs,
                                         ExecContext &ctx) const;
  Status checkBody(size_t numInputs, size_t numOutputs);
  std::string label_;
  std::vector<int> in_;  // -1: absent
  std::vector<int> out_; // -1: nobody reads it
  std::unique_ptr<Program> body_;
};

class LoopStep : public BodyStep {
public:
  LoopStep(std::string label, std::vector<int> in, std::vector<int> out,
           std::vector<ScanOutputType> scanTypes);
  LoopStep() = default;
  Status run(Frame &frame, ExecContext &ctx) const override;
  StepKind kind() const override { return StepKind::Loop; }
  template <class A> void io(A &a) { a(label_, in_, out_, scanTypes_); } // body: program_io.cpp
  Status prepare() override;

private:
  std::vector<ScanOutputType> scanTypes_;
};

class ScanStep : public BodyStep {
public:
  struct Axes {
    int64_t numScanInputs = 0;
    std::vector<int64_t> inAxes, inReverse, outAxes, outReverse; // one per scan input/output
    template <class A> void io(A &a) { a(numScanInputs, inAxes, inReverse, outAxes, outReverse); }
  };
  ScanStep(std::string label, std::vector<int> in, std::vector<int> out, Axes axes,
           std::vector<ScanOutputType> scanTypes);
  ScanStep() = default;
  Status run(Frame &frame, ExecContext &ctx) const override;
  StepKind kind() const override { return StepKind::Scan; }
  template <class A> void io(A &a) { a(label_, in_, out_, axes_, scanTypes_); }
  Status prepare() override;

private:
  Axes axes_;
  std::vector<ScanOutputType> scanTypes_;
};

class SequenceMapStep : public BodyStep {
public:
  SequenceMapStep(std::string label, std::vector<int> in, std::vector<int> out);
  SequenceMapStep() = default;
  Status run(Frame &frame, ExecContext &ctx) const override;
  StepKind kind() const override { return StepKind::SequenceMap; }
  template <class A> void io(A &a) { a(label_, in_, out_); }
  Status prepare() override;
};

} // namespace kiln::cpu
