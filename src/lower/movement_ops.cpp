// Kernel IR lowerings of data movement (lower/ops.h): Slice, Concat, Split,
// Transpose, Expand, Tile, Pad, DepthToSpace, SpaceToDepth and
// ConstantOfShape. Most are one strided box copy (loops.h) whose strides
// are shape values: Slice's come from its starts and steps, Expand's are 0
// on broadcast dims, Tile copies over [repeat, dim] pairs, DepthToSpace and
// SpaceToDepth over the 6-d view of their block permutation. Sizes read
// from inputs (starts, pads, repeats, shapes) may be run-time values; the
// shape program computes them, and the number of them (the rank of the
// output) must be known at compile time.
#include "lower/loops.h"
#include "lower/ops.h"

#include <string>

namespace kiln::lower {

namespace {

using kir::Affine;
using kir::Opcode;
using kir::Schedule;

Status lowerSlice(DispatchBuilder &d);
Status lowerConcat(DispatchBuilder &d);
Status lowerSplit(DispatchBuilder &d);
Status lowerTranspose(DispatchBuilder &d);
Status lowerExpand(DispatchBuilder &d);
Status lowerTile(DispatchBuilder &d);
Status lowerPad(DispatchBuilder &d);
Status lowerDepthToSpace(DispatchBuilder &d);
Status lowerSpaceToDepth(DispatchBuilder &d);
Status lowerConstantOfShape(DispatchBuilder &d);

} // namespace

LowerFn movementLowering(OpKind op) {
  switch (op) {
  case OpKind::Slice:
    return lowerSlice;
  case OpKind::Concat:
    return lowerConcat;
  case OpKind::Split:
    return lowerSplit;
  case OpKind::Transpose:
    return lowerTranspose;
  case OpKind::Expand:
    return lowerExpand;
  case OpKind::Tile:
    return lowerTile;
  case OpKind::Pad:
    return lowerPad;
  case OpKind::DepthToSpace:
    return lowerDepthToSpace;
  case OpKind::SpaceToDepth:
    return lowerSpaceToDepth;
  case OpKind::ConstantOfShape:
    return lowerConstantOfShape;
  default:
    return nullptr;
  }
}

namespace {

bool isConstant(const DispatchBuilder &d, SVal v, int64_t k) {
  auto c = d.constant(v);
  return c && *c == k;
}

// The element count of a list input of rank 0 or 1 (starts, pads, a
// shape), when known at compile time.
std::optional<int64_t> staticLength(DispatchBuilder &d, int input) {
  const int rank = d.inputRank(input);
  if (rank == 0) return 1;
  if (rank != 1) return std::nullopt;
  return d.constant(d.dim(input, 0));
}

Expected<int64_t> requireLength(DispatchBuilder &d, int input, const char *what) {
  std::optional<int64_t> n = staticLength(d, input);
  if (!n) return makeError(what, " (input ", input, ") needs a length known at compile time");
  return *n;
}

// A possibly negative axis read at run time, resolved against `rank`, with
// a check that it is in range.
SVal runtimeAxis(DispatchBuilder &d, SVal axis, int rank) {
  const SVal resolved = d.select(d.lt(axis, d.c(0)), d.add(axis, d.c(rank)), axis);
  d.check(d.land(d.le(d.c(0), resolved), d.lt(resolved, d.c(rank))),
          "axis {} is out of range for rank " + std::to_string(rank), {axis});
  return resolved;
}

// ---- Slice ------------------------------------------------------------------------

struct SliceAxis {
  SVal start, step, count;
};

// numpy's clamping (as the interpreter's clampSlice): negative positions
// count from the back, then start and end are clamped into range, which
// for a negative step lets the end be -1 ("before the first element").
// Every branch is computed and one selected, so divisions use a divisor
// that cannot be 0.
SliceAxis clampSlice(DispatchBuilder &d, SVal start, SVal end, SVal step, SVal dim) {
  const SVal zero = d.c(0), one = d.c(1);
  const SVal s = d.select(d.lt(start, zero), d.add(start, dim), start);
  const SVal e = d.select(d.lt(end, zero), d.add(end, dim), end);
  const SVal forward = d.lt(zero, step);
  // step > 0
  const SVal sUp = d.clamp(s, zero, dim), eUp = d.clamp(e, zero, dim);
  const SVal upStep = d.select(forward, step, one);
  const SVal countUp =
      d.select(d.lt(sUp, eUp), d.add(d.floorDiv(d.sub(d.sub(eUp, sUp), one), upStep), one), zero);
  // step < 0 (INT64_MIN steps as -INT64_MAX: both take one element)
  const SVal last = d.sub(dim, one);
  const SVal sDown = d.clamp(s, zero, last), eDown = d.clamp(e, d.c(-1), last);
  const SVal downStep = d.select(d.lt(step, zero), d.sub(zero, d.max(step, d.c(-INT64_MAX))), one);
  const SVal countDown = d.select(
      d.lt(eDown, sDown), d.add(d.floorDiv(d.sub(d.sub(sDown, eDown), one), downStep), one), zero);
  const SVal empty = d.eq(dim, zero);
  SliceAxis a;
  a.start = d.select(empty, zero, d.select(forward, sUp, sDown));
  a.count = d.select(empty, zero, d.select(forward, countUp, countDown));
  a.step = step;
  return a;
}

// y = x[start_a : end_a : step_a] on the listed axes. starts, ends, axes
// and steps may be run-time inputs; each output axis selects the entry
// whose axis matches it (a constant axes input folds the selection away).
Status lowerSlice(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0);
  if (r < 0) return makeError("Slice needs an input of known rank");
  KILN_ASSIGN_OR_RETURN(int64_t n, requireLength(d, 1, "starts"));
  for (int i = 2; i <= 4; ++i) {
    if (!d.input(i)) continue;
    KILN_ASSIGN_OR_RETURN(int64_t m, requireLength(d, i, "a slice list"));
    if (m != n)
      return makeError("starts, ends, axes and steps have different lengths (", n, " and ", m, ")");
  }
  const std::vector<SVal> dims = d.dims(0);
  std::vector<SliceAxis> axes(static_cast<size_t>(r));
  std::vector<SVal> hits(size_t(r), d.c(0));
  for (int a = 0; a < r; ++a) axes[size_t(a)] = SliceAxis{d.c(0), d.c(1), dims[size_t(a)]};
  for (int64_t i = 0; i < n; ++i) {
    const SVal axis = runtimeAxis(d, d.input(3) ? d.elem(3, i) : d.c(i), r);
    const SVal step = d.input(4) ? d.elem(4, i) : d.c(1);
    d.check(d.ne(step, d.c(0)), "the step of slice entry " + std::to_string(i) + " is 0");
    for (int a = 0; a < r; ++a) {
      const SVal match = d.eq(axis, d.c(a));
      if (isConstant(d, match, 0)) continue;
      hits[size_t(a)] = d.add(hits[size_t(a)], match);
      const SliceAxis s = clampSlice(d, d.elem(1, i), d.elem(2, i), step, dims[size_t(a)]);
      SliceAxis &out = axes[size_t(a)];
      out = SliceAxis{d.select(match, s.start, out.start), d.select(match, s.step, out.step),
                      d.select(match, s.count, out.count)};
    }
  }
  const std::vector<SVal> inStrides = rowMajorStrides(d, dims);
  BoxCopy copy{d.in(0), d.out(0), {}, {}, {}, d.c(0), {}};
  for (int a = 0; a < r; ++a) {
    d.check(d.le(hits[size_t(a)], d.c(1)), "axis " + std::to_string(a) + " is sliced twice");
    const SliceAxis &s = axes[size_t(a)];
    copy.dims.push_back(s.count);
    // An axis of one element never moves (its step may be huge).
    copy.srcStrides.push_back(
        d.select(d.lt(d.c(1), s.count), d.mul(s.step, inStrides[size_t(a)]), d.c(0)));
    copy.srcBase = d.add(copy.srcBase, d.mul(s.start, inStrides[size_t(a)]));
  }
  copy.dstStrides = rowMajorStrides(d, copy.dims);
  d.setOutput(0, copy.dims, d.inputType(0));
  emitBoxCopy(d, std::move(copy));
  return Status::success();
}

// ---- Concat and Split ---------------------------------------------------------------

// Moves row bands between one tensor and several: over [outer, parts],
// part k holds columns [begin_k, begin_k + chunk_k) of the wide tensor's
// rows of `rowLen` elements. `gather` copies the parts into the wide
// tensor (Concat), else out of it (Split). With one outer row each part is
// its own parallel copy; otherwise the rows run in parallel.
void emitBands(DispatchBuilder &d, bool gather, int wide, const std::vector<int> &parts,
               const std::vector<SVal> &chunks, SVal outer, SVal rowLen) {
  std::vector<SVal> begins;
  SVal begin = d.c(0);
  for (SVal chunk : chunks) {
    begins.push_back(begin);
    begin = d.add(begin, chunk);
  }
  if (isConstant(d, outer, 1)) {
    for (size_t k = 0; k < parts.size(); ++k) {
      if (gather)
        emitFlatCopy(d, parts[k], wide, chunks[k], {}, begins[k]);
      else
        emitFlatCopy(d, wide, parts[k], chunks[k], begins[k], {});
    }
    return;
  }
  kir::KernelBuilder &b = d.beginKernel(outer, rowLen);
  const int o = d.loop(outer, {Schedule::Kind::Parallel, 1});
  for (size_t k = 0; k < parts.size(); ++k) {
    if (isConstant(d, chunks[k], 0)) continue;
    const int j = d.loop(chunks[k], {Schedule::Kind::Vector, kVectorWidth});
    Affine part = d.term(chunks[k], o), whole = d.term(rowLen, o);
    d.addTerm(whole, begins[k]);
    part.add(1, -1, j);
    whole.add(1, -1, j);
    if (gather)
      b.store(wide, whole, b.load(parts[k], part));
    else
      b.store(parts[k], part, b.load(wide, whole));
    b.endLoop();
  }
  b.endLoop();
  d.endKernel();
}

// Inputs are joined along `axis`. As in the interpreter, a 1-d empty input
// next to inputs of another rank is a placeholder and contributes nothing.
Status lowerConcat(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  int rank = -1;
  for (int i = 0; i < d.node().numInputs(); ++i) {
    if (!d.input(i)) continue;
    if (d.inputRank(i) < 0) return makeError("Concat needs inputs of known rank");
    rank = std::max(rank, d.inputRank(i));
  }
  std::vector<int> parts;
  for (int i = 0; i < d.node().numInputs(); ++i) {
    if (!d.input(i)) continue;
    if (d.inputRank(i) == 1 && rank != 1) {
      d.check(d.eq(d.dim(i, 0), d.c(0)),
              "input " + std::to_string(i) + " has rank 1 and {} elements next to inputs of rank " +
                  std::to_string(rank),
              {d.dim(i, 0)});
      continue;
    }
    if (d.inputRank(i) != rank)
      return makeError("Concat: input ", i, " has rank ", d.inputRank(i), ", expected ", rank);
    parts.push_back(i);
  }
  if (parts.empty()) return makeError("Concat has no inputs");
  KILN_ASSIGN_OR_RETURN(int axis, resolveAxis(d.node().getInt("axis"), rank, "axis"));
  std::vector<SVal> dims = d.dims(parts[0]);
  SVal total = d.c(0);
  for (int p : parts) {
    for (int a = 0; a < rank; ++a)
      if (a != axis)
        d.check(d.eq(d.dim(p, a), dims[size_t(a)]),
                "input " + std::to_string(p) + " has dim {} on axis " + std::to_string(a) +
                    ", expected {}",
                {d.dim(p, a), dims[size_t(a)]});
    total = d.add(total, d.dim(p, axis));
  }
  dims[size_t(axis)] = total;
  d.setOutput(0, dims, d.inputType(parts[0]));
  const SVal outer = d.product(std::vector<SVal>(dims.begin(), dims.begin() + axis));
  const SVal inner = d.product(std::vector<SVal>(dims.begin() + axis + 1, dims.end()));
  std::vector<int> buffers;
  std::vector<SVal> chunks;
  for (int p : parts) {
    buffers.push_back(d.in(p));
    chunks.push_back(d.mul(d.dim(p, axis), inner));
  }
  emitBands(d, true, d.out(0), buffers, chunks, outer, d.mul(total, inner));
  return Status::success();
}

// Sizes of Split's outputs: the split input, or num_outputs (else the
// number of outputs) chunks of ceil(dim / n), the last ones smaller.
Expected<std::vector<SVal>> splitSizes(DispatchBuilder &d, SVal dim) {
  const int outputs = d.node().numOutputs();
  std::vector<SVal> sizes;
  if (d.input(1)) {
    KILN_ASSIGN_OR_RETURN(int64_t n, requireLength(d, 1, "split"));
    if (n != outputs)
      return makeError("Split: split has ", n, " entries for ", outputs, " outputs");
    SVal sum = d.c(0);
    for (int k = 0; k < outputs; ++k) {
      sizes.push_back(d.elem(1, k));
      d.check(d.le(d.c(0), sizes.back()), "split entry " + std::to_string(k) + " is negative ({})",
              {sizes.back()});
      sum = d.add(sum, sizes.back());
    }
    d.check(d.eq(sum, dim), "split sums to {}, not to the dim {}", {sum, dim});
    return sizes;
  }
  const int64_t n = d.node().hasAttr("num_outputs") ? d.node().getInt("num_outputs") : outputs;
  if (n != outputs || n <= 0)
    return makeError("Split: num_outputs is ", n, " but the node has ", outputs, " outputs");
  const SVal chunk = d.ceilDiv(dim, d.c(n));
  for (int64_t k = 0; k < n; ++k)
    sizes.push_back(d.min(chunk, d.max(d.sub(dim, d.mul(d.c(k), chunk)), d.c(0))));
  return sizes;
}

Status lowerSplit(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0);
  if (r < 1) return makeError("Split needs an input of known rank >= 1");
  KILN_ASSIGN_OR_RETURN(int axis, resolveAxis(d.node().getInt("axis"), r, "axis"));
  const std::vector<SVal> dims = d.dims(0);
  KILN_ASSIGN_OR_RETURN(std::vector<SVal> sizes, splitSizes(d, dims[size_t(axis)]));
  const SVal outer = d.product(std::vector<SVal>(dims.begin(), dims.begin() + axis));
  const SVal inner = d.product(std::vector<SVal>(dims.begin() + axis + 1, dims.end()));
  std::vector<int> buffers;
  std::vector<SVal> chunks;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<SVal> shape = dims;
    shape[size_t(axis)] = sizes[k];
    d.setOutput(int(k), shape, d.inputType(0)); // an unused output still gets the input's dtype
    buffers.push_back(d.out(int(k)));
    chunks.push_back(d.mul(sizes[k], inner));
  }
  emitBands(d, false, d.in(0), buffers, chunks, outer, d.mul(dims[size_t(axis)], inner));
  return Status::success();
}

