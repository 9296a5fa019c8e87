// Loop-nest building blocks shared by the index and data-movement lowerings
// (index_ops.cpp, movement_ops.cpp): row-major strides as shape values,
// kernels that visit every position of a shape, strided box copies (the one
// kernel behind Slice, Transpose, Expand, Tile, Concat, Split, the constant
// part of Pad and DepthToSpace), fills, and the bounds check of a
// data-dependent index.
//
// Loops follow one pattern so that every lowering gets the same parallelism:
// a parallel loop over the rows of a shape (every dim but the innermost one
// or two, flattened, each row's coordinates decoded once with div/mod), then
// plain loops with affine indices, the innermost one vectorized.
#pragma once

#include "lower/dispatch.h"

#include <functional>
#include <vector>

namespace kiln::lower {

inline constexpr int kVectorWidth = 8;

// Row-major strides of `dims` (the last is 1).
std::vector<SVal> rowMajorStrides(DispatchBuilder &d, const std::vector<SVal> &dims);

// An error naming the node's form when a tensor it reads or writes holds
// strings, which Kernel IR does not move (such nodes run as host ops).
Status refuseStrings(const DispatchBuilder &d);

// An axis attribute in [-rank, rank) as an index in [0, rank), or an error
// naming `what`.
Expected<int> resolveAxis(int64_t axis, int rank, const char *what);

// `v` (an i64 SSA value) times the shape value `s`: `v` itself when s is
// the constant 1, -1 (no term, i.e. zero) when it is the constant 0.
int mulValue(DispatchBuilder &d, int v, SVal s);
// a + b on i64 SSA values where either may be -1 (absent: zero).
int addValues(kir::KernelBuilder &b, int a, int bValue);

// The coordinates (outer first) of `flat`, an i64 value in [0, product of
// dims), over `dims`.
std::vector<int> unflatten(DispatchBuilder &d, int flat, const std::vector<SVal> &dims);

// A kernel visiting every position of `dims`, row-major. Rank >= 2: a
// parallel loop over the rows (all dims but the last, flattened) and a
// vector loop over the last dim; rank 1: one parallel loop; rank 0: no loop.
struct ElementLoops {
  int rank = 0;
  SVal inner;              // the last dim (1 for rank 0)
  int row = -1;            // the parallel loop over rows (rank >= 2)
  int last = -1;           // the loop over the last dim (rank >= 1)
  std::vector<int> coords; // i64 values of the coordinates of dims[0..rank-1)

  // The position's row-major offset.
  kir::Affine flat(DispatchBuilder &d) const;
  // The i64 value of the last coordinate (0 for rank 0), made where called.
  int lastValue(kir::KernelBuilder &b) const;
};
// Starts the kernel and opens its loops; the caller emits the body and
// calls endElementKernel. `beforeLoops` (optional) emits what the kernel
// computes once, before the loops (e.g. loads of a fill value).
ElementLoops beginElementKernel(DispatchBuilder &d, const std::vector<SVal> &dims,
                                bool decodeRows = true,
                                const std::function<void()> &beforeLoops = {});
void endElementKernel(DispatchBuilder &d, const ElementLoops &loops);

// dst[dstBase + sum c_k dstStrides_k] = src[srcBase + sum c_k srcStrides_k]
// for every coordinate c of `dims`; buffers are dispatch buffer indices
// (d.in, d.out). Bases may be invalid (zero).
struct BoxCopy {
  int src = -1, dst = -1;
  std::vector<SVal> dims, srcStrides, dstStrides;
  SVal srcBase, dstBase;
};
// Emits one kernel for the copy (none when it is statically empty), after
// dropping unit dims and merging dims that are contiguous on both sides.
void emitBoxCopy(DispatchBuilder &d, BoxCopy copy);
// A dense copy of `count` elements from src[srcBase + i] to dst[dstBase + i].
void emitFlatCopy(DispatchBuilder &d, int src, int dst, SVal count, SVal srcBase = {},
                  SVal dstBase = {});

// Fills output `out` of shape `dims` with the value `makeValue` emits; it
// is called once, before the loops (loads may sit outside the parallel
// loop, stores may not).
void emitFill(DispatchBuilder &d, int out, const std::vector<SVal> &dims,
              const std::function<int(kir::KernelBuilder &)> &makeValue);

// A data-dependent index checked against a dim: `ok` (bool) when the loaded
// index lies in [-dim, dim), and `index` (i64) the index counted from the
// front (meaningful only when ok).
struct CheckedIndex {
  int index = -1, ok = -1;
};
CheckedIndex checkIndex(kir::KernelBuilder &b, DType indexType, int loaded, int dim);

} // namespace kiln::lower
