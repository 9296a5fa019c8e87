#include "lower/reduce_nest.h"

namespace kiln::lower {

using kir::Affine;
using kir::Opcode;
using kir::Schedule;

ReduceNest::ReduceNest(DispatchBuilder &d, int input, const std::vector<SVal> &reduced) : d_(d) {
  const std::vector<SVal> sizes = d.dims(input);
  const int rank = int(sizes.size());
  std::vector<SVal> strides(static_cast<size_t>(rank));
  SVal stride = d.c(1);
  for (int i = rank - 1; i >= 0; --i) {
    strides[size_t(i)] = stride;
    stride = d.mul(stride, sizes[size_t(i)]);
  }
  // Outermost first; a dim of size 1 adds nothing, and two neighbours of
  // one known kind walk their elements in the same order as one dim.
  for (int i = 0; i < rank; ++i) {
    const SVal size = sizes[size_t(i)], red = reduced[size_t(i)];
    if (d.constant(size) == 1) continue;
    const std::optional<int64_t> kind = d.constant(red);
    if (!dims_.empty() && kind && d.constant(dims_.back().reduced) == kind) {
      dims_.back().size = d.mul(dims_.back().size, size);
      dims_.back().stride = strides[size_t(i)];
      continue;
    }
    dims_.push_back(NestDim{size, strides[size_t(i)], red, {}, {}});
  }
  std::vector<SVal> kept, reducedTrips;
  for (NestDim &n : dims_) {
    n.kept = d.select(n.reduced, d.c(1), n.size);
    n.red = d.select(n.reduced, n.size, d.c(1));
    kept.push_back(n.kept);
    reducedTrips.push_back(n.red);
  }
  outCount_ = d.product(kept);
  redCount_ = d.product(reducedTrips);
  columns_ = !dims_.empty() && d.constant(dims_.back().reduced) == 0;
  if (columns_) {
    inner_ = dims_.back().size;
    kept.pop_back();
    outer_ = d.product(kept);
  }
}

Offset ReduceNest::base(int o) {
  kir::KernelBuilder &b = d_.kb();
  const size_t n = dims_.size() - (columns_ ? 1 : 0);
  std::vector<size_t> walk; // dims that may be kept, outermost first
  for (size_t i = 0; i < n; ++i)
    if (d_.constant(dims_[i].kept) != 1) walk.push_back(i);
  Offset off;
  if (walk.empty()) return off;
  if (walk.size() == 1) { // the output index is the kept dim's position
    d_.addTerm(off.affine, dims_[walk[0]].stride, o);
    return off;
  }
  // Decode the output index into kept positions: once per output element
  // (or row), never per input element.
  const int index = b.index(Affine{}.add(1, -1, o));
  SVal outStride = d_.c(1);
  for (size_t k = walk.size(); k-- > 0;) {
    const NestDim &dim = dims_[walk[k]];
    int q = index;
    if (d_.constant(outStride) != 1) q = b.binary(Opcode::Div, DType::I64, q, d_.value(outStride));
    if (k > 0) q = b.binary(Opcode::Mod, DType::I64, q, d_.value(dim.kept));
    if (d_.constant(dim.stride) != 1)
      q = b.binary(Opcode::Mul, DType::I64, q, d_.value(dim.stride));
    off.dyn = off.dyn < 0 ? q : b.binary(Opcode::Add, DType::I64, off.dyn, q);
    outStride = d_.mul(outStride, dim.kept);
  }
  return off;
}

Affine ReduceNest::openReduced(bool vectorize) {
  std::vector<size_t> walk;
  for (size_t i = 0; i < dims_.size(); ++i)
    if (d_.constant(dims_[i].red) != 1) walk.push_back(i);
  Affine off;
  for (size_t k = 0; k < walk.size(); ++k) {
    const NestDim &dim = dims_[walk[k]];
    Schedule s;
    if (vectorize && k + 1 == walk.size() && d_.constant(dim.stride) == 1)
      s = {Schedule::Kind::Vector, 8};
    const int r = d_.loop(dim.red, s);
    d_.addTerm(off, dim.stride, r);
  }
  openLoops_ = int(walk.size());
  return off;
}

void ReduceNest::closeReduced() {
  for (; openLoops_ > 0; --openLoops_) d_.kb().endLoop();
}

int convert(kir::KernelBuilder &b, DType to, DType from, int v) {
  return to == from ? v : b.cast(to, from, v);
}

Affine rowMajor(DispatchBuilder &d, int o, SVal stride, int j) {
  Affine a = d.term(stride, o);
  a.add(1, -1, j);
  return a;
}

Affine &append(Affine &a, const Affine &b) {
  a.terms.insert(a.terms.end(), b.terms.begin(), b.terms.end());
  return a;
}

int vectorWidth(DType t) {
  return t == DType::F64 || t == DType::I64 || t == DType::U64 ? 4 : 8;
}

void emitCopy(DispatchBuilder &d, int input, int output) {
  const std::vector<SVal> dims = d.dims(input);
  const SVal last = dims.empty() ? d.c(1) : dims.back();
  const SVal rows = dims.empty() ? d.c(1) : d.product({dims.begin(), dims.end() - 1});
  kir::KernelBuilder &b = d.beginKernel(rows, last);
  const int r = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int j = d.loop(last, {Schedule::Kind::Vector, vectorWidth(d.inputType(input))});
  const Affine at = rowMajor(d, r, last, j);
  b.store(d.out(output), at, b.load(d.in(input), at));
  b.endLoop();
  b.endLoop();
  d.endKernel();
}

} // namespace kiln::lower