// ---- layout permutations ------------------------------------------------------------

Status lowerTranspose(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0);
  if (r < 0) return makeError("Transpose needs an input of known rank");
  std::vector<int64_t> perm = d.node().getInts("perm");
  if (!d.node().hasAttr("perm"))
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<bool> seen(size_t(r), false);
  bool valid = int(perm.size()) == r;
  for (int64_t p : perm) {
    valid = valid && p >= 0 && p < r && !seen[size_t(p)];
    if (valid) seen[size_t(p)] = true;
  }
  if (!valid) return makeError("Transpose: perm is not a permutation of 0..", r - 1);
  const std::vector<SVal> dims = d.dims(0), strides = rowMajorStrides(d, dims);
  BoxCopy copy{d.in(0), d.out(0), {}, {}, {}, {}, {}};
  for (int64_t p : perm) {
    copy.dims.push_back(dims[size_t(p)]);
    copy.srcStrides.push_back(strides[size_t(p)]);
  }
  copy.dstStrides = rowMajorStrides(d, copy.dims);
  d.setOutput(0, copy.dims, d.inputType(0));
  emitBoxCopy(d, std::move(copy));
  return Status::success();
}

// x [N, C, H, W] as [N, b, b, C/b^2, H, W] (DCR) or [N, C/b^2, b, b, H, W]
// (CRD), permuted to [N, C/b^2, H, b, W, b].
Status lowerDepthToSpace(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  if (d.inputRank(0) != 4) return makeError("DepthToSpace needs a 4-d input");
  const int64_t bs = d.node().getInt("blocksize");
  if (bs <= 0) return makeError("DepthToSpace: blocksize must be positive, got ", bs);
  const std::string mode = d.node().getString("mode");
  if (mode != "DCR" && mode != "CRD") return makeError("DepthToSpace: unknown mode '", mode, "'");
  const std::vector<SVal> x = d.dims(0);
  const SVal b = d.c(bs), n = x[0], c = x[1], h = x[2], w = x[3];
  d.check(d.land(d.eq(d.floorMod(c, b), d.c(0)), d.eq(d.floorMod(d.floorDiv(c, b), b), d.c(0))),
          "channels {} are not divisible by blocksize^2 (blocksize " + std::to_string(bs) + ")",
          {c});
  const SVal oc = d.floorDiv(d.floorDiv(c, b), b), hw = d.mul(h, w);
  d.setOutput(0, {n, oc, d.mul(h, b), d.mul(w, b)}, d.inputType(0));
  BoxCopy copy{d.in(0), d.out(0), {n, oc, h, b, w, b}, {}, {}, {}, {}};
  if (mode == "DCR")
    copy.srcStrides = {d.mul(c, hw), hw, w, d.mul(b, d.mul(oc, hw)), d.c(1), d.mul(oc, hw)};
  else
    copy.srcStrides = {d.mul(c, hw), d.mul(d.mul(b, b), hw), w, d.mul(b, hw), d.c(1), hw};
  copy.dstStrides = rowMajorStrides(d, copy.dims);
  emitBoxCopy(d, std::move(copy));
  return Status::success();
}

