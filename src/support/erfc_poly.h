// erfc(z) for z >= 0 as t * exp(-z^2 + P(t)), t = 1 / (1 + z/2): the
// Chebyshev fit of Numerical Recipes' erfcc, fractional error < 1.2e-7 for
// every z >= 0. kErfcPoly holds P's coefficients in ascending powers of t.
// One table for the three places that evaluate it: the generated code's Erf
// (codegen/cpu/emit_math.cpp), the Gelu lowering (lower/elementwise_math.cpp)
// and the GEMM/conv epilogue's GELU (kernels/epilogue_simd.h), so they
// compute the same function. Includes nothing: the ISA-specific kernel files
// include it (see kernels/gemm_microkernel.h).
#pragma once

namespace kiln {

inline constexpr int kErfcPolyTerms = 10;
inline constexpr double kErfcPoly[kErfcPolyTerms] = {
    -1.26551223, 1.00002368,  0.37409196, 0.09678418,  -0.18628806,
    0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};

} // namespace kiln
