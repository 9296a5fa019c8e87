#include "lower/ops.h"

namespace kiln::lower {

LowerFn kernelLoweringOf(OpKind op) {
  for (LowerFn (*family)(OpKind) :
       {indexLowering, movementLowering, samplingLowering, signalLowering, recurrentLowering,
        reduceLowering, normLowering, convLowering, elementwiseLowering, quantLowering})
    if (LowerFn f = family(op)) return f;
  return nullptr;
}

} // namespace kiln::lower
