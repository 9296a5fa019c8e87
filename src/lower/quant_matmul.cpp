// Kernel IR lowerings of the integer matrix products (quant_lowering.h):
// MatMulInteger (i32 result) and QLinearMatMul (requantized to u8/i8).
// numpy matmul semantics: batch dims broadcast, a 1-d A is a row vector and
// a 1-d B a column vector whose unit axis the result drops. Zero points and
// scales are per tensor, per row of A or per column of B.
//
// The kernel runs the rows of the result (batch x M) in parallel and, like
// the interpreter, in i-k-j order: each (A(i, k) - a_zp) scales row k of
// (B - b_zp) into the row of the result, so the innermost loop is a vector
// loop over contiguous columns. MatMulInteger accumulates in i32, whose
// wrapping adds give the interpreter's i64 sum truncated to i32;
// QLinearMatMul needs the whole sum (it converts it to f32), so it
// accumulates in an i64 scratch row before requantizing.
#include "lower/quant_lowering.h"

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;
using namespace quant;

// The sizes of one integer matmul; a and b are the node's input indices.
struct MatmulPlan {
  int a = 0, b = 1;
  SVal m, k, n;
  SVal rows;                          // prod(batch) * m
  std::vector<SVal> batch;            // the broadcast batch dims
  std::vector<SVal> aStride, bStride; // per batch dim, 0 where broadcast
  bool batched = false;               // B has batch dims (A's row r is not at r * k)
  std::vector<SVal> out;              // the result's dims
};

Expected<MatmulPlan> matmulPlan(DispatchBuilder &d, int a, int b) {
  const int ra = d.inputRank(a), rb = d.inputRank(b);
  if (ra < 1 || rb < 1) return makeError("needs matrix operands of known rank >= 1");
  MatmulPlan p;
  p.a = a;
  p.b = b;
  std::vector<SVal> ad = d.dims(a), bd = d.dims(b);
  if (ra == 1) ad.insert(ad.begin(), d.c(1));
  if (rb == 1) bd.push_back(d.c(1));
  p.m = ad[ad.size() - 2];
  p.k = ad.back();
  p.n = bd.back();
  const SVal bk = bd[bd.size() - 2];
  d.check(d.eq(bk, p.k), "inner dims do not match: A has {} columns, B has {} rows", {p.k, bk});
  const size_t na = ad.size() - 2, nb = bd.size() - 2, nbatch = std::max(na, nb);
  p.batched = nb > 0;
  // Strides of each operand's batch dims, then aligned to the right.
  SVal aNext = d.mul(p.m, p.k), bNext = d.mul(bk, p.n);
  std::vector<SVal> aS(na), bS(nb);
  for (size_t i = na; i-- > 0;) {
    aS[i] = aNext;
    aNext = d.mul(aNext, ad[i]);
  }
  for (size_t i = nb; i-- > 0;) {
    bS[i] = bNext;
    bNext = d.mul(bNext, bd[i]);
  }
  for (size_t i = 0; i < nbatch; ++i) {
    const bool inA = i + na >= nbatch, inB = i + nb >= nbatch;
    const SVal da = inA ? ad[i + na - nbatch] : d.c(1), db = inB ? bd[i + nb - nbatch] : d.c(1);
    d.check(d.lor(d.eq(da, db), d.lor(d.eq(da, d.c(1)), d.eq(db, d.c(1)))),
            "batch dims {} and {} do not broadcast", {da, db});
    const SVal dim = d.select(d.eq(da, d.c(1)), db, da);
    p.batch.push_back(dim);
    p.aStride.push_back(inA ? d.select(d.eq(da, d.c(1)), d.c(0), aS[i + na - nbatch]) : d.c(0));
    p.bStride.push_back(inB ? d.select(d.eq(db, d.c(1)), d.c(0), bS[i + nb - nbatch]) : d.c(0));
  }
  p.rows = d.mul(d.product(p.batch), p.m);
  p.out = p.batch;
  if (ra > 1) p.out.push_back(p.m);
  if (rb > 1) p.out.push_back(p.n);
  return p;
}

// Row r's element offsets into A and B (i64 values), and its row i of A.
struct RowOffsets {
  int aOff = -1, bOff = -1, i = -1;
};

