// Kernel IR lowerings of elementwise ops and fused elementwise groups with full broadcasting (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

LowerFn elementwiseLowering(OpKind op) {
  switch (op) {
  default: return nullptr;
  }
}

} // namespace kiln::lower
