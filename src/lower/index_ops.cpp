// Lowerings of ops whose element indices are computed from the loop
// position or read from data (lower/ops.h): Trilu, Gather, GatherElements,
// GatherND, ScatterElements, ScatterND, OneHot, Range, EyeLike and
// ReverseSequence. Indices read from data are checked in the kernel: one
// outside [-dim, dim) stores a status code (a run-time error naming the
// node) and is never used to address memory.
#include "lower/loops.h"
#include "lower/ops.h"

#include <cmath>
#include <string>

namespace kiln::lower {

namespace {

using kir::Affine;
using kir::Opcode;
using kir::Schedule;

Status lowerTrilu(DispatchBuilder &d);
Status lowerGather(DispatchBuilder &d);
Status lowerGatherElements(DispatchBuilder &d);
Status lowerGatherNd(DispatchBuilder &d);
Status lowerScatterElements(DispatchBuilder &d);
Status lowerScatterNd(DispatchBuilder &d);
Status lowerOneHot(DispatchBuilder &d);
Status lowerRange(DispatchBuilder &d);
Status lowerEyeLike(DispatchBuilder &d);
Status lowerReverseSequence(DispatchBuilder &d);

} // namespace

LowerFn indexLowering(OpKind op) {
  switch (op) {
  case OpKind::Trilu:
    return lowerTrilu;
  case OpKind::Gather:
    return lowerGather;
  case OpKind::GatherElements:
    return lowerGatherElements;
  case OpKind::GatherND:
    return lowerGatherNd;
  case OpKind::ScatterElements:
    return lowerScatterElements;
  case OpKind::ScatterND:
    return lowerScatterNd;
  case OpKind::OneHot:
    return lowerOneHot;
  case OpKind::Range:
    return lowerRange;
  case OpKind::EyeLike:
    return lowerEyeLike;
  case OpKind::ReverseSequence:
    return lowerReverseSequence;
  default:
    return nullptr;
  }
}

namespace {

std::vector<SVal> slice(const std::vector<SVal> &v, size_t from, size_t to) {
  return std::vector<SVal>(v.begin() + long(from), v.begin() + long(to));
}

bool isConstant(const DispatchBuilder &d, SVal v, int64_t k) {
  auto c = d.constant(v);
  return c && *c == k;
}

int rowIndex(kir::KernelBuilder &b, int loopVar) {
  return b.index(Affine{}.add(1, -1, loopVar));
}

int negate(kir::KernelBuilder &b, int cond) {
  return b.unary(Opcode::Not, DType::Bool, cond);
}

Status needIntegerIndices(const DispatchBuilder &d, int input, const char *op) {
  if (!isInt(d.inputType(input)))
    return makeError(op, " needs integer indices, got ", dtypeName(d.inputType(input)));
  return Status::success();
}

// y = x where the element's column minus row is >= k (upper) or <= k
// (lower), else 0. Rows of the trailing matrix run in parallel.
Status lowerTrilu(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int rank = d.inputRank(0);
  if (rank < 2) return makeError("Trilu needs an input of known rank >= 2");
  std::vector<SVal> dims = d.dims(0);
  d.setOutput(0, dims);
  const SVal rows = dims[size_t(rank - 2)], cols = dims[size_t(rank - 1)];
  const SVal allRows = d.floorDiv(d.numel(0), d.max(cols, d.c(1)));
  const SVal k = d.input(1) ? d.elem(1, 0) : d.c(0);
  const bool upper = d.node().getInt("upper") != 0;
  const DType t = d.inputType(0);

  kir::KernelBuilder &b = d.beginKernel(allRows, cols);
  const int r = d.loop(allRows, {Schedule::Kind::Parallel, 1});
  // diagonal offset of this row: k + (r mod rows)
  const int row =
      b.binary(Opcode::Mod, DType::I64, b.index(kir::Affine{}.add(1, -1, r)), d.value(rows));
  const int bound = b.binary(Opcode::Add, DType::I64, d.value(k), row);
  const int j = d.loop(cols, {Schedule::Kind::Vector, 8});
  kir::Affine at = d.term(cols, r);
  at.add(1, -1, j);
  const int col = b.index(kir::Affine{}.add(1, -1, j));
  const int keep = b.compare(upper ? Opcode::Ge : Opcode::Le, DType::I64, col, bound);
  const int x = b.load(d.in(0), at);
  b.store(d.out(0), at, b.select(t, keep, x, b.constant(t, 0)));
  b.endLoop();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// y[o, j, i] = x[o, indices[j], i] over [outer, indices, inner]. The
// (o, j) pairs run in parallel; each copies a run of `inner` elements.
Status lowerGather(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0), q = d.inputRank(1);
  if (r < 1 || q < 0)
    return makeError("Gather needs data of known rank >= 1 and indices of known rank");
  KILN_RETURN_IF_ERROR(needIntegerIndices(d, 1, "Gather"));
  KILN_ASSIGN_OR_RETURN(int axis, resolveAxis(d.node().getInt("axis"), r, "axis"));
  const std::vector<SVal> dims = d.dims(0), idims = d.dims(1);
  std::vector<SVal> outDims = slice(dims, 0, size_t(axis));
  outDims.insert(outDims.end(), idims.begin(), idims.end());
  outDims.insert(outDims.end(), dims.begin() + axis + 1, dims.end());
  d.setOutput(0, outDims, d.inputType(0));
  const int code =
      d.statusCode("an index is out of range for axis " + std::to_string(axis) + " of the data");
  const SVal outer = d.product(slice(dims, 0, size_t(axis))), n = d.product(idims);
  const SVal inner = d.product(slice(dims, size_t(axis) + 1, dims.size()));
  const SVal rows = d.mul(outer, n);

  kir::KernelBuilder &b = d.beginKernel(rows, inner);
  const int row = d.loop(rows, {Schedule::Kind::Parallel, 1});
  // (o, j) of the row; o is not needed when there is one outer block
  const std::vector<int> oj = isConstant(d, outer, 1) ? std::vector<int>{-1, rowIndex(b, row)}
                                                      : unflatten(d, rowIndex(b, row), {outer, n});
  const int idx = b.load(d.in(1), Affine{}, oj[1]);
  const CheckedIndex ci = checkIndex(b, d.inputType(1), idx, d.value(dims[size_t(axis)]));
  d.raise(negate(b, ci.ok), code);
  b.beginIf(ci.ok);
  const int srcRow =
      addValues(b, isConstant(d, outer, 1) ? -1 : mulValue(d, oj[0], dims[size_t(axis)]), ci.index);
  const int srcBase = mulValue(d, srcRow, inner);
  const int j = d.loop(inner, {Schedule::Kind::Vector, kVectorWidth});
  Affine at = d.term(inner, row);
  at.add(1, -1, j);
  b.store(d.out(0), at, b.load(d.in(0), Affine{}.add(1, -1, j), srcBase));
  b.endLoop();
  b.endIf();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// y[p] = x[p with its `axis` coordinate replaced by indices[p]] for every
// position p of the indices.
Status lowerGatherElements(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0);
  if (r < 1 || d.inputRank(1) != r)
    return makeError("GatherElements needs data and indices of one known rank >= 1");
  KILN_RETURN_IF_ERROR(needIntegerIndices(d, 1, "GatherElements"));
  KILN_ASSIGN_OR_RETURN(int axis, resolveAxis(d.node().getInt("axis"), r, "axis"));
  const std::vector<SVal> dims = d.dims(0), idims = d.dims(1);
  for (int a = 0; a < r; ++a)
    if (a != axis)
      d.check(d.le(idims[size_t(a)], dims[size_t(a)]),
              "indices dim {} exceeds data dim {} on axis " + std::to_string(a),
              {idims[size_t(a)], dims[size_t(a)]});
  d.setOutput(0, idims, d.inputType(0));
  const int code =
      d.statusCode("an index is out of range for axis " + std::to_string(axis) + " of the data");
  const std::vector<SVal> strides = rowMajorStrides(d, dims);

  ElementLoops l = beginElementKernel(d, idims);
  kir::KernelBuilder &b = d.kb();
  int base = -1; // the data offset of the position, its axis coordinate left out
  for (int a = 0; a + 1 < r; ++a)
    if (a != axis) base = addValues(b, base, mulValue(d, l.coords[size_t(a)], strides[size_t(a)]));
  const Affine at = l.flat(d);
  const CheckedIndex ci =
      checkIndex(b, d.inputType(1), b.load(d.in(1), at), d.value(dims[size_t(axis)]));
  d.raise(negate(b, ci.ok), code);
  b.beginIf(ci.ok);
  const int src = addValues(b, base, mulValue(d, ci.index, strides[size_t(axis)]));
  Affine last;
  if (axis != r - 1) last.add(1, -1, l.last);
  b.store(d.out(0), at, b.load(d.in(0), last, src));
  b.endIf();
  endElementKernel(d, l);
  return Status::success();
}

// Index tuples of length k (the last dim of the indices) address slices
// of the data after `batch_dims` batch dims; each tuple copies its slice.
Status lowerGatherNd(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0), q = d.inputRank(1);
  if (r < 1 || q < 1) return makeError("GatherND needs data and indices of known rank >= 1");
  KILN_RETURN_IF_ERROR(needIntegerIndices(d, 1, "GatherND"));
  const std::optional<int64_t> kk = d.constant(d.dim(1, q - 1));
  if (!kk) return makeError("GatherND needs the last dim of the indices known at compile time");
  const int64_t bd = d.node().getInt("batch_dims"), k = *kk;
  if (bd < 0 || bd >= q || bd + k > r)
    return makeError("GatherND: index tuples of length ", k, " with batch_dims ", bd,
                     " do not fit data of rank ", r);
  const std::vector<SVal> dims = d.dims(0), idims = d.dims(1);
  for (int64_t a = 0; a < bd; ++a)
    d.check(d.eq(dims[size_t(a)], idims[size_t(a)]),
            "batch dim " + std::to_string(a) + " differs: data {}, indices {}",
            {dims[size_t(a)], idims[size_t(a)]});
  std::vector<SVal> outDims = slice(idims, 0, size_t(q - 1));
  const std::vector<SVal> sliceDims = slice(dims, size_t(bd + k), dims.size());
  outDims.insert(outDims.end(), sliceDims.begin(), sliceDims.end());
  d.setOutput(0, outDims, d.inputType(0));
  const int code = d.statusCode("an index is out of range for its axis of the data");
  const SVal perBatch = d.product(slice(idims, size_t(bd), size_t(q - 1)));
  const SVal tuples = d.mul(d.product(slice(dims, 0, size_t(bd))), perBatch);
  const SVal sliceSize = d.product(sliceDims);
  const SVal batchStride = d.product(slice(dims, size_t(bd), dims.size()));
  const std::vector<SVal> strides = rowMajorStrides(d, dims);

