// The Kernel IR lowerings of graph ops, by op (DESIGN.md, "How an op gets
// compiled", way 1). Each lowering fills a DispatchBuilder (dispatch.h) for
// one node: its output shapes as shape values and its kernels. A lowering
// covers every form of its op that the op table allows (attributes, ranks,
// dtypes), or returns an error naming the form it does not cover, which the
// compiler reports as a compile error at that node.
//
// Ops come in families, one file each; each family file defines its lookup
// (the lowering of an op if the family has one), and kernelLoweringOf asks
// them in turn (registry.cpp).
#pragma once

#include "ir/op.h"
#include "lower/dispatch.h"
#include "support/status.h"

namespace kiln::lower {

using LowerFn = Status (*)(DispatchBuilder &d);

// The lowering of `op`, or null when the op is compiled another way (a
// host op, a decomposition into other ops) or not at all.
LowerFn kernelLoweringOf(OpKind op);

// ---- the families --------------------------------------------------------------

// index_ops.cpp: computed and data-dependent indices: Trilu, Gather*, Scatter*, OneHot, Range, EyeLike, ReverseSequence, CumSum, ArgMax/ArgMin.
LowerFn indexLowering(OpKind op);
// movement_ops.cpp: data movement: Slice, Concat, Split, Transpose, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, ConstantOfShape.
LowerFn movementLowering(OpKind op);
// sampling_ops.cpp: resampling: Resize, GridSample, RoiAlign, MaxUnpool.
LowerFn samplingLowering(OpKind op);
// signal_ops.cpp: signal processing: DFT, STFT, the windows, MelWeightMatrix.
LowerFn signalLowering(OpKind op);
// recurrent_ops.cpp: recurrent layers: RNN, GRU, LSTM.
LowerFn recurrentLowering(OpKind op);
// reduce_ops.cpp: reductions and the softmax family.
LowerFn reduceLowering(OpKind op);
// norm_ops.cpp: normalizations: Layer, Group, Instance, Batch, MeanVariance, LRN.
LowerFn normLowering(OpKind op);
// conv_ops.cpp: convolution, transposed convolution, pooling and matrix products in every form.
LowerFn convLowering(OpKind op);
// A Fused node of kind "conv" or "matmul" (fuse-epilogues): the Conv or
// MatMul that opens its region, then the region's elementwise epilogue on
// each finished output row. Not in convLowering's table: Fused nodes are
// routed by kind.
Status lowerFusedConvOrMatMul(DispatchBuilder &d);
// elementwise_dispatch.cpp: elementwise ops and fused elementwise groups with full broadcasting.
LowerFn elementwiseLowering(OpKind op);
// quant_ops.cpp: quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, integer and QLinear products.
LowerFn quantLowering(OpKind op);

} // namespace kiln::lower