// y[n, (i*b + j)*C + c, h, w] = x[n, c, h*b + i, w*b + j].
Status lowerSpaceToDepth(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  if (d.inputRank(0) != 4) return makeError("SpaceToDepth needs a 4-d input");
  const int64_t bs = d.node().getInt("blocksize");
  if (bs <= 0) return makeError("SpaceToDepth: blocksize must be positive, got ", bs);
  const std::vector<SVal> x = d.dims(0);
  const SVal b = d.c(bs), n = x[0], c = x[1], h = x[2], w = x[3];
  d.check(d.land(d.eq(d.floorMod(h, b), d.c(0)), d.eq(d.floorMod(w, b), d.c(0))),
          "spatial dims {}x{} are not divisible by blocksize " + std::to_string(bs), {h, w});
  const SVal oh = d.floorDiv(h, b), ow = d.floorDiv(w, b);
  d.setOutput(0, {n, d.mul(d.mul(c, b), b), oh, ow}, d.inputType(0));
  BoxCopy copy{d.in(0), d.out(0), {n, b, b, c, oh, ow}, {}, {}, {}, {}};
  copy.srcStrides = {d.mul(c, d.mul(h, w)), w, d.c(1), d.mul(h, w), d.mul(b, w), b};
  copy.dstStrides = rowMajorStrides(d, copy.dims);
  emitBoxCopy(d, std::move(copy));
  return Status::success();
}

