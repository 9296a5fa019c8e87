// The Resize lowering (resize_lowering.cpp), registered by the sampling
// family (sampling_ops.cpp). It has a file of its own because Resize alone
// has as many forms as the rest of the family together.
#pragma once

#include "lower/dispatch.h"

namespace kiln::lower {

Status lowerResize(DispatchBuilder &d);

} // namespace kiln::lower
