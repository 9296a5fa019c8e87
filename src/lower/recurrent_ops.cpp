// Kernel IR lowerings of recurrent layers: RNN, GRU, LSTM (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

LowerFn recurrentLowering(OpKind op) {
  switch (op) {
  default: return nullptr;
  }
}

} // namespace kiln::lower
