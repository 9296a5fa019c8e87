// The im2col operand of an 8-bit convolution for the integer GEMM: B =
// im2col(X), (C/groups * R * S) x (outH * outW), produced one column panel
// at a time in igemm's packed layout (IgemmBSource), so the im2col matrix
// never exists, as in the f32 conv (conv.h). A = the weights, packed once;
// the product is [K/groups x outH*outW], the NCHW output of one image and
// group, so each finished tile is requantized straight into place.
#pragma once

#include "kernels/conv.h"
#include "kernels/igemm.h"

namespace kiln::kernels {

struct Int8ConvSource {
  const uint8_t *x = nullptr; // first channel of this image and group: [C/groups][H][W]
  ConvShape shape;            // geometry (C, K are the whole conv's; groups divide them)
  bool isSigned = false;      // x is i8, else u8
  uint8_t padValue = 0;       // the raw byte padding reads: x's zero point
};

// The source for igemm (ctx must outlive the call).
IgemmBSource int8ConvPanels(const Int8ConvSource *ctx);

} // namespace kiln::kernels
