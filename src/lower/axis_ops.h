// Lowerings of the ops that work along one axis of a tensor viewed as
// [outer, len, inner]: ArgMax/ArgMin, CumSum, Softmax/LogSoftmax and
// Hardmax (axis_ops.cpp). They belong to the reduce family; its lookup
// (reduceLowering in reduce_ops.cpp) returns them.
#pragma once

#include "lower/dispatch.h"

namespace kiln::lower {

Status lowerArgExtreme(DispatchBuilder &d); // ArgMax, ArgMin
Status lowerCumSum(DispatchBuilder &d);
Status lowerSoftmax(DispatchBuilder &d); // Softmax, LogSoftmax
Status lowerHardmax(DispatchBuilder &d);

} // namespace kiln::lower
