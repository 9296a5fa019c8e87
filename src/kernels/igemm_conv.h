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

// Made by int8ConvSourceFor. Every tap is read in bounds: from `padded`,
// this group's first channel of [C/groups][paddedH][paddedW] (the image
// with its padding materialized, or the input itself for a conv without
// padding), readable up to paddedEnd; so a panel is plain strided copies,
// no bounds checks per tap (those were most of a small conv's time).
struct Int8ConvSource {
  ConvShape shape;       // geometry (C, K are the whole conv's; groups divide them)
  bool isSigned = false; // the input is i8, else u8
  uint8_t padValue = 0;  // the raw byte padding reads: the input's zero point
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

// The source of `group` of `image` ([C][H][W]): the image itself when the
// conv has no padding, else paddedImage (made by int8ConvPadImage).
Int8ConvSource int8ConvSourceFor(const ConvShape &s, const uint8_t *image,
                                 const uint8_t *paddedImage, int64_t group, bool isSigned,
                                 uint8_t padValue);

} // namespace kiln::kernels
