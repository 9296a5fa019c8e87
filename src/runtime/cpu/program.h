// A compiled graph for the CPU: a straight list of steps over a frame of
// value slots. Each step is one launch: a generated kernel (a fused
// elementwise group), a microkernel call (conv, matmul, pooling), an If
// choosing between two compiled sub-programs, a Loop, Scan or SequenceMap
// running a compiled body per iteration, or a runtime host op (shape
// arithmetic, sequences, strings and the like). There is no interpreter
// here: the compiler refuses a node that no step covers.
//
// A Program is immutable once built or loaded: the mutable state of a run
// (the slots, the activation arenas) lives in the Frame and the
// ExecContext, so several sessions may run one Program concurrently.
//
// Slots hold run-time values (tensors share their buffers, so passing a
// value along is cheap); a slot is released after its last reader, which
// lets the allocator reuse activations.
#pragma once

#include "runtime/cpu/arena.h"
#include "runtime/thread_pool.h"
#include "support/status.h"
#include "support/value.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::cpu {

class Step;
class Program;

struct Frame {
  std::vector<RtValue> slots;
  ActivationArena *arena = nullptr; // set by Program::run

  // Memory for a step's output `slot`, which the step then writes in full
  // (contents are undefined: arena memory is reused).
  Tensor allocate(int slot, DType dtype, const Shape64 &shape) {
    return arena ? arena->allocate(slot, dtype, shape) : Tensor(dtype, shape);
  }
};

// What every step may use while running.
struct ExecContext {
  runtime::ThreadPool *pool = nullptr;
  // One arena per program of the model (Program::id): the session's
  // activation memory.
  std::vector<ActivationArena> *arenas = nullptr;
  // When set, every step's wall time (in any program, If branches included)
  // is added to its entry.
  std::unordered_map<const Step *, double> *profile = nullptr;
};

// Every kind of step, as stored in artifacts (program_io.cpp); the values
// are part of the format.
enum class StepKind : uint16_t {
  // 0 was the interpreter fallback of format 1; no longer a step.
  Elementwise = 1,
  Reduction = 2,
  If = 3,
  Conv = 4,
  MatMul = 5,
  Pool = 6,
  ConvTranspose = 7,
  Lstm = 8,
  Slice = 9,
  Concat = 10,
  Split = 11,
  Transpose = 12,
  ResizeNearest = 13,
  HostOp = 14,
  Dispatch = 15,
  Loop = 16,
  Scan = 17,
  SequenceMap = 18,
  IntMatMul = 19,
  IntConv = 20,
  Attention = 21,
};

class Step {
public:
  virtual ~Step() = default;
  // Reads its input slots, writes its output slots.
  virtual Status run(Frame &frame, ExecContext &ctx) const = 0;
  // "elementwise 'fused_3' (Sigmoid, Mul)", "interp node 'x' (Resize)": for
  // profiles and messages.
  virtual std::string describe() const = 0;
  // True when the step allocates its outputs with Frame::allocate and
  // writes every element (so the arena may hold them).
  virtual bool usesArena() const { return false; }
  // Programs the step runs (If branches, loop bodies).
  virtual std::vector<const Program *> subPrograms() const { return {}; }
  virtual StepKind kind() const = 0;
  // Every slot the step reads (including what sub-programs read).
  std::vector<int> reads;
  std::vector<int> writes;
  // Fault injection (CompileOptions::perturbNode): float outputs are
  // perturbed after the step runs.
  bool perturbOutputs = false;
  // The general variant: a step computing the same node for any shapes the
  // model accepts (a dispatch of the op's Kernel IR lowering), run instead
  // when this step's specialized kernel does not fit a run's shapes or
  // values (a broadcast pattern or stride it was not built for). Stored in
  // the artifact with the step.
  std::unique_ptr<Step> generalVariant;
};

class Program {
public:
  // Slots 0..numInputs-1 are the graph inputs; captures are slots filled
  // from the enclosing program (If branches read outer values).
  int id = 0; // index among the model's programs (main first, then branches)
  int numSlots = 0;
  std::vector<int> inputSlots;
  std::vector<int> outputSlots;
  std::vector<std::pair<int, int>> captures; // (slot in the parent, slot here)
  // Values of Constant nodes: placed in their slots when a run starts
  // (sharing the model's buffers), so constants cost no step.
  std::vector<std::pair<int, RtValue>> constants;
  std::vector<std::unique_ptr<Step>> steps;
  // Slots to release after each step (their last reader); never outputs.
  std::vector<std::vector<int>> releaseAfter;

  // Per slot, the steps between which the arena may hold its buffer
  // ({-1, -1}: never), for ActivationArena::configure.
  std::vector<std::pair<int, int>> lifetimes;

  // Fills releaseAfter and lifetimes from the steps' reads and writes; call
  // once after building or loading.
  void computeLiveness();
  // Checks every slot index against numSlots (a loaded program may be
  // corrupt).
  Status validate() const;

  // Runs with the given inputs (and captured values already in `frame`);
  // returns the outputs. ctx.arenas must hold an arena per program.
  Expected<std::vector<RtValue>> run(Frame &frame, ExecContext &ctx) const;
};

} // namespace kiln::cpu

namespace kiln::cpu {

// Programs reachable from `main` (main first), in the order of their ids.
std::vector<const Program *> allPrograms(const Program &main);
// One line per step (If branches included) with its accumulated time from
// `profile` (ExecContext::profile), slowest first; an If's time includes
// its branch's steps.
std::string profileReport(const Program &main,
                          const std::unordered_map<const Step *, double> &profile);
// Fresh activation arenas for every program of a model (one session's).
std::vector<ActivationArena> createArenas(const Program &main);

} // namespace kiln::cpu
