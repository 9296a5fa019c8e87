#include "lower/loops.h"

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;

bool isConstant(const DispatchBuilder &d, SVal v, int64_t k) {
  auto c = d.constant(v);
  return c && *c == k;
}

// Whether two shape values are the same: one computation (shape values are
// numbered after common subexpressions merge) or equal constants.
bool sameValue(const DispatchBuilder &d, SVal a, SVal b) {
  if (a.id == b.id) return true;
  auto ka = d.constant(a), kb = d.constant(b);
  return ka && kb && *ka == *kb;
}

struct CopyDim {
  SVal size, src, dst;
};

// The copy's dims without unit dims, with neighbours merged where the outer
// one's strides are the inner one's times its size on both sides; false
// when the copy is statically empty.
bool simplify(DispatchBuilder &d, const BoxCopy &c, std::vector<CopyDim> &out) {
  for (size_t k = 0; k < c.dims.size(); ++k) {
    if (isConstant(d, c.dims[k], 0)) return false;
    if (isConstant(d, c.dims[k], 1)) continue;
    CopyDim dim{c.dims[k], c.srcStrides[k], c.dstStrides[k]};
    if (!out.empty()) {
      CopyDim &outer = out.back();
      if (sameValue(d, outer.src, d.mul(dim.src, dim.size)) &&
          sameValue(d, outer.dst, d.mul(dim.dst, dim.size))) {
        outer = CopyDim{d.mul(outer.size, dim.size), dim.src, dim.dst};
        continue;
      }
    }
    out.push_back(dim);
  }
  return true;
}

} // namespace

std::vector<SVal> rowMajorStrides(DispatchBuilder &d, const std::vector<SVal> &dims) {
  std::vector<SVal> strides(dims.size());
  SVal s = d.c(1);
  for (size_t k = dims.size(); k-- > 0;) {
    strides[k] = s;
    s = d.mul(s, dims[k]);
  }
  return strides;
}

Status refuseStrings(const DispatchBuilder &d) {
  const Node &n = d.node();
  for (int i = 0; i < n.numInputs(); ++i)
    if (d.input(i) && d.inputType(i) == DType::String)
      return makeError(opName(n.op()), " on strings (input ", i, ") is not Kernel IR");
  for (int i = 0; i < n.numOutputs(); ++i)
    if (n.output(i) && d.outputType(i) == DType::String)
      return makeError(opName(n.op()), " making strings (output ", i, ") is not Kernel IR");
  return Status::success();
}

Expected<int> resolveAxis(int64_t axis, int rank, const char *what) {
  if (axis < -rank || axis >= rank)
    return makeError(what, " ", axis, " is out of range for rank ", rank);
  return int(axis < 0 ? axis + rank : axis);
}

int mulValue(DispatchBuilder &d, int v, SVal s) {
  if (isConstant(d, s, 0)) return -1;
  if (isConstant(d, s, 1)) return v;
  return d.kb().binary(Opcode::Mul, DType::I64, v, d.value(s));
}

int addValues(kir::KernelBuilder &b, int a, int bValue) {
  if (a < 0) return bValue;
  if (bValue < 0) return a;
  return b.binary(Opcode::Add, DType::I64, a, bValue);
}

std::vector<int> unflatten(DispatchBuilder &d, int flat, const std::vector<SVal> &dims) {
  kir::KernelBuilder &b = d.kb();
  std::vector<int> coords(dims.size());
  int rest = flat;
  for (size_t k = dims.size(); k-- > 0;) {
    if (k == 0) {
      coords[0] = rest;
      break;
    }
    if (isConstant(d, dims[k], 1)) {
      coords[k] = b.intConstant(DType::I64, 0);
      continue;
    }
    const int size = d.value(dims[k]);
    coords[k] = b.binary(Opcode::Mod, DType::I64, rest, size);
    rest = b.binary(Opcode::Div, DType::I64, rest, size);
  }
  return coords;
}

kir::Affine ElementLoops::flat(DispatchBuilder &d) const {
  kir::Affine a;
  if (rank >= 2) d.addTerm(a, inner, row);
  if (rank >= 1) a.add(1, -1, last);
  return a;
}

int ElementLoops::lastValue(kir::KernelBuilder &b) const {
  if (rank == 0) return b.intConstant(DType::I64, 0);
  return b.index(kir::Affine{}.add(1, -1, last));
}

ElementLoops beginElementKernel(DispatchBuilder &d, const std::vector<SVal> &dims, bool decodeRows,
                                const std::function<void()> &beforeLoops) {
  ElementLoops l;
  l.rank = int(dims.size());
  if (l.rank == 0) {
    l.inner = d.c(1);
    d.beginKernel();
    if (beforeLoops) beforeLoops();
    return l;
  }
  l.inner = dims.back();
  if (l.rank == 1) {
    d.beginKernel(dims[0], d.c(1));
    if (beforeLoops) beforeLoops();
    l.last = d.loop(dims[0], {Schedule::Kind::Parallel, 1});
    return l;
  }
  const std::vector<SVal> outer(dims.begin(), dims.end() - 1);
  const SVal rows = d.product(outer);
  kir::KernelBuilder &b = d.beginKernel(rows, l.inner);
  if (beforeLoops) beforeLoops();
  l.row = d.loop(rows, {Schedule::Kind::Parallel, 1});
  if (decodeRows) l.coords = unflatten(d, b.index(kir::Affine{}.add(1, -1, l.row)), outer);
  l.last = d.loop(l.inner, {Schedule::Kind::Vector, kVectorWidth});
  return l;
}

