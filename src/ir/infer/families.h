// The op families' inference registration functions, one per infer/*.cpp.
#pragma once

namespace kiln {

class InferTable;

void registerElementwiseInference(InferTable &t); // infer/elementwise.cpp
void registerReduceInference(InferTable &t);      // infer/reduce.cpp
void registerNnInference(InferTable &t);          // infer/nn.cpp
void registerShapeOpsInference(InferTable &t);    // infer/shape_ops.cpp: reshapes, slicing, padding
void registerTensorInference(InferTable &t);      // infer/tensor.cpp: gathers, scatters, index ops
void registerControlInference(InferTable &t);     // infer/control.cpp
void registerSignalInference(InferTable &t);      // infer/signal.cpp
void registerRnnInference(InferTable &t);         // infer/rnn.cpp: RNN, GRU, LSTM
void registerSamplingInference(InferTable &t);    // infer/sampling.cpp: Resize, GridSample,
                                                  // DepthToSpace, SpaceToDepth, RoiAlign, NMS

} // namespace kiln
