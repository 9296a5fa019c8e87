// Kernel IR lowerings of signal processing: DFT, STFT, the windows, MelWeightMatrix (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

LowerFn signalLowering(OpKind op) {
  switch (op) {
  default: return nullptr;
  }
}

} // namespace kiln::lower
