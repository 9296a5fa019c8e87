// Kernel IR lowerings of quantization (lower/ops.h): QuantizeLinear,
// DequantizeLinear and DynamicQuantizeLinear here, the integer and QLinear
// products in quant_matmul.cpp and quant_conv.cpp, and the rounding helpers
// all of them share (quant_lowering.h). The semantics are the interpreter's
// (interp/kernels/quant.cpp, quantize.h), which follows ONNX Runtime: the
// division x / scale and its rounding (half to even) happen in f32 (f64
// for f64 inputs), the saturation in f64.
//
// Scales and zero points are per tensor, per axis or blocked. Every kernel
// here runs over "rows" in parallel and over the elements of a row in a
// vector loop; a row is a run of elements that share one scale (per axis,
// blocked) or simply the last axis (per tensor).
#include "lower/quant_lowering.h"

#include <limits>

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;

Status lowerQuantize(DispatchBuilder &d);
Status lowerDequantize(DispatchBuilder &d);
Status lowerDynamicQuantize(DispatchBuilder &d);

} // namespace

LowerFn quantLowering(OpKind op) {
  switch (op) {
  case OpKind::QuantizeLinear:
    return lowerQuantize;
  case OpKind::DequantizeLinear:
    return lowerDequantize;
  case OpKind::DynamicQuantizeLinear:
    return lowerDynamicQuantize;
  case OpKind::MatMulInteger:
    return lowerMatMulInteger;
  case OpKind::QLinearMatMul:
    return lowerQLinearMatMul;
  case OpKind::ConvInteger:
    return lowerConvInteger;
  case OpKind::QLinearConv:
    return lowerQLinearConv;
  default:
    return nullptr;
  }
}

// ---- shared helpers (quant_lowering.h) ------------------------------------------------

namespace quant {

int iadd(kir::KernelBuilder &b, int x, int y) {
  return b.binary(Opcode::Add, DType::I64, x, y);
}
int isub(kir::KernelBuilder &b, int x, int y) {
  return b.binary(Opcode::Sub, DType::I64, x, y);
}
int imul(kir::KernelBuilder &b, int x, int y) {
  return b.binary(Opcode::Mul, DType::I64, x, y);
}
int idiv(kir::KernelBuilder &b, int x, int y) {
  return b.binary(Opcode::Div, DType::I64, x, y);
}
int imod(kir::KernelBuilder &b, int x, int y) {
  return b.binary(Opcode::Mod, DType::I64, x, y);
}
int i64(kir::KernelBuilder &b, int64_t v) {
  return b.intConstant(DType::I64, v);
}

int convert(kir::KernelBuilder &b, DType to, DType from, int v) {
  return to == from ? v : b.cast(to, from, v);
}

double lowest(DType t) {
  return visitDType(t, [](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) return double(std::numeric_limits<T>::lowest());
    return 0.0;
  });
}
double highest(DType t) {
  return visitDType(t, [](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) return double(std::numeric_limits<T>::max());
    return 0.0;
  });
}

int saturateRounded(kir::KernelBuilder &b, DType to, DType from, int rounded, int zp) {
  if (from == DType::F32 && dtypeSize(to) <= 2) {
    // The same in f32, half the vector width of f64: an 8/16-bit zero point
    // is exact in f32, and so is rounded + zp while |rounded| < 2^24 - 2^16;
    // beyond that the inexact sum still lies past the clamp bound it would
    // have reached. Compare-and-select clamps (x86 max/min instructions)
    // instead of NaN-propagating Max/Min: NaN is selected away after.
    const int v = b.binary(Opcode::Add, DType::F32, rounded, b.cast(DType::F32, DType::F64, zp));
    const int isNan = b.compare(Opcode::Ne, DType::F32, v, v);
    const int lo = b.constant(DType::F32, lowest(to)), hi = b.constant(DType::F32, highest(to));
    int clamped = b.select(DType::F32, b.compare(Opcode::Lt, DType::F32, v, lo), lo, v);
    clamped = b.select(DType::F32, b.compare(Opcode::Gt, DType::F32, clamped, hi), hi, clamped);
    clamped = b.select(DType::F32, isNan, b.constant(DType::F32, 0), clamped);
    return b.cast(to, DType::F32, clamped);
  }
  const int v = b.binary(Opcode::Add, DType::F64, convert(b, DType::F64, from, rounded), zp);
  const int isNan = b.compare(Opcode::Ne, DType::F64, v, v);
  int clamped = b.binary(Opcode::Max, DType::F64, v, b.constant(DType::F64, lowest(to)));
  clamped = b.binary(Opcode::Min, DType::F64, clamped, b.constant(DType::F64, highest(to)));
  clamped = b.select(DType::F64, isNan, b.constant(DType::F64, 0), clamped);
  return b.cast(to, DType::F64, clamped);
}

