// Kernel IR -> a GLSL 4.50 compute shader (the Vulkan target's code
// generator; glslang turns the text into SPIR-V, codegen/vulkan/spirv.h).
//
// The shader keeps the Kernel IR's semantics exactly where GLSL leaves them
// open, by spelling them out instead of using the built-in: NaN-propagating
// Max/Min, never-trapping integer Div/Mod (x / 0 = 0, MIN / -1 = MIN),
// C's remainder for signed Mod (GLSL's % is undefined for negatives),
// shifts past the width, saturating float -> int casts, Pow of a negative
// base with an integral exponent, 16-bit floats rounded to nearest even
// after each op (bit-exact with support/half.h, not packHalf2x16's
// unspecified rounding), and erf (which GLSL lacks) with the CPU target's
// polynomial. f64 is computed in double where GLSL has the operation:
// arithmetic, sqrt, rounding, Pow with an integral exponent (by squaring,
// so integer Pow through f64 stays exact to 2^53), sin and cos (our own
// f64 series: DFT and STFT twiddles need them). GLSL has exp, log, the
// other trigonometric functions and non-integral pow for float only, so
// f64 computes those in f32 (relative error ~1e-7, not ~1e-16).
//
// Binding ABI (the device's dispatch follows it, runtime/vulkan):
//   set 0, binding b < buffers: the kernel's buffer b, an array of its
//     element type (f16/bf16 as their 16-bit patterns, bool as a byte);
//   set 0, binding `buffers`: int64 params[P + 2 (+ 1 + L)] -- the
//     kernel's size params, then `begin` and `end` of the parallel loop's
//     range; with a grid plan of L levels (codegen/gpu/grid_plan.h), the
//     split depth and each level's grid size follow;
//   workgroup size: specialization constant 0 (local_size_x_id = 0).
// Invocation g (gl_GlobalInvocationID flattened over x and y) runs
// iteration begin + g of the top-level Parallel loop, if it is below end;
// a kernel without one runs whole in invocation 0. With depth k split,
// g = ((u * size_1 + j_1) * size_2 + j_2) ... + j_k: parallel iteration
// begin + u, and iteration j_d of each loop of level d.
#pragma once

#include "codegen/gpu/grid_plan.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

#include <string>

namespace kiln::codegen {

// The workgroup size the shader declares by default (specialization
// constant 0 overrides it).
inline constexpr int kDefaultWorkgroupSize = 64;

// `plan`: the loops the shader may split over the grid (none by default).
Expected<std::string> emitGlsl(const kir::Kernel &kernel, const gpu::GridPlan &plan = {});

// The helper functions every generated shader carries (kiln_erf,
// kiln_tanh, kiln_sigmoid, the 16-bit conversions...), for the other
// shader generators (gemm_shader.h): one definition of each.
std::string glslHelpers();

} // namespace kiln::codegen
