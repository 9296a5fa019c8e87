// Kernel IR lowerings of normalizations: Layer, Group, Instance, Batch,
// MeanVariance, LRN (lower/ops.h), matching interp/kernels/norm.cpp:
// statistics accumulate in f32 (f64 for f64 inputs), and every formula keeps
// the interpreter's order of operations.
//
// Layer, group and instance normalization normalize blocks of contiguous
// elements (a trailing-axes row, a group of channel planes, one channel
// plane): each block is one iteration of the parallel loop, walked three
// times (sum, squared deviations, output), and they differ only in how
// scale and bias index into a block.
#include "lower/ops.h"
#include "lower/reduce_nest.h"

namespace kiln::lower {

namespace {

using kir::Affine;
using kir::Opcode;
using kir::Schedule;

Status lowerLayerNorm(DispatchBuilder &d);
Status lowerGroupNorm(DispatchBuilder &d);
Status lowerInstanceNorm(DispatchBuilder &d);
Status lowerBatchNorm(DispatchBuilder &d);
Status lowerLrn(DispatchBuilder &d);
Status lowerMvn(DispatchBuilder &d);

} // namespace

LowerFn normLowering(OpKind op) {
  switch (op) {
  case OpKind::LayerNormalization:
    return lowerLayerNorm;
  case OpKind::GroupNormalization:
    return lowerGroupNorm;
  case OpKind::InstanceNormalization:
    return lowerInstanceNorm;
  case OpKind::BatchNormalization:
    return lowerBatchNorm;
  case OpKind::LRN:
    return lowerLrn;
  case OpKind::MeanVarianceNormalization:
    return lowerMvn;
  default:
    return nullptr;
  }
}

namespace {

// ---- shared pieces ------------------------------------------------------------------

Status expectFloat(DispatchBuilder &d) {
  const DType t = d.inputType(0);
  if (!isFloat(t)) return makeError("expects a float tensor, got ", dtypeName(t));
  return Status::success();
}

// N, C and the spatial size of an [N, C, ...] input.
struct Channels {
  SVal n, c, plane;
};

Expected<Channels> channelsOf(DispatchBuilder &d) {
  const std::vector<SVal> dims = d.dims(0);
  if (dims.size() < 2) return makeError("input X needs a known rank of at least 2 ([N, C, ...])");
  return Channels{dims[0], dims[1], d.product({dims.begin() + 2, dims.end()})};
}

// A run-time error unless input `input` holds `count` values.
void checkCount(DispatchBuilder &d, int input, SVal count, const char *what) {
  d.check(d.eq(d.numel(input), count), std::string(what) + " has {} values, expected {}",
          {d.numel(input), count});
}

// A value of `t` loaded from a one-dimensional parameter at i64 `at`, in `acc`.
int paramAt(DispatchBuilder &d, int input, DType acc, int at) {
  kir::KernelBuilder &b = d.kb();
  return convert(b, acc, d.inputType(input), b.load(d.in(input), Affine{}, at));
}

// The loops over one block: walk(body) opens them, calls body(x, param)
// with the offsets of the element in x (within the block) and in scale and
// bias, and closes them.
using BlockBody = std::function<void(const Affine &x, const Affine &param)>;
using BlockWalk = std::function<void(const BlockBody &)>;

struct BlockStats {
  int mean = -1, invStd = -1;
};

// The interpreter's normalizeBlocks for one block of `count` elements at
// `base` (+ `baseDyn`): mean, 1/sqrt(variance + eps), then
// y = affine((x - mean) * invStd, param offset).
BlockStats normalizeBlock(DispatchBuilder &d, const Affine &base, int baseDyn, SVal count,
                          double eps, const BlockWalk &walk,
                          const std::function<int(int, const Affine &)> &affine) {
  kir::KernelBuilder &b = d.kb();
  const DType t = d.inputType(0), acc = floatAccType(t);
  auto at = [&](const Affine &x) {
    Affine a = base;
    return append(a, x);
  };
  auto load = [&](const Affine &x) { return convert(b, acc, t, b.load(d.in(0), at(x), baseDyn)); };
  const int n = convert(b, acc, DType::I64, d.value(count));
  const int sum = b.addVar("sum", acc), sq = b.addVar("sq", acc);
  b.varWrite(sum, b.constant(acc, 0));
  walk([&](const Affine &x, const Affine &) {
    b.varWrite(sum, b.binary(Opcode::Add, acc, b.varRead(sum), load(x)));
  });
  BlockStats s;
  s.mean = b.binary(Opcode::Div, acc, b.varRead(sum), n);
  b.varWrite(sq, b.constant(acc, 0));
  walk([&](const Affine &x, const Affine &) {
    const int dev = b.binary(Opcode::Sub, acc, load(x), s.mean);
    b.varWrite(sq, b.binary(Opcode::Add, acc, b.varRead(sq), b.binary(Opcode::Mul, acc, dev, dev)));
  });
  const int variance = b.binary(Opcode::Div, acc, b.varRead(sq), n);
  s.invStd = b.unary(
      Opcode::Recip, acc,
      b.unary(Opcode::Sqrt, acc, b.binary(Opcode::Add, acc, variance, b.constant(acc, eps))));
  walk([&](const Affine &x, const Affine &param) {
    const int v = b.binary(Opcode::Mul, acc, b.binary(Opcode::Sub, acc, load(x), s.mean), s.invStd);
    b.store(d.out(0), at(x), convert(b, t, acc, affine(v, param)), baseDyn);
  });
  return s;
}

// ---- LayerNormalization ----------------------------------------------------------------

// Per dim of the normalized (trailing) shape, the stride of a scale or bias
// broadcast to it (0 along its broadcast dims), with run-time checks that
// it does broadcast.
Expected<std::vector<SVal>> broadcastStrides(DispatchBuilder &d, int input,
                                             const std::vector<SVal> &inner, const char *what) {
  const int rank = d.inputRank(input);
  const int n = int(inner.size());
  if (rank < 0) return makeError(what, " has an unknown rank");
  if (rank > n)
    return makeError(what, " has rank ", rank, ", more than the ", n, " normalized axes");
  std::vector<SVal> strides(size_t(n), d.c(0));
  SVal stride = d.c(1);
  for (int p = rank - 1; p >= 0; --p) {
    const int q = p + n - rank;
    const SVal dim = d.dim(input, p);
    d.check(d.lor(d.eq(dim, d.c(1)), d.eq(dim, inner[size_t(q)])),
            std::string(what) + " has {} at its axis {} where the normalized shape has {}",
            {dim, d.c(p), inner[size_t(q)]});
    strides[size_t(q)] = d.select(d.eq(dim, d.c(1)), d.c(0), stride);
    stride = d.mul(stride, dim);
  }
  return strides;
}

bool sameValue(DispatchBuilder &d, SVal a, SVal b) {
  if (a.id == b.id) return true;
  const auto ka = d.constant(a), kb = d.constant(b);
  return ka && kb && *ka == *kb;
}

Status lowerLayerNorm(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(expectFloat(d));
  const int rank = d.inputRank(0);
  if (rank < 1) return makeError("the input needs a known rank of at least 1");
  int64_t axis = d.node().getInt("axis");
  if (axis < -rank || axis >= rank)
    return makeError("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  const std::vector<SVal> dims = d.dims(0);
  const std::vector<SVal> outer(dims.begin(), dims.begin() + axis),
      inner(dims.begin() + axis, dims.end());
  const SVal rows = d.product(outer), cols = d.product(inner);
  const bool hasBias = d.input(2) != nullptr;
  KILN_ASSIGN_OR_RETURN(auto scaleStrides, broadcastStrides(d, 1, inner, "scale"));
  std::vector<SVal> biasStrides;
  if (hasBias) {
    KILN_ASSIGN_OR_RETURN(biasStrides, broadcastStrides(d, 2, inner, "bias"));
  }
  // x's own strides within a row: when scale and bias have them, one flat
  // loop walks the row.
  std::vector<SVal> xStrides(inner.size());
  SVal stride = d.c(1);
  for (size_t q = inner.size(); q-- > 0;) {
    xStrides[q] = stride;
    stride = d.mul(stride, inner[q]);
  }
  bool flat = true;
  for (size_t q = 0; q < inner.size(); ++q) {
    flat = flat && sameValue(d, scaleStrides[q], xStrides[q]);
    if (hasBias) flat = flat && sameValue(d, biasStrides[q], xStrides[q]);
  }

  d.setOutput(0, dims);
  // The statistics are computed in the accumulator type and stored in the
  // declared output types (stash_type's, unless a pass widened the node).
  std::vector<SVal> statDims = outer;
  statDims.resize(size_t(rank), d.c(1));
  for (int i = 1; i < d.node().numOutputs(); ++i) d.setOutput(i, statDims);

  const DType t = d.inputType(0), acc = floatAccType(t);
  kir::KernelBuilder &b = d.beginKernel(rows, cols);
  const int o = d.loop(rows, {Schedule::Kind::Parallel, 1});
  // Params are loaded at `scale`'s offsets; bias uses its own strides,
  // carried in a second affine when they differ.
  Affine biasOffset;
  auto walk = [&](const BlockBody &body) {
    if (flat) {
      const int i = d.loop(cols, {Schedule::Kind::Vector, vectorWidth(t)});
      const Affine at = Affine{}.add(1, -1, i);
      biasOffset = at;
      body(at, at);
      b.endLoop();
      return;
    }
    Affine x, scale, bias;
    for (size_t q = 0; q < inner.size(); ++q) {
      Schedule s;
      if (q + 1 == inner.size()) s = {Schedule::Kind::Vector, vectorWidth(t)};
      const int i = d.loop(inner[q], s);
      d.addTerm(x, xStrides[q], i);
      d.addTerm(scale, scaleStrides[q], i);
      if (hasBias) d.addTerm(bias, biasStrides[q], i);
    }
    biasOffset = bias;
    body(x, scale);
    for (size_t q = 0; q < inner.size(); ++q) b.endLoop();
  };
  auto affine = [&](int v, const Affine &scaleAt) {
    const int s = convert(b, acc, d.inputType(1), b.load(d.in(1), scaleAt));
    int y = b.binary(Opcode::Mul, acc, v, s);
    if (hasBias)
      y = b.binary(Opcode::Add, acc, y,
                   convert(b, acc, d.inputType(2), b.load(d.in(2), biasOffset)));
    return y;
  };
  const BlockStats s =
      normalizeBlock(d, d.term(cols, o), -1, cols, d.node().getFloat("epsilon"), walk, affine);
  const Affine statAt = Affine{}.add(1, -1, o);
  if (d.node().numOutputs() > 1)
    b.store(d.out(1), statAt, convert(b, d.outputType(1), acc, s.mean));
  if (d.node().numOutputs() > 2)
    b.store(d.out(2), statAt, convert(b, d.outputType(2), acc, s.invStd));
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// ---- GroupNormalization, InstanceNormalization -------------------------------------------

// Normalizes each of N * groups blocks of (C / groups) channel planes.
// Scale and bias hold one value per channel, or one per group when
// `perGroup` (a shape value) holds.
Status normalizeGroups(DispatchBuilder &d, const Channels &ch, SVal groups, SVal perGroupParams) {
  const DType t = d.inputType(0), acc = floatAccType(t);
  d.setOutput(0, d.dims(0));
  const SVal channelsPerGroup = d.floorDiv(ch.c, groups);
  const SVal blocks = d.mul(ch.n, groups), size = d.mul(channelsPerGroup, ch.plane);
  // A block's parameter: group g's, or channel g * channelsPerGroup + c's.
  const SVal groupStride = d.select(perGroupParams, d.c(1), channelsPerGroup);
  const SVal channelStride = d.select(perGroupParams, d.c(0), d.c(1));
  kir::KernelBuilder &b = d.beginKernel(blocks, size);
  const int blk = d.loop(blocks, {Schedule::Kind::Parallel, 1});
  const int g =
      b.binary(Opcode::Mod, DType::I64, b.index(Affine{}.add(1, -1, blk)), d.value(groups));
  const int paramBase = b.binary(Opcode::Mul, DType::I64, g, d.value(groupStride));
  auto walk = [&](const BlockBody &body) {
    const int c = d.loop(channelsPerGroup);
    const int p = d.loop(ch.plane, {Schedule::Kind::Vector, vectorWidth(t)});
    Affine x = d.term(ch.plane, c);
    x.add(1, -1, p);
    body(x, d.term(channelStride, c));
    b.endLoop();
    b.endLoop();
  };
  auto affine = [&](int v, const Affine &at) {
    const int s = convert(b, acc, d.inputType(1), b.load(d.in(1), at, paramBase));
    const int bias = convert(b, acc, d.inputType(2), b.load(d.in(2), at, paramBase));
    return b.binary(Opcode::Add, acc, b.binary(Opcode::Mul, acc, v, s), bias);
  };
  normalizeBlock(d, d.term(size, blk), -1, size, d.node().getFloat("epsilon"), walk, affine);
  b.endLoop();
  d.endKernel();
  return Status::success();
}

Status lowerGroupNorm(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(expectFloat(d));
  KILN_ASSIGN_OR_RETURN(Channels ch, channelsOf(d));
  const int64_t numGroups = d.node().getInt("num_groups");
  if (numGroups <= 0) return makeError("num_groups must be positive, got ", numGroups);
  const SVal groups = d.c(numGroups);
  d.check(d.eq(d.floorMod(ch.c, groups), d.c(0)), "num_groups {} does not divide the {} channels",
          {groups, ch.c});
  // Opset 18 gives scale and bias per group, opset 21 per channel.
  const SVal perGroup = d.land(d.eq(d.numel(1), groups), d.ne(groups, ch.c));
  const SVal count = d.select(perGroup, groups, ch.c);
  checkCount(d, 1, count, "scale");
  checkCount(d, 2, count, "bias");
  return normalizeGroups(d, ch, groups, perGroup);
}

Status lowerInstanceNorm(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(expectFloat(d));
  KILN_ASSIGN_OR_RETURN(Channels ch, channelsOf(d));
  checkCount(d, 1, ch.c, "scale");
  checkCount(d, 2, ch.c, "bias");
  // One channel plane per block: d.max keeps the group count a valid
  // divisor when there are no channels (no blocks then).
  return normalizeGroups(d, ch, d.max(ch.c, d.c(1)), d.c(0));
}

// ---- BatchNormalization -------------------------------------------------------------------

// y = scale * (x - mean) / sqrt(var + eps) + bias per channel, in f32 (f64
// for f64); `meanOf` and `varOf` give a channel's statistics (i64 channel).
void emitBatchNormApply(DispatchBuilder &d, const Channels &ch,
                        const std::function<int(int)> &meanOf,
                        const std::function<int(int)> &varOf) {
  const DType t = d.inputType(0), acc = floatAccType(t);
  const SVal blocks = d.mul(ch.n, ch.c);
  kir::KernelBuilder &b = d.beginKernel(blocks, ch.plane);
  const int blk = d.loop(blocks, {Schedule::Kind::Parallel, 1});
  const int c = b.binary(Opcode::Mod, DType::I64, b.index(Affine{}.add(1, -1, blk)),
                         d.value(d.max(ch.c, d.c(1))));
  const int scale = paramAt(d, 1, acc, c), bias = paramAt(d, 2, acc, c);
  const int mean = meanOf(c);
  const double eps = d.node().getFloat("epsilon");
  const int den =
      b.unary(Opcode::Sqrt, acc, b.binary(Opcode::Add, acc, varOf(c), b.constant(acc, eps)));
  const int p = d.loop(ch.plane, {Schedule::Kind::Vector, vectorWidth(t)});
  const Affine at = rowMajor(d, blk, ch.plane, p);
  const int x = convert(b, acc, t, b.load(d.in(0), at));
  const int y = b.binary(Opcode::Mul, acc, scale, b.binary(Opcode::Sub, acc, x, mean));
  b.store(d.out(0), at,
          convert(b, t, acc, b.binary(Opcode::Add, acc, b.binary(Opcode::Div, acc, y, den), bias)));
  b.endLoop();
  b.endLoop();
  d.endKernel();
}

// Training mode: per-channel mean and population variance over N and the
// planes (0 for an empty input) into scratch `meanRow` and `varRow`.
void emitBatchStats(DispatchBuilder &d, const Channels &ch, int meanRow, int varRow) {
  const DType t = d.inputType(0), acc = floatAccType(t);
  const SVal count = d.mul(ch.n, ch.plane), batchStride = d.mul(ch.c, ch.plane);
  kir::KernelBuilder &b = d.beginKernel(ch.c, count);
  const int c = d.loop(ch.c, {Schedule::Kind::Parallel, 1});
  const int nValues = d.value(count);
  const int empty = b.compare(Opcode::Eq, DType::I64, nValues, b.intConstant(DType::I64, 0));
  const int n = convert(b, acc, DType::I64, nValues);
  auto walk = [&](auto body) {
    const int i = d.loop(ch.n);
    const int p = d.loop(ch.plane, {Schedule::Kind::Vector, vectorWidth(t)});
    Affine at = d.term(batchStride, i);
    d.addTerm(at, ch.plane, c);
    at.add(1, -1, p);
    body(convert(b, acc, t, b.load(d.in(0), at)));
    b.endLoop();
    b.endLoop();
  };
  const int sum = b.addVar("sum", acc), sq = b.addVar("sq", acc);
  const int zero = b.constant(acc, 0);
  b.varWrite(sum, zero);
  walk([&](int x) { b.varWrite(sum, b.binary(Opcode::Add, acc, b.varRead(sum), x)); });
  const int mean = b.binary(Opcode::Div, acc, b.varRead(sum), n);
  b.varWrite(sq, zero);
  walk([&](int x) {
    const int dev = b.binary(Opcode::Sub, acc, x, mean);
    b.varWrite(sq, b.binary(Opcode::Add, acc, b.varRead(sq), b.binary(Opcode::Mul, acc, dev, dev)));
  });
  const int var = b.binary(Opcode::Div, acc, b.varRead(sq), n);
  const Affine at = Affine{}.add(1, -1, c);
  b.store(d.scratch(meanRow), at, b.select(acc, empty, zero, mean));
  b.store(d.scratch(varRow), at, b.select(acc, empty, zero, var));
  b.endLoop();
  d.endKernel();
}

// Running statistics: input * momentum + batch value * (1 - momentum), in
// f64 and stored in the input's type, as the interpreter.
void emitRunningStats(DispatchBuilder &d, const Channels &ch, int meanRow, int varRow) {
  const double momentum = d.node().getFloat("momentum");
  kir::KernelBuilder &b = d.beginKernel(ch.c, d.c(2));
  const int c = d.loop(ch.c, {Schedule::Kind::Parallel, 1});
  const Affine at = Affine{}.add(1, -1, c);
  const DType acc = floatAccType(d.inputType(0));
  for (int k = 1; k < d.node().numOutputs() && k <= 2; ++k) {
    const int input = 2 + k, row = d.scratch(k == 1 ? meanRow : varRow);
    const DType t = d.inputType(input);
    const int old = convert(b, DType::F64, t, b.load(d.in(input), at));
    const int batch = convert(b, DType::F64, acc, b.load(row, at));
    const int v =
        b.binary(Opcode::Add, DType::F64,
                 b.binary(Opcode::Mul, DType::F64, old, b.constant(DType::F64, momentum)),
                 b.binary(Opcode::Mul, DType::F64, batch, b.constant(DType::F64, 1 - momentum)));
    b.store(d.out(k), at, convert(b, t, DType::F64, v));
  }
  b.endLoop();
  d.endKernel();
}

Status lowerBatchNorm(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(expectFloat(d));
  KILN_ASSIGN_OR_RETURN(Channels ch, channelsOf(d));
  const char *names[] = {"scale", "bias", "input_mean", "input_var"};
  for (int i = 1; i <= 4; ++i) checkCount(d, i, ch.c, names[i - 1]);
  const bool training = d.node().getInt("training_mode") != 0;
  const int extra = std::min(d.node().numOutputs(), 3) - 1; // running mean, running var
  for (int k = 1; k <= extra; ++k)
    if (d.inputRank(2 + k) < 0) return makeError(names[1 + k], " has an unknown rank");
  d.setOutput(0, d.dims(0));
  for (int k = 1; k <= extra; ++k) d.setOutput(k, d.dims(2 + k), d.inputType(2 + k));
  const DType acc = floatAccType(d.inputType(0));
  if (!training) {
    emitBatchNormApply(
        d, ch, [&](int c) { return paramAt(d, 3, acc, c); },
        [&](int c) { return paramAt(d, 4, acc, c); });
    // Outside training the statistics pass through unchanged.
    for (int k = 1; k <= extra; ++k) emitCopy(d, 2 + k, k);
    return Status::success();
  }
  const int meanRow = d.addScratch(acc, ch.c), varRow = d.addScratch(acc, ch.c);
  emitBatchStats(d, ch, meanRow, varRow);
  auto fromRow = [&](int row) {
    return [&d, row](int c) { return d.kb().load(d.scratch(row), Affine{}, c); };
  };
  emitBatchNormApply(d, ch, fromRow(meanRow), fromRow(varRow));
  if (extra > 0) emitRunningStats(d, ch, meanRow, varRow);
  return Status::success();
}

// ---- LRN ----------------------------------------------------------------------------------

// y = x / (bias + alpha / size * sum of x^2 over the nearby channels)^beta.
// The window's sum of squares of each channel plane builds up in scratch,
// one neighbour channel at a time (in the interpreter's order).
Status lowerLrn(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(expectFloat(d));
  KILN_ASSIGN_OR_RETURN(Channels ch, channelsOf(d));
  const int64_t size = d.node().getInt("size");
  if (size <= 0) return makeError("size must be positive, got ", size);
  const double alpha = d.node().getFloat("alpha"), beta = d.node().getFloat("beta");
  const double bias = d.node().getFloat("bias");
  const int64_t before = (size - 1) / 2;
  d.setOutput(0, d.dims(0));
  const DType t = d.inputType(0), acc = floatAccType(t);
  const SVal blocks = d.mul(ch.n, ch.c);
  const int sums = d.addScratch(acc, d.mul(blocks, ch.plane));
  kir::KernelBuilder &b = d.beginKernel(blocks, d.mul(ch.plane, d.c(size + 1)));
  const int blk = d.loop(blocks, {Schedule::Kind::Parallel, 1});
  const int c = b.binary(Opcode::Mod, DType::I64, b.index(Affine{}.add(1, -1, blk)),
                         d.value(d.max(ch.c, d.c(1))));
  const Schedule vec{Schedule::Kind::Vector, vectorWidth(t)};
  const int buf = d.scratch(sums);
  int p = d.loop(ch.plane, vec);
  b.store(buf, rowMajor(d, blk, ch.plane, p), b.constant(acc, 0));
  b.endLoop();
  // Neighbour k of the window is channel c + k - before; outside [0, C) it
  // adds nothing (and reads the channel itself, in bounds).
  const int k = d.loop(d.c(size));
  const int shift = b.index(Affine{}.add(1, -1, k).add(-before, -1, -1));
  const int neighbour = b.binary(Opcode::Add, DType::I64, c, shift);
  const int valid =
      b.binary(Opcode::And, DType::Bool,
               b.compare(Opcode::Ge, DType::I64, neighbour, b.intConstant(DType::I64, 0)),
               b.compare(Opcode::Lt, DType::I64, neighbour, d.value(ch.c)));
  const int offset =
      b.binary(Opcode::Mul, DType::I64,
               b.select(DType::I64, valid, shift, b.intConstant(DType::I64, 0)), d.value(ch.plane));
  p = d.loop(ch.plane, vec);
  Affine at = rowMajor(d, blk, ch.plane, p);
  const int v = convert(b, acc, t, b.load(d.in(0), at, offset));
  const int sq = b.select(acc, valid, b.binary(Opcode::Mul, acc, v, v), b.constant(acc, 0));
  b.store(buf, at, b.binary(Opcode::Add, acc, b.load(buf, at), sq));
  b.endLoop();
  b.endLoop();
  p = d.loop(ch.plane, vec);
  at = rowMajor(d, blk, ch.plane, p);
  const int base =
      b.binary(Opcode::Add, acc, b.constant(acc, bias),
               b.binary(Opcode::Mul, acc, b.constant(acc, alpha / double(size)), b.load(buf, at)));
  const int den = b.binary(Opcode::Pow, acc, base, b.constant(acc, beta));
  const int x = convert(b, acc, t, b.load(d.in(0), at));
  b.store(d.out(0), at, convert(b, t, acc, b.binary(Opcode::Div, acc, x, den)));
  b.endLoop();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// ---- MeanVarianceNormalization ---------------------------------------------------------------

// y = (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9), statistics over `axes`
// (default 0, 2, 3), walked with the reduction nest of reduce_nest.h.
Status lowerMvn(DispatchBuilder &d) {
  KILN_RETURN_IF_ERROR(expectFloat(d));
  const int rank = d.inputRank(0);
  if (rank < 0) return makeError("the input's rank is not known");
  const std::vector<int64_t> axes =
      d.node().hasAttr("axes") ? d.node().getInts("axes") : std::vector<int64_t>{0, 2, 3};
  std::vector<SVal> reduced(size_t(rank), d.c(0));
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return makeError("axis ", a, " is out of range for rank ", rank);
    reduced[size_t(a < 0 ? a + rank : a)] = d.c(1);
  }
  d.setOutput(0, d.dims(0));
  ReduceNest nest(d, 0, reduced);
  const DType t = d.inputType(0), acc = floatAccType(t);
  const int sumRow = nest.columns() ? d.addScratch(acc, nest.outCount()) : -1;
  const int sqRow = nest.columns() ? d.addScratch(acc, nest.outCount()) : -1;
  const SVal extent = nest.columns() ? nest.outerCount() : nest.outCount();
  kir::KernelBuilder &b = d.beginKernel(extent, nest.redCount());
  const int o = d.loop(extent, {Schedule::Kind::Parallel, 1});
  const Offset base = nest.base(o);
  const int n = convert(b, acc, DType::I64, d.value(nest.redCount()));
  const Schedule vec{Schedule::Kind::Vector, vectorWidth(t)};
  // Calls body(x offset, state offset) for every element of the block(s).
  auto walk = [&](auto body) {
    const Affine off = nest.openReduced(!nest.columns());
    Affine at = base.affine;
    append(at, off);
    if (nest.columns()) {
      const int j = d.loop(nest.inner(), vec);
      at.add(1, -1, j);
      body(at, rowMajor(d, o, nest.inner(), j));
      b.endLoop();
    } else {
      body(at, Affine{});
    }
    nest.closeReduced();
  };
  auto x = [&](const Affine &at) { return convert(b, acc, t, b.load(d.in(0), at, base.dyn)); };
  // mean, and std + 1e-9 from the sums.
  auto finish = [&](int sum, int sumSq, int &mean, int &den) {
    mean = b.binary(Opcode::Div, acc, sum, n);
    const int var = b.binary(Opcode::Sub, acc, b.binary(Opcode::Div, acc, sumSq, n),
                             b.binary(Opcode::Mul, acc, mean, mean));
    const int sd = b.unary(Opcode::Sqrt, acc, b.binary(Opcode::Max, acc, var, b.constant(acc, 0)));
    den = b.binary(Opcode::Add, acc, sd, b.constant(acc, 1e-9));
  };
  auto write = [&](const Affine &at, int mean, int den) {
    b.store(d.out(0), at,
            convert(b, t, acc,
                    b.binary(Opcode::Div, acc, b.binary(Opcode::Sub, acc, x(at), mean), den)),
            base.dyn);
  };
  if (!nest.columns()) {
    const int sum = b.addVar("sum", acc), sq = b.addVar("sq", acc);
    b.varWrite(sum, b.constant(acc, 0));
    b.varWrite(sq, b.constant(acc, 0));
    walk([&](const Affine &at, const Affine &) {
      const int v = x(at);
      b.varWrite(sum, b.binary(Opcode::Add, acc, b.varRead(sum), v));
      b.varWrite(sq, b.binary(Opcode::Add, acc, b.varRead(sq), b.binary(Opcode::Mul, acc, v, v)));
    });
    int mean, den;
    finish(b.varRead(sum), b.varRead(sq), mean, den);
    walk([&](const Affine &at, const Affine &) { write(at, mean, den); });
  } else {
    const int sumBuf = d.scratch(sumRow), sqBuf = d.scratch(sqRow);
    int j = d.loop(nest.inner(), vec);
    Affine row = rowMajor(d, o, nest.inner(), j);
    b.store(sumBuf, row, b.constant(acc, 0));
    b.store(sqBuf, row, b.constant(acc, 0));
    b.endLoop();
    walk([&](const Affine &at, const Affine &state) {
      const int v = x(at);
      b.store(sumBuf, state, b.binary(Opcode::Add, acc, b.load(sumBuf, state), v));
      b.store(sqBuf, state,
              b.binary(Opcode::Add, acc, b.load(sqBuf, state), b.binary(Opcode::Mul, acc, v, v)));
    });
    // The rows now hold the mean and the denominator.
    j = d.loop(nest.inner(), vec);
    row = rowMajor(d, o, nest.inner(), j);
    int mean, den;
    finish(b.load(sumBuf, row), b.load(sqBuf, row), mean, den);
    b.store(sumBuf, row, mean);
    b.store(sqBuf, row, den);
    b.endLoop();
    walk([&](const Affine &at, const Affine &state) {
      write(at, b.load(sumBuf, state), b.load(sqBuf, state));
    });
  }
  b.endLoop();
  d.endKernel();
  return Status::success();
}

} // namespace
} // namespace kiln::lower