RowOffsets rowOffsets(DispatchBuilder &d, const MatmulPlan &p, int r) {
  kir::KernelBuilder &b = d.kb();
  RowOffsets o;
  const int rv = b.index(kir::Affine{}.add(1, -1, r));
  const int m = d.value(p.m), k = d.value(p.k);
  o.i = imod(b, rv, m);
  if (!p.batched) {
    // A's batch dims are the result's: row r of the result is row r of A.
    o.aOff = imul(b, rv, k);
    o.bOff = i64(b, 0);
    return o;
  }
  int rest = idiv(b, rv, m);
  o.aOff = imul(b, o.i, k);
  o.bOff = i64(b, 0);
  for (size_t dim = p.batch.size(); dim-- > 0;) {
    const int size = d.value(p.batch[dim]);
    const int idx = imod(b, rest, size);
    rest = idiv(b, rest, size);
    o.aOff = iadd(b, o.aOff, imul(b, idx, d.value(p.aStride[dim])));
    o.bOff = iadd(b, o.bOff, imul(b, idx, d.value(p.bStride[dim])));
  }
  return o;
}

// Checks the operand types and the zero points' sizes; returns their
// strides (per row of A, per column of B).
Expected<std::pair<SVal, SVal>> checkOperands(DispatchBuilder &d, const MatmulPlan &p, int aZp,
                                              int bZp) {
  const DType at = d.inputType(p.a), bt = d.inputType(p.b);
  if (!is8Bit(at) || !is8Bit(bt))
    return makeError("expects u8 or i8 inputs, got ", dtypeName(at), " and ", dtypeName(bt));
  for (int z : {aZp, bZp})
    if (d.input(z) && !isInt(d.inputType(z)))
      return makeError("zero points must be integer tensors, got ", dtypeName(d.inputType(z)));
  return std::make_pair(channelStride(d, aZp, p.m, "A zero point"),
                        channelStride(d, bZp, p.n, "B zero point"));
}

// Rows of B taken at once: each pass over the result row adds this many
// products, so the row is loaded and stored a quarter as often.
constexpr int kBlock = 4;

struct RowContext {
  const MatmulPlan &p;
  RowOffsets o;
  int aZp, bZp;
  std::pair<SVal, SVal> zpStrides;
  int az;          // A's zero point for this row (i32)
  kir::Affine row; // the row's first element in `acc`
  int acc;
  DType accType;
};

// acc[j] += sum_{t < count} (A(i, k0 + t) - a_zp) * (B(k0 + t, j) - b_zp),
// with k0 given as an affine index into A's row (aK) and as the affine
// offset of B's row k0 (bRow). The sum of up to kBlock products of 9-bit
// values fits an i32.
void addProducts(DispatchBuilder &d, const RowContext &c, const kir::Affine &aK,
                 const kir::Affine &bRow, int count) {
  kir::KernelBuilder &b = d.kb();
  const MatmulPlan &p = c.p;
  std::vector<int> av;
  for (int t = 0; t < count; ++t) {
    kir::Affine at = aK;
    at.add(t, -1, -1);
    const int a = convert(b, DType::I32, d.inputType(p.a), b.load(d.in(p.a), at, c.o.aOff));
    av.push_back(b.binary(Opcode::Sub, DType::I32, a, c.az));
  }
  const int j = d.loop(p.n, {Schedule::Kind::Vector, 8});
  const int bz = zeroPointAt(d, c.bZp, d.term(c.zpStrides.second, j));
  int sum = -1;
  for (int t = 0; t < count; ++t) {
    kir::Affine bAt = bRow;
    d.addTerm(bAt, p.n, -1, t);
    bAt.add(1, -1, j);
    const int bv =
        b.binary(Opcode::Sub, DType::I32,
                 convert(b, DType::I32, d.inputType(p.b), b.load(d.in(p.b), bAt, c.o.bOff)), bz);
    const int prod = b.binary(Opcode::Mul, DType::I32, av[size_t(t)], bv);
    sum = sum < 0 ? prod : b.binary(Opcode::Add, DType::I32, sum, prod);
  }
  kir::Affine at = c.row;
  at.add(1, -1, j);
  b.store(
      c.acc, at,
      b.binary(Opcode::Add, c.accType, b.load(c.acc, at), convert(b, c.accType, DType::I32, sum)));
  b.endLoop();
}

