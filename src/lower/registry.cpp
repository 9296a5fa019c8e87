#include "lower/ops.h"

namespace kiln::lower {

LowerFn kernelLoweringOf(OpKind op) {
  switch (op) {
  case OpKind::Trilu: return lowerTrilu;
  default: return nullptr;
  }
}

} // namespace kiln::lower