// ---- broadcasts and repeats ---------------------------------------------------------

// y = x broadcast with the shape input (numpy rules, either side may be 1).
Status lowerExpand(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int xr = d.inputRank(0);
  if (xr < 0) return makeError("Expand needs an input of known rank");
  KILN_ASSIGN_OR_RETURN(int64_t m, requireLength(d, 1, "shape"));
  const int r = std::max(xr, int(m));
  const std::vector<SVal> xdims = d.dims(0), inStrides = rowMajorStrides(d, xdims);
  BoxCopy copy{d.in(0), d.out(0), {}, {}, {}, {}, {}};
  for (int i = 0; i < r; ++i) {
    const int xi = i - (r - xr), si = i - (r - int(m));
    const SVal da = xi >= 0 ? xdims[size_t(xi)] : d.c(1);
    const SVal db = si >= 0 ? d.elem(1, si) : d.c(1);
    if (si >= 0) d.check(d.le(d.c(0), db), "shape has a negative dim {}", {db});
    const SVal one = d.c(1);
    d.check(d.lor(d.eq(da, db), d.lor(d.eq(da, one), d.eq(db, one))),
            "cannot broadcast dim {} to {} on axis " + std::to_string(i), {da, db});
    copy.dims.push_back(d.select(d.eq(da, one), db, da));
    copy.srcStrides.push_back(xi >= 0 ? d.select(d.eq(da, one), d.c(0), inStrides[size_t(xi)])
                                      : d.c(0));
  }
  copy.dstStrides = rowMajorStrides(d, copy.dims);
  d.setOutput(0, copy.dims, d.inputType(0));
  emitBoxCopy(d, std::move(copy));
  return Status::success();
}