// Emits, inside the parallel loop over r, the accumulation of row r into
// buffer `acc` (of type accType, at r * n): acc[j] = sum_k (A(i, k) -
// a_zp) * (B(k, j) - b_zp), kBlock rows of B at a time, then the rest.
void accumulateRow(DispatchBuilder &d, const MatmulPlan &p, int r, int aZp, int bZp,
                   std::pair<SVal, SVal> zpStrides, int acc, DType accType) {
  kir::KernelBuilder &b = d.kb();
  RowContext c{p, rowOffsets(d, p, r), aZp, bZp, zpStrides, -1, d.term(p.n, r), acc, accType};
  c.az = zeroPointAt(d, aZp, {}, imul(b, c.o.i, d.value(zpStrides.first)));
  {
    const int j = d.loop(p.n, {Schedule::Kind::Vector, 8});
    kir::Affine at = c.row;
    b.store(acc, at.add(1, -1, j), b.intConstant(accType, 0));
    b.endLoop();
  }
  const SVal blocks = d.floorDiv(p.k, d.c(kBlock));
  {
    const int g = d.loop(blocks);
    addProducts(d, c, kir::Affine{}.add(kBlock, -1, g), d.term(p.n, g, kBlock), kBlock);
    b.endLoop();
  }
  // The last k mod kBlock rows, one at a time.
  const int t = d.loop(d.sub(p.k, d.mul(blocks, d.c(kBlock))));
  kir::Affine aK = d.term(blocks, -1, kBlock);
  aK.add(1, -1, t);
  kir::Affine bRow = d.term(d.mul(blocks, p.n), -1, kBlock);
  d.addTerm(bRow, p.n, t);
  addProducts(d, c, aK, bRow, 1);
  b.endLoop();
}

} // namespace

// MatMulInteger(A, B, a_zero_point, b_zero_point) -> i32.
Status lowerMatMulInteger(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(MatmulPlan p, matmulPlan(d, 0, 1));
  KILN_ASSIGN_OR_RETURN(auto strides, checkOperands(d, p, 2, 3));
  d.setOutput(0, p.out, DType::I32);
  d.beginKernel(p.rows, d.mul(p.n, p.k));
  const int r = d.loop(p.rows, {Schedule::Kind::Parallel, 1});
  accumulateRow(d, p, r, 2, 3, strides, d.out(0), DType::I32);
  d.kb().endLoop();
  d.endKernel();
  return Status::success();
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the
// integer product requantized with the f32 scale a_scale * b_scale /
// y_scale (a_scale per tensor or row, b_scale per tensor or column).
Status lowerQLinearMatMul(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(MatmulPlan p, matmulPlan(d, 0, 3));
  KILN_ASSIGN_OR_RETURN(auto zpStrides, checkOperands(d, p, 2, 5));
  const DType out = d.inputType(7);
  if (!d.input(7) || !is8Bit(out)) return makeError("Y zero point must be u8 or i8");
  for (int s : {1, 4, 6})
    if (!isFloat(d.inputType(s)))
      return makeError("scales must be float tensors, got ", dtypeName(d.inputType(s)));
  const SVal aScale = channelStride(d, 1, p.m, "A scale");
  const SVal bScale = channelStride(d, 4, p.n, "B scale");
  channelStride(d, 6, d.c(1), "Y scale");
  channelStride(d, 7, d.c(1), "Y zero point");
  d.setOutput(0, p.out, out);
  const int acc = d.addScratch(DType::I64, d.mul(p.rows, p.n));

  kir::KernelBuilder &b = d.beginKernel(p.rows, d.mul(p.n, p.k));
  const int r = d.loop(p.rows, {Schedule::Kind::Parallel, 1});
  accumulateRow(d, p, r, 2, 5, zpStrides, d.scratch(acc), DType::I64);
  const int i = imod(b, b.index(kir::Affine{}.add(1, -1, r)), d.value(p.m));
  const int as = b.load(d.in(1), {}, imul(b, i, d.value(aScale)));
  const int ys = b.load(d.in(6), {});
  const int yz = b.cast(DType::F64, out, b.load(d.in(7), {}));
  // A serial loop: inside a vector loop float math may be reassociated
  // (kernel_ir.h), and the scale must be formed exactly as ONNX Runtime
  // forms it. The loop is O(M N), the product above O(M N K).
  const int j = d.loop(p.n);
  kir::Affine at = d.term(p.n, r);
  at.add(1, -1, j);
  const int bs = b.load(d.in(4), d.term(bScale, j));
  const int scale = combinedScale(b, d.inputType(1), as, d.inputType(4), bs, d.inputType(6), ys);
  b.store(d.out(0), at, requantize(b, out, DType::I64, b.load(d.scratch(acc), at), scale, yz));
  b.endLoop();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

} // namespace kiln::lower
