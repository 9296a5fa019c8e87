// Kernel IR lowerings of normalizations: Layer, Group, Instance, Batch, MeanVariance, LRN (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

LowerFn normLowering(OpKind op) {
  switch (op) {
  default: return nullptr;
  }
}

} // namespace kiln::lower
