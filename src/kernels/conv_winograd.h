// Winograd F(4x4, 3x3) for the GEMM convolutions (conv.h): what PackedConv
// needs from conv_winograd.cpp besides its run function.
#pragma once

#include "kernels/conv.h"

#include <cstdint>

namespace kiln::kernels::detail {

// Entries of a transformed 6x6 tile: 36 GEMMs per run.
constexpr int kWinogradXi = 36;

// Whether this ISA and shape can run as Winograd: a 3x3 conv with stride 1,
// no dilation and one group, on an ISA with the tile transforms (AVX-512).
bool winogradApplies(const ConvShape &s, GemmIsa isa);

// The cost of one image as Winograd, in the units of orientationFor's GEMM
// costs (multiply-adds, padding columns counted): the 36 GEMMs plus the
// transforms.
double winogradCost(const ConvShape &s, int nr);

// u[xi][k][c] = (G w[k][c] G^T)[xi] for weights w [K][C][3][3], computed in
// double.
void winogradTransformWeights(int64_t K, int64_t C, const float *w, float *u);

// The inverse: w [K][C][3][3] from u (rows 0, 1 and 5 of G form an invertible
// 3x3 matrix). Within a few ulps of the weights u was made from.
void winogradRecoverWeights(int64_t K, int64_t C, const float *u, float *w);

} // namespace kiln::kernels::detail
