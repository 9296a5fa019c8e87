// Kernel IR lowerings of data movement: Slice, Concat, Split, Transpose, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, ConstantOfShape (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

LowerFn movementLowering(OpKind op) {
  switch (op) {
  default: return nullptr;
  }
}

} // namespace kiln::lower
