// Pieces shared by the convolution, pooling and matrix-product lowerings
// (conv_ops.cpp, pool_ops.cpp, matmul_ops.cpp):
//
//   * the sliding-window geometry of Conv and the pools as shape values:
//     per spatial axis the padding and output size under every auto_pad
//     mode, exactly as the interpreter's window.cpp computes them, so
//     symbolic spatial dims resolve on every run;
//   * the split of an output row into an interior, where every tap of the
//     window's last axis lands inside the input (no bounds checks), and the
//     two borders on either side of it (checked per element);
//   * i64 index arithmetic inside kernels (flat index -> coordinates);
//   * the row output: an accumulator row becomes output elements, converted
//     from the accumulator type and run through a fused epilogue (the
//     elementwise nodes fuse-epilogues put after a Conv or MatMul in a
//     Fused node's region) while the row is still in cache.
#pragma once

#include "lower/dispatch.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::lower::convlower {

// An ints attribute with one value per spatial axis (or `count` values),
// `fill` repeated when absent; an error when present with another length.
Expected<std::vector<int64_t>> intsAttr(const Node &node, const std::string &name, size_t count,
                                        int64_t fill);

// One spatial axis of a window: output position o reads input position
// o * stride + k * dilation - padBegin for taps k in [0, kernel).
struct WindowAxis {
  SVal in, kernel, out, padBegin, padEnd;
  int64_t stride = 1, dilation = 1;
  SVal span; // (kernel - 1) * dilation + 1
};

// The window of a Conv or pool node (attributes of `node`: strides,
// dilations, pads, auto_pad) over spatial input dims `in` with kernel dims
// `kernel`; ceilMode rounds output sizes up (pools). Adds the run-time
// checks the interpreter makes (padded input at least the dilated kernel).
Expected<std::vector<WindowAxis>> convWindow(DispatchBuilder &d, const Node &node,
                                             const std::vector<SVal> &in,
                                             const std::vector<SVal> &kernel, bool ceilMode);

// The range [lo, hi) of positions o in [0, count) for which every tap
// k in [0, kernel) maps to o * stride + k * dilation - padBegin inside
// [0, limit); lo <= hi, both in [0, count].
struct Interior {
  SVal lo, hi;
};
Interior interiorRange(DispatchBuilder &d, SVal count, SVal limit, SVal kernel, int64_t stride,
                       int64_t dilation, SVal padBegin);

// Integer (i64) arithmetic on SSA values of the current kernel.
struct I64 {
  kir::KernelBuilder &b;
  int c(int64_t v) { return b.intConstant(DType::I64, v); }
  int add(int x, int y) { return b.binary(kir::Opcode::Add, DType::I64, x, y); }
  int sub(int x, int y) { return b.binary(kir::Opcode::Sub, DType::I64, x, y); }
  int mul(int x, int y) { return b.binary(kir::Opcode::Mul, DType::I64, x, y); }
  int div(int x, int y) { return b.binary(kir::Opcode::Div, DType::I64, x, y); }
  int mod(int x, int y) { return b.binary(kir::Opcode::Mod, DType::I64, x, y); }
  int lt(int x, int y) { return b.compare(kir::Opcode::Lt, DType::I64, x, y); }
  int ge(int x, int y) { return b.compare(kir::Opcode::Ge, DType::I64, x, y); }
  int land(int x, int y) { return b.binary(kir::Opcode::And, DType::Bool, x, y); }
  int select(int cond, int x, int y) { return b.select(DType::I64, cond, x, y); }
  // 0 <= x < limit
  int inRange(int x, int limit) { return land(ge(x, c(0)), lt(x, limit)); }
  // floor(x / k) for a constant k > 0 (Kernel IR division truncates).
  int floorDivConst(int x, int64_t k);
};

// The row-major coordinates of the i64 value `flat` over `dims` (the last
// varies fastest); the first coordinate is not reduced modulo its dim.
std::vector<int> unflatten(DispatchBuilder &d, int flat, const std::vector<SVal> &dims);

// The value of a load of `type` as `to` (a cast unless the types agree).
int convert(kir::KernelBuilder &b, DType to, DType type, int value);

// The element type products and sums of `t` are computed in: f32 for the
// 16-bit floats, else `t` itself.
DType accumulatorType(DType t);

// What happens to a finished accumulator row: a fused epilogue, when the
// node is a Fused conv/matmul, over operands broadcast against the output.
struct Epilogue {
  const Node *core = nullptr;              // the Conv/MatMul (the node itself when unfused)
  std::vector<const Node *> nodes;         // the epilogue nodes, in order
  std::map<const Value *, int> bodyInputs; // region input -> node input index
  // Per node input an epilogue reads: its strides along each output axis
  // (0 where it broadcasts).
  std::map<int, std::vector<SVal>> strides;
  // The node input index of a value the core reads (its region input).
  int inputOf(const Value *v) const;
};

// The epilogue of `d`'s node: none for a plain node; for a Fused node the
// nodes after the first of its region, which must all be elementwise ops
// the Kernel IR lowering covers, over region inputs that broadcast to the
// output dims `outDims`.
Expected<Epilogue> planEpilogue(DispatchBuilder &d, const std::vector<SVal> &outDims);

// Writes `length` elements of output 0 at (dynamic) offset `outRow` from
// the accumulator buffer `acc` of `accType` at offset `accRow`: converted
// to the output type, through the epilogue. `coords` are the row's output
// coordinates (every axis but the last), which place the epilogue's
// broadcast operands. When `acc` is output 0 itself and there is no
// epilogue, nothing needs doing and nothing is emitted.
Status emitRowOutput(DispatchBuilder &d, const Epilogue &ep, int acc, DType accType, int accRow,
                     int outRow, SVal length, const std::vector<int> &coords);

} // namespace kiln::lower::convlower
