// The scalar Kernel IR of each elementwise op (elementwise_ops.h asks here
// once a node's form is known to be covered). Split from the form checks
// so that each file reads as one thing: which forms exist, and what each
// computes.
#pragma once

#include "lower/elementwise_ops.h"

namespace kiln::lower {

// emitElementwise for a node whose form checkElementwiseForm accepted;
// `raise` is set when the node has elementwiseErrors.
Expected<int> emitScalarMath(kir::KernelBuilder &b, const Node &node,
                             const std::vector<int> &operands, const RaiseFn &raise);

} // namespace kiln::lower
