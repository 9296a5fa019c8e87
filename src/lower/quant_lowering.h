// Shared pieces of the quantization lowerings (quant_ops.cpp,
// quant_matmul.cpp, quant_conv.cpp): the lowerings themselves, small i64
// helpers for index arithmetic inside kernels, and the rounding and
// saturation steps, written once so that every op rounds exactly as the
// interpreter's quantize.h does (round half to even in f32, saturation in
// f64 with NaN going to 0, scales combined in f32 the way ONNX Runtime
// forms them).
#pragma once

#include "lower/ops.h"

namespace kiln::lower {

Status lowerMatMulInteger(DispatchBuilder &d);
Status lowerQLinearMatMul(DispatchBuilder &d);
Status lowerConvInteger(DispatchBuilder &d);
Status lowerQLinearConv(DispatchBuilder &d);

namespace quant {

// i64 arithmetic on SSA values of the kernel being built.
int iadd(kir::KernelBuilder &b, int x, int y);
int isub(kir::KernelBuilder &b, int x, int y);
int imul(kir::KernelBuilder &b, int x, int y);
int idiv(kir::KernelBuilder &b, int x, int y); // truncating, as C (operands >= 0 here)
int imod(kir::KernelBuilder &b, int x, int y);
int i64(kir::KernelBuilder &b, int64_t v);

// `v` of type `from` converted to `to` (nothing when they are equal).
int convert(kir::KernelBuilder &b, DType to, DType from, int v);

// saturate<Q>(rounded + zp) of quantize.h: `rounded` (f32 or f64, already
// an integer value) plus the f64 zero point `zp`, clamped to the range of
// `to`, NaN giving 0.
int saturateRounded(kir::KernelBuilder &b, DType to, DType from, int rounded, int zp);

// One element of QuantizeLinear: saturate(round(x / scale) + zp) to `out`,
// the division in f32 (f64 for an f64 x); zp of type zt, or -1 for none.
int quantizeElement(kir::KernelBuilder &b, DType out, DType xt, int x, DType st, int scale,
                    DType zt, int zp);

// One element of DequantizeLinear: (x - zp) * scale in the scale's type,
// the difference exact in i64, the product in f32 (f64 for an f64 scale);
// zp of x's type, or -1 for none.
int dequantizeElement(kir::KernelBuilder &b, DType xt, int x, DType st, int scale, int zp);

// requantize<Q> of quantize.h: saturate(round(f32(acc) * scale) + zp) for
// an integer accumulator of type `accType`, an f32 scale and an f64 zp.
int requantize(kir::KernelBuilder &b, DType to, DType accType, int acc, int scale, int zp);

// combinedScale of quantize.h in f32: f32(f32(a) * f32(b) / f32(out)), the
// operands loaded from buffers of types ta, tb, tout.
int combinedScale(kir::KernelBuilder &b, DType ta, int a, DType tb, int b2, DType tout, int out);

// The stride (0 or 1) with which a per-tensor-or-per-channel parameter
// input is indexed: 0 when it holds one value, 1 when it holds `count`; a
// run-time check that it holds one of the two. Absent inputs give 0.
SVal channelStride(DispatchBuilder &d, int input, SVal count, const char *what);

// The zero point input `input` at `at` (+ the i64 value `dyn`) as an i32,
// or 0 when the input is absent.
int zeroPointAt(DispatchBuilder &d, int input, const kir::Affine &at, int dyn = -1);

// The lowest and highest values of an integer type, as doubles.
double lowest(DType t);
double highest(DType t);

} // namespace quant
} // namespace kiln::lower
