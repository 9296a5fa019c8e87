// Sliding-window geometry shared by the convolution and pooling kernels
// (conv.cpp, conv_transpose.cpp, pool.cpp): reads strides, dilations, pads and
// auto_pad from a node and works out the padding and output size of every
// spatial axis as the ONNX spec defines them. Also declares the conv-family
// kernels that live in files of their own but register with
// registerConvKernels.
#pragma once

#include "interp/kernels/common.h"

namespace kiln {

// The geometry of one window over the spatial axes of an [N, C, spatial...]
// tensor. All vectors have one entry per spatial axis.
struct Window {
  Shape64 in, kernel, strides, dilations, padBegin, padEnd, out;

  size_t rank() const { return in.size(); }
  // Extent of the dilated kernel along axis i.
  int64_t span(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

// Builds the window of a conv or pool node over input spatial dims `in` with
// spatial kernel dims `kernel` (the weights' for convs, kernel_shape for
// pools). ceilMode rounds the output size up (pools only).
Expected<Window> makeWindow(const KernelContext &ctx, const Shape64 &in, const Shape64 &kernel,
                            bool ceilMode);

// Reads an ints attribute that has one value per spatial axis, or `fill`
// repeated when absent; error when present with the wrong length.
Expected<Shape64> spatialAttr(const KernelContext &ctx, const std::string &name, size_t count,
                              int64_t fill);

// Checks that x has rank >= 3 ([N, C, spatial...]) and returns its spatial dims.
Expected<Shape64> spatialDims(const KernelContext &ctx, const Tensor &x, const char *what);

// How a window's taps connect the rows of a grid `from` to rows of a grid
// `to` (a row: all spatial axes but the last), where a position in `to` is
// position in `from` * stride + tap * dilation - padBegin. Conv maps output
// rows onto input rows (a gather); ConvTranspose maps input rows onto output
// rows (a scatter).
struct RowMap {
  // For each row of `from`: the (outer tap, offset of the row in `to`)
  // pairs that land inside `to`. Outer taps are numbered row-major over the
  // kernel's axes but the last; offsets are in elements.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> rowTaps;
  // For each tap kx of the last axis: column in `to` = column in `from` *
  // stride + colOff[kx], inside `to` for columns in [colLo[kx], colHi[kx]).
  std::vector<int64_t> colOff, colLo, colHi;
};
RowMap mapRows(const Window &w, const Shape64 &from, const Shape64 &to);

// ConvTranspose (conv_transpose.cpp), registered by registerConvKernels.
Status convTransposeKernel(KernelContext &ctx);

} // namespace kiln
