// The interpreter's op families, one register function per kernels/*.cpp.
#pragma once

namespace kiln {

class KernelTable;

void registerElementwiseKernels(KernelTable &t); // variadic Max/Min/Sum/Mean, Where, Clip, Identity, Dropout
void registerUnaryKernels(KernelTable &t); // unary math, activations, Sign/Abs/Neg, IsNaN/IsInf, Not, BitwiseNot
void registerBinaryKernels(KernelTable &t); // broadcasting arithmetic, bitwise, logic, comparisons, PRelu
void registerCastKernels(KernelTable &t); // Cast and CastLike across every dtype
void registerReduceKernels(KernelTable &t); // Reduce*, ArgMax/ArgMin, CumSum, TopK
void registerSoftmaxKernels(KernelTable &t); // Softmax, LogSoftmax, Hardmax and the loss ops built on them
void registerConvKernels(KernelTable &t); // Conv, ConvTranspose, ConvInteger, QLinearConv
void registerPoolKernels(KernelTable &t); // average, max, Lp and global pooling, MaxUnpool
void registerNormKernels(KernelTable &t); // batch, instance, layer, group normalization, LRN, MeanVarianceNormalization
void registerMatmulKernels(KernelTable &t); // Gemm, MatMul, MatMulInteger, QLinearMatMul, Einsum, Det
void registerQuantKernels(KernelTable &t); // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void registerRnnKernels(KernelTable &t); // RNN, GRU, LSTM
void registerDetectionKernels(KernelTable &t); // NonMaxSuppression, RoiAlign
void registerSamplingKernels(KernelTable &t); // GridSample, DepthToSpace, SpaceToDepth
void registerResizeKernels(KernelTable &t); // Resize (Upsample is imported as Resize)
void registerShapeKernels(KernelTable &t); // Constant, ConstantOfShape, Reshape, Transpose, Flatten, Squeeze, Unsqueeze, Expand, Tile, Shape, Size
void registerSlicePadKernels(KernelTable &t); // Concat, Split, Slice, Pad
void registerUniqueKernels(KernelTable &t); // Unique
void registerGatherScatterKernels(KernelTable &t); // Gather, GatherElements, GatherND, ScatterElements, ScatterND
void registerIndexKernels(KernelTable &t); // Range, OneHot, NonZero, Compress, Trilu, ReverseSequence, EyeLike, random ops
void registerControlFlowKernels(KernelTable &t); // If, Loop, Scan, SequenceMap
void registerSequenceKernels(KernelTable &t); // sequence and optional ops
void registerSignalKernels(KernelTable &t); // DFT, STFT, window functions, MelWeightMatrix
void registerTextKernels(KernelTable &t); // StringNormalizer, TfIdfVectorizer

} // namespace kiln