  kir::KernelBuilder &b = d.beginKernel(tuples, sliceSize);
  const int t = d.loop(tuples, {Schedule::Kind::Parallel, 1});
  int off = -1;
  if (bd > 0) {
    const int batch = isConstant(d, perBatch, 1)
                          ? rowIndex(b, t)
                          : b.binary(Opcode::Div, DType::I64, rowIndex(b, t), d.value(perBatch));
    off = mulValue(d, batch, batchStride);
  }
  int ok = -1;
  for (int64_t m = 0; m < k; ++m) {
    const int idx = b.load(d.in(1), Affine{}.add(k, -1, t).add(m, -1, -1));
    const CheckedIndex ci = checkIndex(b, d.inputType(1), idx, d.value(dims[size_t(bd + m)]));
    ok = ok < 0 ? ci.ok : b.binary(Opcode::And, DType::Bool, ok, ci.ok);
    off = addValues(b, off, mulValue(d, ci.index, strides[size_t(bd + m)]));
  }
  if (ok >= 0) {
    d.raise(negate(b, ok), code);
    b.beginIf(ok);
  }
  const int j = d.loop(sliceSize, {Schedule::Kind::Vector, kVectorWidth});
  Affine at = d.term(sliceSize, t);
  at.add(1, -1, j);
  b.store(d.out(0), at, b.load(d.in(0), Affine{}.add(1, -1, j), off));
  b.endLoop();
  if (ok >= 0) b.endIf();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// ---- scatters ------------------------------------------------------------------

enum class Reduction { None, Add, Mul, Max, Min };

Expected<Reduction> readReduction(const Node &node) {
  const std::string r = node.getString("reduction");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  return makeError("unknown reduction '", r, "'");
}

// old (+) update as the interpreter combines them: integers wrap, 16-bit
// floats round once, max and min are std::max and std::min (so a NaN
// update does not replace a number), and bools add as "or" and multiply
// as "and".
int combine(kir::KernelBuilder &b, DType t, Reduction r, int old, int update) {
  if (t == DType::Bool) {
    if (r == Reduction::None) return update;
    const bool isOr = r == Reduction::Add || r == Reduction::Max;
    return b.binary(isOr ? Opcode::Or : Opcode::And, t, old, update);
  }
  switch (r) {
  case Reduction::None:
    return update;
  case Reduction::Add:
    return b.binary(Opcode::Add, t, old, update);
  case Reduction::Mul:
    return b.binary(Opcode::Mul, t, old, update);
  case Reduction::Max:
    return b.select(t, b.compare(Opcode::Lt, t, old, update), update, old);
  case Reduction::Min:
    return b.select(t, b.compare(Opcode::Lt, t, update, old), update, old);
  }
  return update;
}

// Updates are written in the interpreter's order wherever two of them can
// meet: positions that differ on an axis other than `axis` write different
// elements, so those lines run in parallel, and each line runs its
// positions along `axis` in order.
Status lowerScatterElements(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0);
  if (r < 1 || d.inputRank(1) != r || d.inputRank(2) != r)
    return makeError("ScatterElements needs data, indices and updates of one known rank >= 1");
  KILN_RETURN_IF_ERROR(needIntegerIndices(d, 1, "ScatterElements"));
  KILN_ASSIGN_OR_RETURN(Reduction red, readReduction(d.node()));
  KILN_ASSIGN_OR_RETURN(int axis, resolveAxis(d.node().getInt("axis"), r, "axis"));
  const DType t = d.inputType(0);
  const std::vector<SVal> dims = d.dims(0), idims = d.dims(1), udims = d.dims(2);
  for (int a = 0; a < r; ++a) {
    d.check(d.eq(udims[size_t(a)], idims[size_t(a)]),
            "updates dim {} differs from indices dim {} on axis " + std::to_string(a),
            {udims[size_t(a)], idims[size_t(a)]});
    if (a != axis)
      d.check(d.le(idims[size_t(a)], dims[size_t(a)]),
              "indices dim {} exceeds data dim {} on axis " + std::to_string(a),
              {idims[size_t(a)], dims[size_t(a)]});
  }
  d.setOutput(0, dims, t);
  const int code =
      d.statusCode("an index is out of range for axis " + std::to_string(axis) + " of the data");
  emitFlatCopy(d, d.in(0), d.out(0), d.numel(0));