// y = x repeated repeats[a] times along each axis: a copy over the pairs
// [repeat_a, dim_a], whose source ignores the repeat.
Status lowerTile(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0);
  if (r < 0) return makeError("Tile needs an input of known rank");
  KILN_ASSIGN_OR_RETURN(int64_t n, requireLength(d, 1, "repeats"));
  if (n != r) return makeError("Tile: repeats has ", n, " entries for an input of rank ", r);
  const std::vector<SVal> dims = d.dims(0), inStrides = rowMajorStrides(d, dims);
  std::vector<SVal> repeats, outDims;
  for (int a = 0; a < r; ++a) {
    repeats.push_back(d.elem(1, a));
    d.check(d.le(d.c(0), repeats.back()), "repeats has a negative entry {}", {repeats.back()});
    outDims.push_back(d.mul(dims[size_t(a)], repeats.back()));
  }
  d.setOutput(0, outDims, d.inputType(0));
  const std::vector<SVal> outStrides = rowMajorStrides(d, outDims);
  BoxCopy copy{d.in(0), d.out(0), {}, {}, {}, {}, {}};
  for (int a = 0; a < r; ++a) {
    copy.dims.insert(copy.dims.end(), {repeats[size_t(a)], dims[size_t(a)]});
    copy.srcStrides.insert(copy.srcStrides.end(), {d.c(0), inStrides[size_t(a)]});
    copy.dstStrides.insert(copy.dstStrides.end(),
                           {d.mul(dims[size_t(a)], outStrides[size_t(a)]), outStrides[size_t(a)]});
  }
  emitBoxCopy(d, std::move(copy));
  return Status::success();
}