void endElementKernel(DispatchBuilder &d, const ElementLoops &l) {
  for (int k = 0; k < std::min(l.rank, 2); ++k) d.kb().endLoop();
  d.endKernel();
}

void emitBoxCopy(DispatchBuilder &d, BoxCopy c) {
  std::vector<CopyDim> dims;
  if (!simplify(d, c, dims)) return;
  const int r = int(dims.size());
  // The bases become params of the kernel, so they are added once it has
  // begun.
  kir::Affine src, dst;
  auto begin = [&](SVal extent, SVal work) -> kir::KernelBuilder & {
    kir::KernelBuilder &b = d.beginKernel(extent, work);
    if (c.srcBase.valid()) d.addTerm(src, c.srcBase);
    if (c.dstBase.valid()) d.addTerm(dst, c.dstBase);
    return b;
  };
  auto copyOne = [&](kir::KernelBuilder &b, int srcDyn, int dstDyn) {
    b.store(c.dst, dst, b.load(c.src, src, srcDyn), dstDyn);
  };
  if (r == 0) {
    copyOne(begin({}, {}), -1, -1);
    d.endKernel();
    return;
  }
  if (r == 1) {
    kir::KernelBuilder &b = begin(dims[0].size, d.c(1));
    const int i = d.loop(dims[0].size, {Schedule::Kind::Parallel, 1});
    d.addTerm(src, dims[0].src, i);
    d.addTerm(dst, dims[0].dst, i);
    copyOne(b, -1, -1);
    b.endLoop();
    d.endKernel();
    return;
  }
  // The parallel loop covers every dim but the innermost one (rank 2) or
  // two (rank >= 3); a serial loop and a vector loop take the rest.
  const int parallelDims = r == 2 ? 1 : r - 2;
  std::vector<SVal> outer;
  for (int k = 0; k < parallelDims; ++k) outer.push_back(dims[size_t(k)].size);
  const SVal rows = d.product(outer);
  SVal work = d.c(1);
  for (int k = parallelDims; k < r; ++k) work = d.mul(work, dims[size_t(k)].size);
  kir::KernelBuilder &b = begin(rows, work);
  const int p = d.loop(rows, {Schedule::Kind::Parallel, 1});
  int srcDyn = -1, dstDyn = -1;
  if (parallelDims == 1) {
    d.addTerm(src, dims[0].src, p);
    d.addTerm(dst, dims[0].dst, p);
  } else {
    std::vector<int> coords = unflatten(d, b.index(kir::Affine{}.add(1, -1, p)), outer);
    for (int k = 0; k < parallelDims; ++k) {
      srcDyn = addValues(b, srcDyn, mulValue(d, coords[size_t(k)], dims[size_t(k)].src));
      dstDyn = addValues(b, dstDyn, mulValue(d, coords[size_t(k)], dims[size_t(k)].dst));
    }
  }
  for (int k = parallelDims; k < r; ++k) {
    const bool innermost = k == r - 1;
    const int i = d.loop(dims[size_t(k)].size,
                         innermost ? Schedule{Schedule::Kind::Vector, kVectorWidth} : Schedule{});
    d.addTerm(src, dims[size_t(k)].src, i);
    d.addTerm(dst, dims[size_t(k)].dst, i);
  }
  copyOne(b, srcDyn, dstDyn);
  for (int k = parallelDims; k < r; ++k) b.endLoop();
  b.endLoop();
  d.endKernel();
}

void emitFlatCopy(DispatchBuilder &d, int src, int dst, SVal count, SVal srcBase, SVal dstBase) {
  emitBoxCopy(d, BoxCopy{src, dst, {count}, {d.c(1)}, {d.c(1)}, srcBase, dstBase});
}

void emitFill(DispatchBuilder &d, int out, const std::vector<SVal> &dims,
              const std::function<int(kir::KernelBuilder &)> &makeValue) {
  // Flattened to [rows, last]: the rows run in parallel, the last dim is
  // vectorized.
  std::vector<SVal> shape = dims;
  if (dims.size() > 2)
    shape = {d.product(std::vector<SVal>(dims.begin(), dims.end() - 1)), dims.back()};
  if (isConstant(d, d.product(shape), 0)) return;
  int value = -1;
  ElementLoops l = beginElementKernel(d, shape, false, [&] { value = makeValue(d.kb()); });
  d.kb().store(out, l.flat(d), value);
  endElementKernel(d, l);
}

CheckedIndex checkIndex(kir::KernelBuilder &b, DType indexType, int loaded, int dim) {
  const int idx = castToIndex(b, indexType, loaded);
  const int zero = b.intConstant(DType::I64, 0);
  const int negative = b.compare(Opcode::Lt, DType::I64, idx, zero);
  CheckedIndex c;
  c.index = b.select(DType::I64, negative, b.binary(Opcode::Add, DType::I64, idx, dim), idx);
  c.ok = b.binary(Opcode::And, DType::Bool, b.compare(Opcode::Ge, DType::I64, c.index, zero),
                  b.compare(Opcode::Lt, DType::I64, c.index, dim));
  return c;
}

} // namespace kiln::lower