int quantizeElement(kir::KernelBuilder &b, DType out, DType xt, int x, DType st, int scale,
                    DType zt, int zp) {
  const DType ct = xt == DType::F64 ? DType::F64 : DType::F32; // compute type
  const int q =
      b.unary(Opcode::Round, ct,
              b.binary(Opcode::Div, ct, convert(b, ct, xt, x), convert(b, ct, st, scale)));
  const int zp64 = zp >= 0 ? b.cast(DType::F64, zt, zp) : b.constant(DType::F64, 0);
  return saturateRounded(b, out, ct, q, zp64);
}

int dequantizeElement(kir::KernelBuilder &b, DType xt, int x, DType st, int scale, int zp) {
  const DType ct = st == DType::F64 ? DType::F64 : DType::F32;
  int v = b.cast(DType::I64, xt, x);
  if (zp >= 0) v = isub(b, v, b.cast(DType::I64, xt, zp));
  const int y = b.binary(Opcode::Mul, ct, b.cast(ct, DType::I64, v), convert(b, ct, st, scale));
  return convert(b, st, ct, y);
}

int requantize(kir::KernelBuilder &b, DType to, DType accType, int acc, int scale, int zp) {
  const int product = b.binary(Opcode::Mul, DType::F32, b.cast(DType::F32, accType, acc), scale);
  return saturateRounded(b, to, DType::F32, b.unary(Opcode::Round, DType::F32, product), zp);
}

int combinedScale(kir::KernelBuilder &b, DType ta, int a, DType tb, int b2, DType tout, int out) {
  const int ab = b.binary(Opcode::Mul, DType::F32, convert(b, DType::F32, ta, a),
                          convert(b, DType::F32, tb, b2));
  return b.binary(Opcode::Div, DType::F32, ab, convert(b, DType::F32, tout, out));
}

int zeroPointAt(DispatchBuilder &d, int input, const kir::Affine &at, int dyn) {
  kir::KernelBuilder &b = d.kb();
  if (!d.input(input)) return b.intConstant(DType::I32, 0);
  return convert(b, DType::I32, d.inputType(input), b.load(d.in(input), at, dyn));
}

SVal channelStride(DispatchBuilder &d, int input, SVal count, const char *what) {
  if (!d.input(input)) return d.c(0);
  const SVal n = d.numel(input);
  d.check(d.lor(d.eq(n, d.c(1)), d.eq(n, count)),
          std::string(what) + " has {} values, expected 1 or {}", {n, count});
  return d.select(d.eq(n, d.c(1)), d.c(0), d.c(1));
}

} // namespace quant