// ---- Pad ------------------------------------------------------------------------------

enum class PadMode { Constant, Reflect, Edge, Wrap };

// One axis of a pad: `lo` input elements are cropped at the front, the
// `kept` after them are kept, `before` and `after` positions are added.
struct PadAxis {
  SVal lo, kept, before, after, out;
};

// Where position p (relative to the kept window, outside [0, n)) reads
// from in `mode`, as an index into the window; the identity inside it.
// (Reflect of one element: the period is 0, and Kernel IR's mod by 0 gives
// 0, the one element.)
int padSource(kir::KernelBuilder &b, PadMode mode, int p, int n) {
  using O = Opcode;
  const DType t = DType::I64;
  auto mod = [&](int x, int m) {
    return b.binary(O::Mod, t, b.binary(O::Add, t, b.binary(O::Mod, t, x, m), m), m);
  };
  if (mode == PadMode::Edge)
    return b.binary(O::Min, t, b.binary(O::Max, t, p, b.intConstant(t, 0)),
                    b.binary(O::Sub, t, n, b.intConstant(t, 1)));
  if (mode == PadMode::Wrap) return mod(p, n);
  const int period =
      b.binary(O::Mul, t, b.intConstant(t, 2), b.binary(O::Sub, t, n, b.intConstant(t, 1)));
  const int m = mod(p, period);
  return b.select(t, b.compare(O::Lt, t, m, n), m, b.binary(O::Sub, t, period, m));
}

// The fill value of constant mode: input 2 converted to the data's dtype,
// 0 when absent or empty.
int padValue(DispatchBuilder &d, kir::KernelBuilder &b, DType t) {
  const int zero = b.intConstant(t, 0);
  if (!d.input(2)) return zero;
  const DType vt = d.inputType(2);
  auto loadValue = [&] { return b.cast(t, vt, b.load(d.in(2), Affine{})); };
  const SVal count = d.numel(2);
  if (isConstant(d, count, 0)) return zero;
  if (isConstant(d, count, 1)) return loadValue();
  const int var = b.addVar("fill", t);
  b.varWrite(var, zero);
  b.beginIf(b.compare(Opcode::Ne, DType::I64, d.value(count), b.intConstant(DType::I64, 0)));
  b.varWrite(var, loadValue());
  b.endIf();
  return b.varRead(var);
}

