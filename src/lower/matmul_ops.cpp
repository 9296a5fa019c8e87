// Kernel IR lowering of MatMul with numpy semantics (lower/ops.h, conv
// family): batch dims broadcast, a 1-D A is a row vector and a 1-D B a
// column vector whose unit axis the result drops. Floats accumulate in f32
// (f16/bf16 widen, as the interpreter's product does) or f64; integers wrap
// in their own type, which gives the low bits the interpreter's 64-bit
// accumulator gives.
//
// One parallel iteration computes one output row: the accumulator row
// starts at 0 and each A(i, k) adds a scaled row k of B into it, four rows
// per pass summed in a register (the inner loop runs over contiguous
// columns and is vectorized); a single column (N == 1) is a dot product in
// a register instead. The row then goes
// through the output conversion and, for a Fused matmul, its epilogue.
#include "lower/conv_common.h"
#include "lower/ops.h"

namespace kiln::lower::convlower {

using kir::Affine;
using kir::Opcode;
using kir::Schedule;

// Rows of B one pass over the accumulator row adds.
constexpr int64_t kUnroll = 4;

Status emitMatMul(DispatchBuilder &d, int ai, int bi) {
  const int ra = d.inputRank(ai), rb = d.inputRank(bi);
  if (ra < 1 || rb < 1) return makeError("MatMul needs operands of known rank >= 1");
  const DType t = d.inputType(ai);
  if (d.inputType(bi) != t)
    return makeError("A is ", dtypeName(t), " but B is ", dtypeName(d.inputType(bi)));
  switch (t) {
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16:
  case DType::I32:
  case DType::I64:
  case DType::U32:
  case DType::U64:
    break;
  default:
    return makeError("MatMul of ", dtypeName(t), " is not supported");
  }
  const DType acc = accumulatorType(t);
  const std::vector<SVal> ad = d.dims(ai), bd = d.dims(bi);
  const SVal M = ra > 1 ? ad[size_t(ra - 2)] : d.c(1), K = ad[size_t(ra - 1)];
  const SVal Kb = rb > 1 ? bd[size_t(rb - 2)] : bd[0], N = rb > 1 ? bd[size_t(rb - 1)] : d.c(1);
  d.check(d.eq(K, Kb), "inner dims do not match: A has {} columns, B has {} rows", {K, Kb});

  // Batch dims, right-aligned, and each operand's stride along them (0
  // where it broadcasts).
  const size_t na = size_t(std::max(ra - 2, 0)), nb = size_t(std::max(rb - 2, 0));
  const size_t batchRank = std::max(na, nb);
  std::vector<SVal> batch(batchRank), aStride(batchRank, d.c(0)), bStride(batchRank, d.c(0));
  SVal aRun = d.mul(M, K), bRun = d.mul(K, N);
  for (size_t k = batchRank; k-- > 0;) {
    const bool inA = k + na >= batchRank, inB = k + nb >= batchRank;
    const SVal a = inA ? ad[k + na - batchRank] : d.c(1);
    const SVal bdim = inB ? bd[k + nb - batchRank] : d.c(1);
    d.check(d.lor(d.lor(d.eq(a, bdim), d.eq(a, d.c(1))), d.eq(bdim, d.c(1))),
            "batch dims do not broadcast: {} vs {}", {a, bdim});
    batch[k] = d.select(d.eq(a, d.c(1)), bdim, a);
    if (inA) {
      aStride[k] = d.select(d.eq(a, d.c(1)), d.c(0), aRun);
      aRun = d.mul(aRun, a);
    }
    if (inB) {
      bStride[k] = d.select(d.eq(bdim, d.c(1)), d.c(0), bRun);
      bRun = d.mul(bRun, bdim);
    }
  }
  std::vector<SVal> outDims = batch;
  if (ra > 1) outDims.push_back(M);
  if (rb > 1) outDims.push_back(N);
  KILN_ASSIGN_OR_RETURN(Epilogue ep, planEpilogue(d, outDims));
  if (!ep.nodes.empty() && rb < 2) return makeError("a fused matmul needs a B of rank >= 2");
  d.setOutput(0, outDims);
  const int accBuf =
      d.outputType(0) == acc ? d.out(0) : d.scratch(d.addScratch(acc, d.product(outDims)));

  std::vector<SVal> rowDims = batch;
  rowDims.push_back(M);
  const SVal rows = d.product(rowDims);
  const bool dot = d.constant(N) == 1;

  kir::KernelBuilder &b = d.beginKernel(rows, d.mul(K, N));
  I64 i{b};
  const int r = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int rv = b.index(Affine{}.add(1, -1, r));
  const std::vector<int> coords = unflatten(d, rv, rowDims);
  int aOff = i.mul(coords.back(), d.value(K)), bOff = i.c(0);
  for (size_t k = 0; k < batchRank; ++k) {
    if (d.constant(aStride[k]) != 0) aOff = i.add(aOff, i.mul(coords[k], d.value(aStride[k])));
    if (d.constant(bStride[k]) != 0) bOff = i.add(bOff, i.mul(coords[k], d.value(bStride[k])));
  }
  const int accRow = i.mul(rv, d.value(N));
  if (dot) {
    const int sum = b.addVar("sum", acc);
    b.varWrite(sum, b.constant(acc, 0));
    const int k = d.loop(K, {Schedule::Kind::Vector, 8});
    const int av = convert(b, acc, t, b.load(d.in(ai), Affine{}.add(1, -1, k), aOff));
    const int bv = convert(b, acc, t, b.load(d.in(bi), Affine{}.add(1, -1, k), bOff));
    b.varWrite(sum, b.binary(Opcode::Add, acc, b.varRead(sum), b.binary(Opcode::Mul, acc, av, bv)));
    b.endLoop();
    b.store(accBuf, Affine{}, b.varRead(sum), accRow);
  } else {
    int j = d.loop(N, {Schedule::Kind::Vector, 8});
    b.store(accBuf, Affine{}.add(1, -1, j), b.constant(acc, 0), accRow);
    b.endLoop();
    // acc[j] += a[k] * B[k, j], kUnroll rows of B per pass over the
    // accumulator row (summed in order in a register), then the rest.
    const SVal blocks = d.floorDiv(K, d.c(kUnroll));
    const int kk = d.loop(blocks);
    std::vector<int> av;
    for (int64_t u = 0; u < kUnroll; ++u) {
      Affine aAt = Affine{}.add(kUnroll, -1, kk);
      if (u) aAt.add(u, -1, -1);
      av.push_back(convert(b, acc, t, b.load(d.in(ai), aAt, aOff)));
    }
    j = d.loop(N, {Schedule::Kind::Vector, 8});
    const Affine at = Affine{}.add(1, -1, j);
    int sum = b.load(accBuf, at, accRow);
    for (int64_t u = 0; u < kUnroll; ++u) {
      Affine bAt = d.term(N, kk, kUnroll);
      if (u) d.addTerm(bAt, N, -1, u);
      bAt.add(1, -1, j);
      sum = b.binary(Opcode::Add, acc, sum,
                     b.binary(Opcode::Mul, acc, av[size_t(u)],
                              convert(b, acc, t, b.load(d.in(bi), bAt, bOff))));
    }
    b.store(accBuf, at, sum, accRow);
    b.endLoop();
    b.endLoop();
    const SVal done = d.mul(blocks, d.c(kUnroll));
    const int k = d.loop(d.sub(K, done));
    Affine aAt = d.term(done);
    aAt.add(1, -1, k);
    const int a = convert(b, acc, t, b.load(d.in(ai), aAt, aOff));
    j = d.loop(N, {Schedule::Kind::Vector, 8});
    Affine bAt = d.term(d.mul(done, N));
    d.addTerm(bAt, N, k);
    bAt.add(1, -1, j);
    const Affine at2 = Affine{}.add(1, -1, j);
    b.store(
        accBuf, at2,
        b.binary(Opcode::Add, acc, b.load(accBuf, at2, accRow),
                 b.binary(Opcode::Mul, acc, a, convert(b, acc, t, b.load(d.in(bi), bAt, bOff)))),
        accRow);
    b.endLoop();
    b.endLoop();
  }
  // The row's output coordinates: the batch, then i unless A is 1-D.
  std::vector<int> rowCoords(coords.begin(), coords.end() - (ra > 1 ? 0 : 1));
  KILN_RETURN_IF_ERROR(emitRowOutput(d, ep, accBuf, acc, accRow, accRow, N, rowCoords));
  b.endLoop();
  d.endKernel();
  return Status::success();
}

Status lowerMatMul(DispatchBuilder &d) {
  return emitMatMul(d, 0, 1);
}

} // namespace kiln::lower::convlower
