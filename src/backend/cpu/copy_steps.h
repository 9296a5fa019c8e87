// Data-movement ops as fast copies: Slice (unit steps), Concat, Split,
// Transpose and nearest-neighbour Resize by integer factors. Each moves
// whole contiguous runs with memcpy where the layout allows and splits
// large copies over the pool; anything outside these forms runs on the
// interpreter's kernel (the fallback every copy step carries), so no
// attribute combination is ever answered wrongly.
#pragma once

#include "backend/cpu/program.h"
#include "backend/cpu/steps.h"

namespace kiln::cpu {

// Creates the step for `node` when it is one of the ops above; null
// otherwise. `in`/`out` are the node's input/output slots (-1 = absent).
std::unique_ptr<Step> makeCopyStep(const Node &node, const std::vector<int> &in,
                                   const std::vector<int> &out);

} // namespace kiln::cpu
