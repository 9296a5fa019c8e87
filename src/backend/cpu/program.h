// A compiled graph for the CPU: a straight list of steps over a frame of
// value slots. Each step is one launch: a generated kernel (a fused
// elementwise group), a microkernel call (conv, matmul, pooling), an If
// choosing between two compiled sub-programs, or — for ops the CPU backend
// does not compile yet — the interpreter's kernel for that node, so every
// model the interpreter runs also runs here.
//
// Slots hold run-time values (tensors share their buffers, so passing a
// value along is cheap); a slot is released after its last reader, which
// lets the allocator reuse activations.
#pragma once

#include "backend/cpu/arena.h"
#include "interp/interpreter.h"
#include "runtime/thread_pool.h"
#include "support/status.h"

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
  Interpreter *interpreter = nullptr; // for fallback steps
  // When set, every step's wall time (in any program, If branches included)
  // is added to its entry.
  std::unordered_map<const Step *, double> *profile = nullptr;
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
  // Programs the step runs (If branches).
  virtual std::vector<const Program *> subPrograms() const { return {}; }
  // Every slot the step reads (including what sub-programs read).
  std::vector<int> reads;
  std::vector<int> writes;
};

class Program {
public:
  // Slots 0..numInputs-1 are the graph inputs; captures are slots filled
  // from the enclosing program (If branches read outer values).
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

  // Fills releaseAfter from the steps' reads and configures the arena for
  // the outputs of steps that allocate through Frame::allocate; call once
  // after building.
  void computeLiveness();

  // Activation memory (arena.h); mutable: it learns sizes as runs go.
  mutable ActivationArena arena;

  // Runs with the given inputs (and captured values already in `frame`);
  // returns the outputs.
  Expected<std::vector<RtValue>> run(Frame &frame, ExecContext &ctx) const;
};

} // namespace kiln::cpu
