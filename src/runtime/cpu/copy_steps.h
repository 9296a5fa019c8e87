// Data-movement ops as fast copies: Slice (any steps), Concat, Split,
// Transpose and nearest-neighbour Resize by integer factors. Each moves
// whole contiguous runs with memcpy where the layout allows and splits
// large copies over the pool. They work on run-time shapes of any rank
// (also where the graph does not know the rank). A run outside these forms
// runs the step's general variant (its op's dispatch), or fails with an
// error naming the node where there is none: never a wrong answer.
#pragma once

#include "runtime/cpu/program.h"

namespace kiln {
class Node;
}

namespace kiln::cpu {

class CopyStep : public Step {
public:
  void init(std::string label, std::vector<int> in, std::vector<int> out, int64_t axis,
            std::vector<int64_t> perm, std::unique_ptr<Step> fallback);
  std::string describe() const override { return label_; }
  bool usesArena() const override { return true; }
  template <class A> void io(A &a) { a(label_, in_, out_, axis_, perm_); }
  void deriveSlots(); // reads/writes from in_/out_
  Status validate() const;

protected:
  const Tensor &input(const Frame &f, int i) const { return f.slots[in_[i]].tensor; }
  Status fallback(Frame &frame, ExecContext &ctx) const;
  std::string label_;
  std::vector<int> in_, out_;
  int64_t axis_ = 0;          // Concat, Split
  std::vector<int64_t> perm_; // Transpose (empty: reverse)
};

// An empty step of a copy kind (Slice, Concat, Split, Transpose,
// ResizeNearest), for loading; null for other kinds.
std::unique_ptr<CopyStep> newCopyStep(StepKind kind);

// Creates the step for `node` when it is one of the ops above, null
// otherwise (backend/cpu/step_factories.cpp). `in`/`out` are the node's
// input/output slots (-1 = absent).
std::unique_ptr<Step> makeCopyStep(const Node &node, const std::vector<int> &in,
                                   const std::vector<int> &out, std::unique_ptr<Step> fallback);

} // namespace kiln::cpu
