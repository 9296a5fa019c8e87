// Where a kernel's loads and stores go, as affine forms: what the GPU
// targets' analyses (grid_plan.h, row_to_element.h) need to prove that two
// iterations of a loop touch different elements.
//
// An access's element index -- its affine `index` plus its dynamic index,
// an SSA value -- is rewritten, through the i64 arithmetic that computed
// the dynamic part (index, const, add, sub, mul by a constant or a param),
// into one affine form plus at most one opaque SSA value: a value defined
// outside the loop in question, so every iteration of that loop sees the
// same one. Anything else (div, mod, select, a loaded index) that varies
// inside the loop makes the access unknown.
#pragma once

#include "kernel/kernel_ir.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::codegen::gpu {

// Terms with the same (param, loop variable) merged, zero terms dropped,
// sorted by (loop variable, param): equal forms compare equal.
kir::Affine normalized(const kir::Affine &a);
bool sameAffine(const kir::Affine &a, const kir::Affine &b);

// A term's coefficient times its param's value for a run (its loop
// variable, if any, left out), and an affine expression's value, whose loop
// variables must be absent (loop bounds); exact in 128 bits. A param past
// `params` reads as 0.
__int128 termValue(const kir::Term &t, const std::vector<int64_t> &params);
__int128 evaluate(const kir::Affine &a, const std::vector<int64_t> &params);
// ... clamped to int64.
int64_t evaluateClamped(const kir::Affine &a, const std::vector<int64_t> &params);

// The kernel's status word (lower/dispatch.h: a buffer named "status" that
// kernels store error codes to and never load), or -1. The GPU analyses let
// invocations race on it, as CPU threads do: any reported code will do.
int statusWordOf(const kir::Kernel &kernel);

struct IndexForm {
  kir::Affine affine; // normalized
  int base = -1;      // an SSA value invariant in the loop, added once; -1: none
};

class IndexForms {
public:
  explicit IndexForms(const kir::Kernel &kernel);

  // Access `access` (a load or store) as seen from loop `loopVar`: values
  // defined outside that loop are opaque. nullopt: not affine in it.
  std::optional<IndexForm> ofAccess(const kir::Inst &access, int loopVar) const;
  // Whether SSA value `value` is defined inside loop `loopVar`.
  bool definedInside(int value, int loopVar) const;
  // The loop variables around `value`'s definition, outermost first.
  const std::vector<int> &loopsAround(int value) const;

private:
  std::optional<IndexForm> ofValue(int value, int loopVar, int depth) const;
  void record(const std::vector<kir::Inst> &body, std::vector<int> &loops);

  std::vector<const kir::Inst *> def_;         // by SSA number
  std::vector<std::vector<int>> enclosingLoops_; // loop variables around each def
};

} // namespace kiln::codegen::gpu