// Reflect, edge and wrap: each row (all but the last axis) finds its
// source row through the mode per axis; the last axis copies its kept
// window as a run and maps only its padded ends element by element.
void emitModePad(DispatchBuilder &d, PadMode mode, const std::vector<PadAxis> &axes) {
  const int r = int(axes.size());
  std::vector<SVal> inDims, outDims;
  for (const PadAxis &a : axes) {
    outDims.push_back(a.out);
    inDims.push_back(d.dim(0, int(inDims.size())));
  }
  const std::vector<SVal> inStrides = rowMajorStrides(d, inDims);
  const std::vector<SVal> outer(outDims.begin(), outDims.end() - 1);
  const PadAxis &last = axes.back();
  const SVal rows = d.product(outer);
  kir::KernelBuilder &b = d.beginKernel(rows, last.out);
  const int row = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const std::vector<int> coords = unflatten(d, b.index(Affine{}.add(1, -1, row)), outer);
  int src = -1;
  for (int a = 0; a + 1 < r; ++a) {
    const PadAxis &ax = axes[size_t(a)];
    const int p = b.binary(Opcode::Sub, DType::I64, coords[size_t(a)], d.value(ax.before));
    const int at =
        b.binary(Opcode::Add, DType::I64, d.value(ax.lo), padSource(b, mode, p, d.value(ax.kept)));
    src = addValues(b, src, mulValue(d, at, inStrides[size_t(a)]));
  }
  const Affine dstRow = d.term(last.out, row);
  // The padded ends: position p = j - before (front) or kept + j (back).
  auto padEnd = [&](SVal count, SVal dstStart, bool front) {
    const int j = d.loop(count);
    const int jv = b.index(Affine{}.add(1, -1, j));
    const int p = front ? b.binary(Opcode::Sub, DType::I64, jv, d.value(last.before))
                        : b.binary(Opcode::Add, DType::I64, jv, d.value(last.kept));
    const int at = b.binary(Opcode::Add, DType::I64, d.value(last.lo),
                            padSource(b, mode, p, d.value(last.kept)));
    Affine dst = dstRow;
    d.addTerm(dst, dstStart);
    dst.add(1, -1, j);
    b.store(d.out(0), dst, b.load(d.in(0), Affine{}, addValues(b, src, at)));
    b.endLoop();
  };
  padEnd(last.before, d.c(0), true);
  const int j = d.loop(last.kept, {Schedule::Kind::Vector, kVectorWidth});
  Affine dst = dstRow, from = d.term(last.lo);
  d.addTerm(dst, last.before);
  dst.add(1, -1, j);
  from.add(1, -1, j);
  b.store(d.out(0), dst, b.load(d.in(0), from, src));
  b.endLoop();
  padEnd(last.after, d.add(last.before, last.kept), false);
  b.endLoop();
  d.endKernel();
}

