// Tuned compute shaders for the heavy ops of the GPU targets: MatMul as a
// tiled GEMM, Conv as an implicit GEMM (the im2col matrix is never built:
// each tile of it is gathered from the input into shared memory), and
// direct forms, one output element per invocation: for convs with few
// output channels per group (depthwise), where a GEMM tile would idle, and
// for drivers where barriers cost more than tiles save (driver_limits.h). Each applies a fused
// epilogue (bias, activation, residual; kernels/epilogue.h's ops, in order) to its results in
// registers, so `conv -> +bias -> ReLU -> +residual` writes its output once, as on the CPU.
//
// The tiled shaders: a workgroup of 256 invocations computes a T x T tile
// of the GEMM (T = 64: 4 x 4 results per invocation; T = 32: 2 x 2, for
// small problems that would leave a large GPU idle), stepping through the
// reduction 16 deep with both operand tiles staged in shared memory.
//
// Binding ABI (set 0; the device's dispatch follows it, runtime/vulkan):
//   0: A (MatMul's left operand; the conv input x, NCHW),
//   1: B (MatMul's right operand [.., K, N]; the conv weights [K, C/g, R, S]),
//   2: the output,
//   then, when the spec has them: the epilogue data (per-channel arrays,
//   concatenated, at each op's dataOffset), the residual (the output's
//   shape and layout),
//   last: int64 params, as gemmParams*() below give them.
// Workgroups: MatMul and Conv: x over tiles of M (rows of the GEMM: MatMul
// rows; conv output pixels of all images), y over tiles of N (MatMul
// columns; output channels of a group), z over batch (MatMul) or groups
// (Conv). The direct forms: one invocation per output element, flattened
// over x and y (y counts rows of x's workgroups).
//
// Indices are 32-bit: the host refuses tensors of 2^31 elements or more.
#pragma once

#include "kernels/epilogue.h"
#include "support/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::codegen {

struct GemmShaderSpec {
  enum class Form { kMatMul, kConv, kDirectMatMul, kDirectConv };
  Form form = Form::kMatMul;
  int tile = 64; // 64 or 32 (the tiled forms)
  struct Op {
    kernels::EpilogueKind kind = kernels::EpilogueKind::kRelu;
    float a = 0, b = 0;
  };
  // Per-channel ops index by the output channel (conv: kAddRowBias,
  // kMulRowScale) or column (MatMul: kAddColBias, kMulColScale), from where
  // params word kGemmDataOffsets + (the op's index) says its array starts
  // in the data buffer; kAddTensor reads the residual at the output's
  // index. Offsets are params, not literals, so that convs with the same
  // kind of epilogue share one shader.
  std::vector<Op> ops;
  bool hasData() const;
  bool hasResidual() const;
  int buffers() const { return 3 + int(hasData()) + int(hasResidual()); }
};

// Whether the shaders can apply `kind` for `form` (a conv's per-column
// data, say, they cannot).
bool gemmShaderTakes(GemmShaderSpec::Form form, kernels::EpilogueKind kind);

Expected<std::string> emitGemmGlsl(const GemmShaderSpec &spec);

// Params of the MatMul form: the GEMM's M, N, K, then up to 4 batch dims of
// the output, each with A's and B's element stride (0 where that operand
// broadcasts): [M, N, K, batchDims, d0..d3, aStride0..3, bStride0..3].
constexpr int kMatMulBatchDims = 4;
// Params of the conv forms: [N, C, H, W, K, OH, OW, R, S, strideH, strideW,
// padTop, padLeft, dilationH, dilationW, groups].
// Both forms: the epilogue ops' data offsets follow, from this word on.
constexpr int kGemmDataOffsets = 16;

} // namespace kiln::codegen
