// Lowerings of ops whose element indices are computed from the loop
// position or read from data (lower/ops.h).
#include "lower/ops.h"

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;

Status lowerTrilu(DispatchBuilder &d);

} // namespace

LowerFn indexLowering(OpKind op) {
  switch (op) {
  case OpKind::Trilu: return lowerTrilu;
  default: return nullptr;
  }
}

namespace {

// y = x where the element's column minus row is >= k (upper) or <= k
// (lower), else 0. Rows of the trailing matrix run in parallel.
Status lowerTrilu(DispatchBuilder &d) {
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
  const int row = b.binary(Opcode::Mod, DType::I64, b.index(kir::Affine{}.add(1, -1, r)),
                           d.value(rows));
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

} // namespace
} // namespace kiln::lower
