// The loop nest of a reduction over an arbitrary set of axes, shared by the
// Reduce* lowerings (reduce_ops.cpp) and MeanVarianceNormalization
// (norm_ops.cpp). The input's dims are each "kept" (they index the output)
// or "reduced" (they are summed away). Which one may be known only at run
// time (Reduce* with an axes input that is not a constant): then every dim
// gets a kept trip count (the dim or 1) and a reduced trip count (1 or the
// dim), computed by the shape program, so every index stays affine.
//
// When the kinds are known at compile time, neighbouring dims of one kind
// merge into one (their elements are contiguous in that order) and dims of
// size 1 drop out, so reducing axes 2 and 3 of [N, C, H, W] is one loop of
// H*W elements per output element.
//
// Two ways to walk it:
//   rows     parallel over output elements; the kept position's input
//            offset is decoded from the output index once per output
//            element; nested loops over the reduced dims, the innermost
//            vectorized when it is contiguous;
//   columns  when the innermost dim is kept (known at compile time):
//            parallel over the output rows (every kept dim but the last);
//            for each reduced position, a vectorized loop over the
//            contiguous last dim updates a row of accumulators.
#pragma once

#include "lower/dispatch.h"

#include <vector>

namespace kiln::lower {

struct NestDim {
  SVal size;      // elements along the dim
  SVal stride;    // input elements between neighbours
  SVal reduced;   // 1 when the dim is reduced, else 0 (a constant when known)
  SVal kept, red; // trip counts: select(reduced, 1, size), select(reduced, size, 1)
};

// The offset of an element as an affine part plus an optional i64 value
// (the dynIndex of a load or store; -1 when none).
struct Offset {
  kir::Affine affine;
  int dyn = -1;
};

class ReduceNest {
public:
  // The dims of input `input` (of known rank) with `reduced[i]` saying
  // whether dim i is reduced.
  ReduceNest(DispatchBuilder &d, int input, const std::vector<SVal> &reduced);

  SVal outCount() const { return outCount_; } // output elements
  SVal redCount() const { return redCount_; } // reduced elements per output element
  // True when the innermost dim is kept (known at compile time), so the
  // columns walk applies.
  bool columns() const { return columns_; }
  SVal inner() const { return inner_; }      // columns: the last dim's size
  SVal outerCount() const { return outer_; } // columns: outCount / inner

  // The input offset of output element (rows) or output row (columns) `o`,
  // a loop variable of the current kernel.
  Offset base(int o);
  // Opens one loop per reduced dim (innermost vector when contiguous and
  // `vectorize`); returns the offset of the reduced position.
  // closeReduced() ends them.
  kir::Affine openReduced(bool vectorize);
  void closeReduced();

private:
  DispatchBuilder &d_;
  std::vector<NestDim> dims_;
  SVal outCount_, redCount_, inner_, outer_;
  bool columns_ = false;
  int openLoops_ = 0;
};

// `v` of type `from` converted to `to` (no instruction when they match).
int convert(kir::KernelBuilder &b, DType to, DType from, int v);

// The type float math runs in for float `t`: f64 for f64, else f32 (f16 and
// bf16 are storage types, kernel_ir.h).
inline DType floatAccType(DType t) {
  return t == DType::F64 ? DType::F64 : DType::F32;
}

// The index `o * stride + j` of an [outer, stride] row-major array.
kir::Affine rowMajor(DispatchBuilder &d, int o, SVal stride, int j);

// Appends the terms of `b` to `a`.
kir::Affine &append(kir::Affine &a, const kir::Affine &b);

// A kernel copying input `input` (of known rank) to output `output`
// unchanged, parallel over rows of its last dim.
void emitCopy(DispatchBuilder &d, int input, int output);

// The vector width of contiguous loops over elements of `t`.
int vectorWidth(DType t);

} // namespace kiln::lower