  const std::vector<SVal> strides = rowMajorStrides(d, dims), istrides = rowMajorStrides(d, idims);
  std::vector<SVal> lineDims;
  for (int a = 0; a < r; ++a)
    if (a != axis) lineDims.push_back(idims[size_t(a)]);
  const SVal lines = d.product(lineDims), along = idims[size_t(axis)];
  kir::KernelBuilder &b = d.beginKernel(lines, along);
  const int p = d.loop(lines, {Schedule::Kind::Parallel, 1});
  const std::vector<int> coords = unflatten(d, rowIndex(b, p), lineDims);
  int dstBase = -1, srcBase = -1;
  for (int a = 0, c = 0; a < r; ++a) {
    if (a == axis) continue;
    dstBase = addValues(b, dstBase, mulValue(d, coords[size_t(c)], strides[size_t(a)]));
    srcBase = addValues(b, srcBase, mulValue(d, coords[size_t(c)], istrides[size_t(a)]));
    ++c;
  }
  const int i = d.loop(along);
  const Affine at = d.term(istrides[size_t(axis)], i);
  const int update = b.load(d.in(2), at, srcBase);
  const CheckedIndex ci =
      checkIndex(b, d.inputType(1), b.load(d.in(1), at, srcBase), d.value(dims[size_t(axis)]));
  d.raise(negate(b, ci.ok), code);
  b.beginIf(ci.ok);
  const int dst = addValues(b, dstBase, mulValue(d, ci.index, strides[size_t(axis)]));
  const int old = b.load(d.out(0), Affine{}, dst);
  b.store(d.out(0), Affine{}, combine(b, t, red, old, update), dst);
  b.endIf();
  b.endLoop();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// The pieces of a ScatterND that its kernels share.
struct ScatterNdPlan {
  DType type = DType::F32;
  Reduction reduction = Reduction::None;
  int64_t k = 0; // index tuple length
  std::vector<SVal> dims, strides;
  SVal tuples, slice;
  int code = 0;
};

// One pass over the index tuples that updates elements [start, start +
// count) of every tuple's slice, where `start` is blockVar * count (a
// parallel loop over blocks) or `tailStart`.
void emitScatterNdPass(DispatchBuilder &d, const ScatterNdPlan &p, int blockVar, SVal count,
                       SVal tailStart) {
  kir::KernelBuilder &b = d.kb();
  const int t = d.loop(p.tuples);
  int off = -1, ok = -1;
  for (int64_t m = 0; m < p.k; ++m) {
    const int idx = b.load(d.in(1), Affine{}.add(p.k, -1, t).add(m, -1, -1));
    const CheckedIndex ci = checkIndex(b, d.inputType(1), idx, d.value(p.dims[size_t(m)]));
    ok = ok < 0 ? ci.ok : b.binary(Opcode::And, DType::Bool, ok, ci.ok);
    off = addValues(b, off, mulValue(d, ci.index, p.strides[size_t(m)]));
  }
  if (ok >= 0) {
    d.raise(negate(b, ok), p.code);
    b.beginIf(ok);
  }
  const int j = d.loop(count, {Schedule::Kind::Vector, kVectorWidth});
  Affine e; // the element of the slice
  if (blockVar >= 0)
    d.addTerm(e, count, blockVar);
  else
    d.addTerm(e, tailStart);
  e.add(1, -1, j);
  Affine u = d.term(p.slice, t);
  u.terms.insert(u.terms.end(), e.terms.begin(), e.terms.end());
  const int old = b.load(d.out(0), e, off);
  b.store(d.out(0), e, combine(b, p.type, p.reduction, old, b.load(d.in(2), u)), off);
  b.endLoop();
  if (ok >= 0) b.endIf();
  b.endLoop();
}

// Two tuples may name one slice, so tuples run in order; the slices are
// split into blocks of kBlock elements that run in parallel (a block sees
// every tuple in order), and a serial pass takes the remainder.
Status lowerScatterNd(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0), q = d.inputRank(1);
  if (r < 1 || q < 1) return makeError("ScatterND needs data and indices of known rank >= 1");
  KILN_RETURN_IF_ERROR(needIntegerIndices(d, 1, "ScatterND"));
  ScatterNdPlan p;
  KILN_ASSIGN_OR_RETURN(p.reduction, readReduction(d.node()));
  const std::optional<int64_t> kk = d.constant(d.dim(1, q - 1));
  if (!kk) return makeError("ScatterND needs the last dim of the indices known at compile time");
  p.k = *kk;
  if (p.k > r) return makeError("ScatterND: index tuples of length ", p.k, " exceed data rank ", r);
  if (d.inputRank(2) != q - 1 + r - int(p.k))
    return makeError("ScatterND: updates have rank ", d.inputRank(2), ", expected ",
                     q - 1 + r - p.k);
  p.type = d.inputType(0);
  p.dims = d.dims(0);
  const std::vector<SVal> idims = d.dims(1), udims = d.dims(2);
  std::vector<SVal> want = slice(idims, 0, size_t(q - 1));
  for (int a = int(p.k); a < r; ++a) want.push_back(p.dims[size_t(a)]);
  for (size_t a = 0; a < want.size(); ++a)
    d.check(d.eq(udims[a], want[a]),
            "updates dim {} on axis " + std::to_string(a) + " should be {}", {udims[a], want[a]});
  d.setOutput(0, p.dims, p.type);
  p.code = d.statusCode("an index is out of range for its axis of the data");
  p.strides = rowMajorStrides(d, p.dims);
  p.tuples = d.product(slice(idims, 0, size_t(q - 1)));
  p.slice = d.product(slice(p.dims, size_t(p.k), p.dims.size()));
  emitFlatCopy(d, d.in(0), d.out(0), d.numel(0));

