// Kernel IR lowerings of resampling: Resize, GridSample, RoiAlign, MaxUnpool (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

LowerFn samplingLowering(OpKind op) {
  switch (op) {
  default: return nullptr;
  }
}

} // namespace kiln::lower
