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
  // Optional: this group's first channel of an input where every tap is in
  // bounds, [C/groups][paddedH][paddedW] (the image with its padding
  // materialized, or x itself for a conv without padding), readable up to
  // paddedEnd. The panels are then plain strided copies, no bounds checks
  // per tap (int8ConvSourceFor sets it up).
  const uint8_t *padded = nullptr;
  const uint8_t *paddedEnd = nullptr;
  int64_t paddedH = 0, paddedW = 0;
};

// The source for igemm (ctx must outlive the call).
IgemmBSource int8ConvPanels(const Int8ConvSource *ctx);

// Read slack after a padded image: vector copies may read past a row.
constexpr size_t kPaddedSlack = 64;

// Bytes of one image's padded copy (all C channels, with the slack).
size_t int8ConvPaddedBytes(const ConvShape &s);
// Copies image x ([C][H][W]) into dst ([C][H + pads][W + pads], padding and
// slack = padValue).
void int8ConvPadImage(const ConvShape &s, const uint8_t *x, uint8_t padValue, uint8_t *dst);

// The source of `group` of `image` ([C][H][W]): in-bounds reads from the
// image itself when the conv has no padding, else from paddedImage (made by
// int8ConvPadImage; null: the checked reads from image).
Int8ConvSource int8ConvSourceFor(const ConvShape &s, const uint8_t *image,
                                 const uint8_t *paddedImage, int64_t group, bool isSigned,
                                 uint8_t padValue);

} // namespace kiln::kernels