  constexpr int64_t kBlock = 64;
  const SVal blocks = d.floorDiv(p.slice, d.c(kBlock));
  const SVal tail = d.sub(p.slice, d.mul(blocks, d.c(kBlock)));
  if (!isConstant(d, blocks, 0)) {
    d.beginKernel(blocks, d.mul(p.tuples, d.c(kBlock)));
    const int blk = d.loop(blocks, {Schedule::Kind::Parallel, 1});
    emitScatterNdPass(d, p, blk, d.c(kBlock), {});
    d.kb().endLoop();
    d.endKernel();
  }
  if (!isConstant(d, tail, 0)) {
    d.beginKernel();
    emitScatterNdPass(d, p, -1, tail, d.mul(blocks, d.c(kBlock)));
    d.endKernel();
  }
  return Status::success();
}

// ---- generated tensors ----------------------------------------------------------

// y[o, d, i] = values[1] where indices[o, i] (negative counts from depth)
// is d, else values[0]; the depth sits at `axis` of the output.
Status lowerOneHot(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int q = d.inputRank(0);
  if (q < 0) return makeError("OneHot needs indices of known rank");
  const DType it = d.inputType(0);
  if (!isNumeric(it)) return makeError("OneHot needs numeric indices");
  KILN_ASSIGN_OR_RETURN(int axis, resolveAxis(d.node().getInt("axis"), q + 1, "axis"));
  d.check(d.eq(d.numel(1), d.c(1)), "depth must hold one value, got {}", {d.numel(1)});
  d.check(d.eq(d.numel(2), d.c(2)), "values must hold [off, on], got {} elements", {d.numel(2)});
  const SVal depthF = d.elemF(1, d.c(0));
  const SVal depthOk = d.land(d.lnot(d.flt(depthF, d.cf(1))), d.flt(depthF, d.cf(1e9)));
  d.check(depthOk, "depth must be a positive count below 1e9");
  const SVal depth = d.toI(d.select(depthOk, depthF, d.cf(1))); // toI only sees a valid depth
  const std::vector<SVal> idims = d.dims(0);
  std::vector<SVal> outDims = idims;
  outDims.insert(outDims.begin() + axis, depth);
  const DType t = d.inputType(2);
  d.setOutput(0, outDims, t);
  const SVal outer = d.product(slice(idims, 0, size_t(axis)));
  const SVal inner = d.product(slice(idims, size_t(axis), idims.size()));
  const SVal rows = d.mul(outer, depth);

  kir::KernelBuilder &b = d.beginKernel(rows, inner);
  const int off = b.load(d.in(2), Affine{}), on = b.load(d.in(2), Affine::constant(1));
  const int row = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const std::vector<int> od = unflatten(d, rowIndex(b, row), {outer, depth});
  const int base = isConstant(d, outer, 1) ? -1 : mulValue(d, od[0], inner);
  const int i = d.loop(inner, {Schedule::Kind::Vector, kVectorWidth});
  const int raw = b.load(d.in(0), Affine{}.add(1, -1, i), base);
  // Float indices truncate toward zero, as static_cast does.
  const int idx = isFloat(it) ? b.cast(DType::I64, it, raw) : castToIndex(b, it, raw);
  const int negative = b.compare(Opcode::Lt, DType::I64, idx, b.intConstant(DType::I64, 0));
  const int fixed =
      b.select(DType::I64, negative, b.binary(Opcode::Add, DType::I64, idx, d.value(depth)), idx);
  const int hot = b.compare(Opcode::Eq, DType::I64, fixed, od[1]);
  Affine at = d.term(inner, row);
  at.add(1, -1, i);
  b.store(d.out(0), at, b.select(t, hot, on, off));
  b.endLoop();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// The element count of an integer range, as the interpreter counts it in
// 128 bits: ceil((limit - start) / delta) when that is positive, else 0;
// ranges above 2^31 elements are an error. Here in int64 without
// overflow: the distance D = 2H + e is taken in halves (H >= 0, e in
// {-1, 0, 1}) so ceil(D / a) = 2 * (H / a) + ceil((2 * (H % a) + e) / a).
SVal integerRangeCount(DispatchBuilder &d, SVal s, SVal l, SVal delta) {
  const SVal zero = d.c(0), one = d.c(1), two = d.c(2);
  const SVal up = d.lt(zero, delta);
  // Walking down from s to l is walking up from l to s.
  const SVal from = d.select(up, s, l), to = d.select(up, l, s);
  const SVal nonEmpty = d.land(d.ne(delta, zero), d.lt(from, to));
  const SVal h = d.sub(d.floorDiv(to, two), d.floorDiv(from, two));
  const SVal e = d.sub(d.floorMod(to, two), d.floorMod(from, two));
  // a = |delta|; delta = INT64_MIN (|delta| = 2^63) is counted on its own.
  const SVal minDelta = d.eq(delta, d.c(INT64_MIN));
  const SVal a =
      d.select(up, delta, d.select(d.lor(minDelta, d.eq(delta, zero)), one, d.sub(zero, delta)));
  const SVal quotient = d.floorDiv(h, a), rest = d.floorMod(h, a);
  // c = ceil((2 * rest + e) / a) in {-1, 0, 1, 2}, with y = 2 * rest + e.
  const SVal yPositive = d.lor(d.lt(zero, rest), d.lt(zero, e));
  const SVal yAtMostA = d.le(d.add(rest, e), d.sub(a, rest));
  const SVal c = d.select(yPositive, d.select(yAtMostA, one, two),
                          d.select(d.land(d.lt(e, zero), d.eq(a, one)), d.c(-1), zero));
  const SVal viaHalves = d.add(d.mul(two, quotient), c);
  // |delta| = 2^63: D <= 2^63 takes one step, more takes two.
  const SVal pow62 = d.c(int64_t{1} << 62);
  const SVal beyond = d.lor(d.lt(pow62, h), d.land(d.eq(h, pow62), d.lt(zero, e)));
  const SVal count = d.select(minDelta, d.select(beyond, two, one), viaHalves);
  constexpr int64_t kMax = int64_t{1} << 31;
  // A quotient above 2^30 is more than 2^31 elements (and 2q could overflow).
  const SVal hugeQuotient = d.land(d.lnot(minDelta), d.lt(d.c(kMax / 2), quotient));
  const SVal tooMany = d.land(nonEmpty, d.lor(hugeQuotient, d.lt(d.c(kMax), count)));
  d.check(d.lnot(tooMany), "the range has too many elements (more than 2147483648)");
  return d.select(d.land(nonEmpty, d.lnot(tooMany)), count, zero);
}

// The element count of a float range: ceil((limit - start) / delta) in
// double, 0 when not positive, an error above 2^31 (or NaN).
SVal floatRangeCount(DispatchBuilder &d) {
  const SVal s = d.elemF(0, d.c(0)), l = d.elemF(1, d.c(0)), delta = d.elemF(2, d.c(0));
  const SVal count = d.fceil(d.fdiv(d.fsub(l, s), delta));
  const SVal fits = d.flt(count, d.cf(2147483649.0)); // count <= 2^31; false for NaN
  d.check(fits, "the range has too many elements (more than 2147483648)");
  // Only a count that fits reaches toI (which rejects NaN and infinities).
  const SVal bounded = d.select(d.land(fits, d.flt(d.cf(0), count)), count, d.cf(0));
  return d.toI(bounded);
}

// y[i] = start + i * delta, in int64 (wrapping) for integer types and in
// the type (f32 for 16-bit floats) for float types.
Status lowerRange(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const DType t = d.inputType(0);
  if (!isNumeric(t)) return makeError("Range does not support dtype ", dtypeName(t));
  if (d.inputType(1) != t || d.inputType(2) != t)
    return makeError("Range needs start, limit and delta of one dtype");
  for (int i = 0; i < 3; ++i)
    d.check(d.eq(d.numel(i), d.c(1)), "start, limit and delta must be scalars");
  SVal n;
  if (isFloat(t)) {
    const SVal delta = d.elemF(2, d.c(0));
    d.check(d.lor(d.flt(delta, d.cf(0)), d.flt(d.cf(0), delta)), "delta is 0");
    n = floatRangeCount(d);
  } else {
    const SVal delta = d.elem(2, d.c(0));
    d.check(d.ne(delta, d.c(0)), "delta is 0");
    n = integerRangeCount(d, d.elem(0, d.c(0)), d.elem(1, d.c(0)), delta);
  }
  d.setOutput(0, {n}, t);

  kir::KernelBuilder &b = d.beginKernel(n, d.c(1));
  const DType c = isFloat(t) ? (t == DType::F16 || t == DType::BF16 ? DType::F32 : t) : DType::I64;
  const int start = b.cast(c, t, b.load(d.in(0), Affine{}));
  const int delta = b.cast(c, t, b.load(d.in(2), Affine{}));
  const int i = d.loop(n, {Schedule::Kind::Parallel, 1});
  const int step = b.cast(c, DType::I64, rowIndex(b, i));
  const int v = b.binary(Opcode::Add, c, start, b.binary(Opcode::Mul, c, step, delta));
  b.store(d.out(0), Affine{}.add(1, -1, i), b.cast(t, c, v));
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// y[i, j] = 1 where j - i == k, else 0, in the dtype attribute's type (or
// the input's).
Status lowerEyeLike(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  if (d.inputRank(0) != 2) return makeError("EyeLike needs a 2-d input");
  DType t = d.inputType(0);
  if (d.node().hasAttr("dtype")) {
    auto code = dtypeFromOnnx(int(d.node().getInt("dtype")));
    if (!code) return makeError("EyeLike: unknown dtype code ", d.node().getInt("dtype"));
    t = *code;
  }
  if (t == DType::String) return makeError("EyeLike does not make strings");
  const std::vector<SVal> dims = d.dims(0);
  d.setOutput(0, dims, t);
  const int64_t k = d.node().getInt("k");
  ElementLoops l = beginElementKernel(d, dims);
  kir::KernelBuilder &b = d.kb();
  const int diff = b.binary(Opcode::Sub, DType::I64, l.lastValue(b), l.coords[0]);
  const int on = b.compare(Opcode::Eq, DType::I64, diff, b.intConstant(DType::I64, k));
  b.store(d.out(0), l.flat(d), b.select(t, on, b.intConstant(t, 1), b.intConstant(t, 0)));
  endElementKernel(d, l);
  return Status::success();
}

// The first lens[b] steps of every batch entry b are reversed in time; the
// rest are copied. Rows are (dim 0, dim 1) pairs; each moves the run of
// elements of the dims after them.
Status lowerReverseSequence(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0);
  if (r < 2) return makeError("ReverseSequence needs an input of known rank >= 2");
  KILN_RETURN_IF_ERROR(needIntegerIndices(d, 1, "ReverseSequence"));
  const int64_t batchAxis = d.node().getInt("batch_axis"), timeAxis = d.node().getInt("time_axis");
  if (batchAxis < 0 || batchAxis > 1 || timeAxis < 0 || timeAxis > 1 || batchAxis == timeAxis)
    return makeError("ReverseSequence: batch_axis and time_axis must be 0 and 1 in some order");
  const std::vector<SVal> dims = d.dims(0);
  d.check(d.eq(d.numel(1), dims[size_t(batchAxis)]),
          "sequence_lens has {} entries for batch size {}", {d.numel(1), dims[size_t(batchAxis)]});
  d.setOutput(0, dims, d.inputType(0));
  const int code = d.statusCode("a sequence length is outside [0, the number of time steps]");
  const SVal inner = d.product(slice(dims, 2, dims.size())), rows = d.mul(dims[0], dims[1]);

  kir::KernelBuilder &b = d.beginKernel(rows, inner);
  const int row = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int rowV = rowIndex(b, row);
  const std::vector<int> c = unflatten(d, rowV, {dims[0], dims[1]});
  const int batch = c[size_t(batchAxis)], time = c[size_t(timeAxis)];
  const int len = castToIndex(b, d.inputType(1), b.load(d.in(1), Affine{}, batch));
  const int ok = b.binary(Opcode::And, DType::Bool,
                          b.compare(Opcode::Ge, DType::I64, len, b.intConstant(DType::I64, 0)),
                          b.compare(Opcode::Le, DType::I64, len, d.value(dims[size_t(timeAxis)])));
  d.raise(negate(b, ok), code);
  b.beginIf(ok);
  // source step: lens - 1 - t inside the sequence, t after it
  const int inside = b.compare(Opcode::Lt, DType::I64, time, len);
  const int mirrored =
      b.binary(Opcode::Sub, DType::I64,
               b.binary(Opcode::Sub, DType::I64, len, b.intConstant(DType::I64, 1)), time);
  const int shift =
      b.binary(Opcode::Sub, DType::I64, b.select(DType::I64, inside, mirrored, time), time);
  const int srcRow = addValues(b, rowV, timeAxis == 0 ? mulValue(d, shift, dims[1]) : shift);
  const int srcBase = mulValue(d, srcRow, inner);
  const int j = d.loop(inner, {Schedule::Kind::Vector, kVectorWidth});
  Affine at = d.term(inner, row);
  at.add(1, -1, j);
  b.store(d.out(0), at, b.load(d.in(0), Affine{}.add(1, -1, j), srcBase));
  b.endLoop();
  b.endIf();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

} // namespace
} // namespace kiln::lower