namespace {

using namespace quant;

// ---- where each element finds its scale and zero point --------------------------------

// The element space is walked as rows x inner: `rows` rows run in parallel,
// each of `inner` contiguous elements. paramBase(b, r) gives the i64 index
// of row r's first parameter; a blocked or per-tensor layout reads the
// same parameter along the row (paramAlongRow false), since the inner run
// is the part after the axis.
struct ParamLayout {
  enum class Kind { Tensor, Axis, Blocked } kind = Kind::Tensor;
  SVal rows, inner;
  SVal dim, blocks, blockSize, stride; // Axis: dim and stride; Blocked: all but stride
};

// The interpreter's paramLayout (quant.cpp) with shapes as shape values.
Expected<ParamLayout> paramLayout(DispatchBuilder &d) {
  const int rank = d.inputRank(0), scaleRank = d.inputRank(1);
  if (rank < 0 || scaleRank < 0) return makeError("needs inputs of known rank");
  const int64_t blockSize = d.node().getInt("block_size");
  ParamLayout p;
  const std::vector<SVal> x = d.dims(0);
  const std::vector<SVal> s = d.dims(1);
  const bool oneScale = scaleRank == 0 || (scaleRank == 1 && d.constant(s[0]) == 1);
  if (oneScale && blockSize <= 0) {
    p.inner = rank == 0 ? d.c(1) : x.back();
    p.rows = d.floorDiv(d.numel(0), d.max(p.inner, d.c(1)));
    return p;
  }
  int64_t axis = d.node().getInt("axis");
  if (axis < -rank || axis >= rank)
    return makeError("axis ", axis, " is out of range for an input of rank ", rank);
  if (axis < 0) axis += rank;
  p.dim = x[size_t(axis)];
  p.inner = d.product(std::vector<SVal>(x.begin() + axis + 1, x.end()));
  p.rows = d.product(std::vector<SVal>(x.begin(), x.begin() + axis + 1));
  if (blockSize <= 0) {
    if (scaleRank != 1)
      return makeError("a scale of rank ", scaleRank, " needs block_size (or one value)");
    // One value (per tensor) or one per index of the axis.
    p.kind = ParamLayout::Kind::Axis;
    const SVal n = s[0];
    d.check(d.lor(d.eq(n, d.c(1)), d.eq(n, p.dim)),
            "scale has {} values, expected one value or {} (the size of axis " +
                std::to_string(axis) + ")",
            {n, p.dim});
    p.stride = d.select(d.eq(n, d.c(1)), d.c(0), d.c(1));
    return p;
  }
  if (scaleRank != rank)
    return makeError("a blocked scale must have the input's rank ", rank, ", got ", scaleRank);
  p.kind = ParamLayout::Kind::Blocked;
  p.blockSize = d.c(blockSize);
  p.blocks = d.ceilDiv(p.dim, p.blockSize);
  for (int i = 0; i < rank; ++i) {
    const SVal want = i == axis ? p.blocks : x[size_t(i)];
    d.check(d.eq(s[size_t(i)], want),
            "scale dim " + std::to_string(i) + " is {}, expected {} for block_size " +
                std::to_string(blockSize),
            {s[size_t(i)], want});
  }
  return p;
}

// The index of row r's parameter (i64), and whether it advances along the
// row with the inner loop variable.
int paramBase(DispatchBuilder &d, const ParamLayout &p, int r) {
  kir::KernelBuilder &b = d.kb();
  switch (p.kind) {
  case ParamLayout::Kind::Tensor:
    return i64(b, 0);
  case ParamLayout::Kind::Axis:
    return imul(b, imod(b, r, d.value(p.dim)), d.value(p.stride));
  case ParamLayout::Kind::Blocked: {
    // ((r / dim) * blocks + (r % dim) / blockSize) * inner
    const int dim = d.value(p.dim);
    const int block = iadd(b, imul(b, idiv(b, r, dim), d.value(p.blocks)),
                           idiv(b, imod(b, r, dim), d.value(p.blockSize)));
    return imul(b, block, d.value(p.inner));
  }
  }
  return i64(b, 0);
}

// The zero point (input `input`, absent: 0) has the scale's element count.
void checkZeroPoint(DispatchBuilder &d, int input) {
  if (!d.input(input)) return;
  d.check(d.eq(d.numel(input), d.numel(1)), "zero point has {} values, expected the scale's {}",
          {d.numel(input), d.numel(1)});
}

bool isQuantizedType(DType t) {
  return t == DType::U8 || t == DType::I8 || t == DType::U16 || t == DType::I16;
}

// y = saturate(round(x / scale) + zero_point): the division in f32 (f64 for
// f64 x), the output type the zero point's, else output_dtype's, else u8.
Status lowerQuantize(DispatchBuilder &d) {
  const DType xt = d.inputType(0), st = d.inputType(1), out = d.outputType(0);
  if (!isFloat(xt) && xt != DType::I32)
    return makeError("expects a float or i32 input, got ", dtypeName(xt));
  if (!isFloat(st)) return makeError("scale must be a float tensor, got ", dtypeName(st));
  if (!isQuantizedType(out))
    return makeError("quantizing to ", dtypeName(out), " is not supported (u8, i8, u16, i16 are)");
  KILN_ASSIGN_OR_RETURN(ParamLayout p, paramLayout(d));
  checkZeroPoint(d, 2);
  d.setOutput(0, d.dims(0), out);
  const DType zt = d.inputType(2);

  kir::KernelBuilder &b = d.beginKernel(p.rows, p.inner);
  const int r = d.loop(p.rows, {Schedule::Kind::Parallel, 1});
  const int base = paramBase(d, p, b.index(kir::Affine{}.add(1, -1, r)));
  const int j = d.loop(p.inner, {Schedule::Kind::Vector, 8});
  kir::Affine at = d.term(p.inner, r);
  at.add(1, -1, j);
  kir::Affine param;
  if (p.kind == ParamLayout::Kind::Blocked) param.add(1, -1, j);
  const int zp = d.input(2) ? b.load(d.in(2), param, base) : -1;
  b.store(
      d.out(0), at,
      quantizeElement(b, out, xt, b.load(d.in(0), at), st, b.load(d.in(1), param, base), zt, zp));
  b.endLoop();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// y = (x - zero_point) * scale in the scale's type: the difference is exact
// (i64), the product in f32 (f64 for an f64 scale), then rounded to a
// 16-bit scale type.
Status lowerDequantize(DispatchBuilder &d) {
  const DType xt = d.inputType(0), st = d.inputType(1);
  if (!isInt(xt) || xt == DType::U64)
    return makeError("expects an integer input, got ", dtypeName(xt));
  if (!isFloat(st)) return makeError("scale must be a float tensor, got ", dtypeName(st));
  if (d.input(2) && d.inputType(2) != xt)
    return makeError("zero point is ", dtypeName(d.inputType(2)), ", input is ", dtypeName(xt));
  KILN_ASSIGN_OR_RETURN(ParamLayout p, paramLayout(d));
  checkZeroPoint(d, 2);
  d.setOutput(0, d.dims(0), st);

  kir::KernelBuilder &b = d.beginKernel(p.rows, p.inner);
  const int r = d.loop(p.rows, {Schedule::Kind::Parallel, 1});
  const int base = paramBase(d, p, b.index(kir::Affine{}.add(1, -1, r)));
  const int j = d.loop(p.inner, {Schedule::Kind::Vector, 8});
  kir::Affine at = d.term(p.inner, r);
  at.add(1, -1, j);
  kir::Affine param;
  if (p.kind == ParamLayout::Kind::Blocked) param.add(1, -1, j);
  const int zp = d.input(2) ? b.load(d.in(2), param, base) : -1;
  b.store(d.out(0), at,
          dequantizeElement(b, xt, b.load(d.in(0), at), st, b.load(d.in(1), param, base), zp));
  b.endLoop();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// u8 quantization with scale = (max - min) / 255 over [min(x, 0), max(x, 0)]
// (1 when that range is empty) and zero point round(-min / scale), all in
// f32 as ONNX Runtime computes them. Kernel 0 finds the range and the two
// parameters (one call: it is one pass over x), kernel 1 quantizes rows in
// parallel. The parameters go through scratch so that absent optional
// outputs need no special case.
Status lowerDynamicQuantize(DispatchBuilder &d) {
  const DType xt = d.inputType(0);
  if (!isFloat(xt)) return makeError("expects a float input, got ", dtypeName(xt));
  const int rank = d.inputRank(0);
  if (rank < 0) return makeError("needs an input of known rank");
  const std::vector<SVal> dims = d.dims(0);
  d.setOutput(0, dims, DType::U8);
  d.setOutput(1, {}, DType::F32);
  d.setOutput(2, {}, DType::U8);
  const int params = d.addScratch(DType::F32, d.c(2)); // scale, zero point
  const SVal n = d.numel(0);
  const SVal inner = rank == 0 ? d.c(1) : dims.back();
  const SVal rows = d.floorDiv(n, d.max(inner, d.c(1)));
  const kir::Affine zero;

  {
    kir::KernelBuilder &b = d.beginKernel();
    const int lo = b.addVar("lo", DType::F32), hi = b.addVar("hi", DType::F32);
    b.varWrite(lo, b.constant(DType::F32, 0));
    b.varWrite(hi, b.constant(DType::F32, 0));
    const int i = d.loop(n, {Schedule::Kind::Vector, 8});
    // The interpreter's std::min / std::max never let a NaN win; as the
    // range starts at [0, 0], a NaN read as 0 changes nothing, and then min
    // and max (which would propagate it) vectorize as plain reductions. The
    // sign of a zero bound does not reach the scale or the zero point.
    int x = convert(b, DType::F32, xt, b.load(d.in(0), kir::Affine{}.add(1, -1, i)));
    x = b.select(DType::F32, b.compare(Opcode::Eq, DType::F32, x, x), x, b.constant(DType::F32, 0));
    b.varWrite(lo, b.binary(Opcode::Min, DType::F32, b.varRead(lo), x));
    b.varWrite(hi, b.binary(Opcode::Max, DType::F32, b.varRead(hi), x));
    b.endLoop();
    const int l2 = b.varRead(lo), h2 = b.varRead(hi);
    const int range = b.binary(Opcode::Sub, DType::F32, h2, l2);
    const int scale =
        b.select(DType::F32, b.compare(Opcode::Eq, DType::F32, h2, l2), b.constant(DType::F32, 1),
                 b.binary(Opcode::Div, DType::F32, range, b.constant(DType::F32, 255)));
    const int negLo = b.binary(Opcode::Sub, DType::F32, b.constant(DType::F32, 0), l2);
    const int zpRounded =
        b.unary(Opcode::Round, DType::F32, b.binary(Opcode::Div, DType::F32, negLo, scale));
    const int zp = saturateRounded(b, DType::U8, DType::F32, zpRounded, b.constant(DType::F64, 0));
    b.store(d.scratch(params), zero, scale);
    b.store(d.scratch(params), kir::Affine::constant(1), b.cast(DType::F32, DType::U8, zp));
    if (d.node().output(1)) b.store(d.out(1), zero, scale);
    if (d.node().output(2)) b.store(d.out(2), zero, zp);
    d.endKernel();
  }

  kir::KernelBuilder &b = d.beginKernel(rows, inner);
  const int r = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int scale = b.load(d.scratch(params), zero);
  const int zp =
      b.cast(DType::F64, DType::F32, b.load(d.scratch(params), kir::Affine::constant(1)));
  const int j = d.loop(inner, {Schedule::Kind::Vector, 8});
  kir::Affine at = d.term(inner, r);
  at.add(1, -1, j);
  const int x = convert(b, DType::F32, xt, b.load(d.in(0), at));
  const int q = b.unary(Opcode::Round, DType::F32, b.binary(Opcode::Div, DType::F32, x, scale));
  b.store(d.out(0), at, saturateRounded(b, DType::U8, DType::F32, q, zp));
  b.endLoop();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

} // namespace
} // namespace kiln::lower