// Negative pads crop first; the kept window is then padded, so reflect,
// edge and wrap see the cropped data (as the interpreter does).
Status lowerPad(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  const int r = d.inputRank(0);
  if (r < 0) return makeError("Pad needs an input of known rank");
  const std::string modeName = d.node().getString("mode");
  PadMode mode;
  if (modeName == "constant")
    mode = PadMode::Constant;
  else if (modeName == "reflect")
    mode = PadMode::Reflect;
  else if (modeName == "edge")
    mode = PadMode::Edge;
  else if (modeName == "wrap")
    mode = PadMode::Wrap;
  else
    return makeError("Pad: unknown mode '", modeName, "'");
  KILN_ASSIGN_OR_RETURN(int64_t np, requireLength(d, 1, "pads"));
  std::vector<SVal> begins(size_t(r), d.c(0)), ends(size_t(r), d.c(0));
  if (d.input(3)) {
    KILN_ASSIGN_OR_RETURN(int64_t na, requireLength(d, 3, "axes"));
    if (np != 2 * na) return makeError("Pad: pads has ", np, " entries, expected ", 2 * na);
    // A later entry for an axis overrides an earlier one.
    for (int64_t i = 0; i < na; ++i) {
      const SVal axis = runtimeAxis(d, d.elem(3, i), r);
      for (int a = 0; a < r; ++a) {
        const SVal match = d.eq(axis, d.c(a));
        begins[size_t(a)] = d.select(match, d.elem(1, i), begins[size_t(a)]);
        ends[size_t(a)] = d.select(match, d.elem(1, i + na), ends[size_t(a)]);
      }
    }
  } else {
    if (np != 2 * r) return makeError("Pad: pads has ", np, " entries, expected ", 2 * r);
    for (int a = 0; a < r; ++a) {
      begins[size_t(a)] = d.elem(1, a);
      ends[size_t(a)] = d.elem(1, a + r);
    }
  }
  const SVal zero = d.c(0);
  std::vector<PadAxis> axes;
  bool padded = false; // statically known to add positions
  for (int a = 0; a < r; ++a) {
    const SVal dim = d.dim(0, a), begin = begins[size_t(a)], end = ends[size_t(a)];
    PadAxis ax;
    ax.lo = d.max(zero, d.sub(zero, begin));
    ax.kept = d.sub(d.sub(dim, ax.lo), d.max(zero, d.sub(zero, end)));
    const SVal negDim = d.sub(zero, dim);
    d.check(d.land(d.land(d.le(negDim, begin), d.le(negDim, end)), d.le(zero, ax.kept)),
            "pads crop more than the {} elements of axis " + std::to_string(a), {dim});
    ax.before = d.max(zero, begin);
    ax.after = d.max(zero, end);
    ax.out = d.add(d.add(ax.before, ax.kept), ax.after);
    if (mode != PadMode::Constant)
      d.check(d.lnot(d.land(d.eq(ax.kept, zero), d.lt(zero, ax.out))),
              "cannot pad empty axis " + std::to_string(a) + " in " + modeName + " mode");
    padded = padded || !isConstant(d, ax.before, 0) || !isConstant(d, ax.after, 0);
    axes.push_back(ax);
  }
  std::vector<SVal> outDims;
  for (const PadAxis &ax : axes) outDims.push_back(ax.out);
  const DType t = d.inputType(0);
  d.setOutput(0, outDims, t);
  if (mode != PadMode::Constant && r > 0) {
    emitModePad(d, mode, axes);
    return Status::success();
  }
  // Constant mode: fill, then copy the kept window into place.
  if (padded)
    emitFill(d, d.out(0), outDims, [&](kir::KernelBuilder &b) { return padValue(d, b, t); });
  const std::vector<SVal> inStrides = rowMajorStrides(d, d.dims(0)),
                          outStrides = rowMajorStrides(d, outDims);
  BoxCopy copy{d.in(0), d.out(0), {}, inStrides, outStrides, zero, zero};
  for (int a = 0; a < r; ++a) {
    copy.dims.push_back(axes[size_t(a)].kept);
    copy.srcBase = d.add(copy.srcBase, d.mul(axes[size_t(a)].lo, inStrides[size_t(a)]));
    copy.dstBase = d.add(copy.dstBase, d.mul(axes[size_t(a)].before, outStrides[size_t(a)]));
  }
  emitBoxCopy(d, std::move(copy));
  return Status::success();
}

// ---- ConstantOfShape ----------------------------------------------------------------

Status lowerConstantOfShape(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(refuseStrings(d));
  KILN_ASSIGN_OR_RETURN(int64_t n, requireLength(d, 0, "shape"));
  std::vector<SVal> dims;
  for (int64_t i = 0; i < n; ++i) {
    dims.push_back(d.elem(0, i));
    d.check(d.le(d.c(0), dims.back()), "shape has a negative dim {}", {dims.back()});
  }
  Tensor value = Tensor::scalar<float>(0.0f);
  if (d.node().hasAttr("value")) value = d.node().getTensor("value");
  if (value.numel() != 1) return makeError("ConstantOfShape: value must hold one element");
  const DType t = value.dtype();
  if (t == DType::String) return makeError("ConstantOfShape: string values are not Kernel IR");
  d.setOutput(0, dims, t);
  emitFill(d, d.out(0), dims, [&](kir::KernelBuilder &b) {
    return isFloat(t) ? b.constant(t, value.getDouble(0)) : b.intConstant(t, value.getInt(0));
  });
  return Status::success();
}

} // namespace
} // namespace kiln::lower
