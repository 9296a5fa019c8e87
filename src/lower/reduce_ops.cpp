// Kernel IR lowerings of reductions and the softmax family (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

LowerFn reduceLowering(OpKind op) {
  switch (op) {
  default: return nullptr;
  }
}

} // namespace kiln::lower
