// Interpreter kernels that generate or select by index: Range, OneHot,
// NonZero, Compress, Trilu, ReverseSequence, EyeLike, and the random ops
// RandomUniformLike, RandomNormalLike and Bernoulli. (Unique has its own file.)
// The random ops draw from a std::mt19937_64 seeded by the node's `seed`
// attribute or else InterpOptions::seed, so a run is reproducible; they can
// never match another implementation's numbers bit for bit.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>
#include <cstring>
#include <random>

namespace kiln {

namespace {

// A scalar input (or one-element tensor) as double.
Expected<double> readScalar(const KernelContext &ctx, int i, const char *what) {
  const Tensor &t = ctx.in(i);
  if (t.numel() != 1 || t.dtype() == DType::String)
    return ctx.error(what, " (input ", i, ") must be a numeric scalar, got ", dtypeName(t.dtype()),
                     shapeToString(t.shape()));
  return t.getDouble(0);
}

// Ranges longer than this are rejected rather than allocated.
constexpr int64_t kMaxRangeLength = int64_t{1} << 31;

// The number of elements of range(start, limit, delta), delta != 0. Integer
// ranges are counted in __int128 so that no int64 difference can overflow.
int64_t rangeCount(DType dtype, const Tensor &start, const Tensor &limit, const Tensor &delta) {
  if (isInt(dtype)) {
    __int128 s = start.getInt(0), l = limit.getInt(0), d = delta.getInt(0), n = 0;
    if (d > 0 && l > s) n = (l - s + d - 1) / d;
    if (d < 0 && l < s) n = (s - l - d - 1) / -d;
    return n > kMaxRangeLength ? kMaxRangeLength + 1 : static_cast<int64_t>(n);
  }
  double count = std::ceil((limit.getDouble(0) - start.getDouble(0)) / delta.getDouble(0));
  if (!(count <= static_cast<double>(kMaxRangeLength))) return kMaxRangeLength + 1; // NaN too
  return count > 0 ? static_cast<int64_t>(count) : 0;
}

template <class T>
Tensor rangeOf(const Tensor &start, const Tensor &delta, int64_t n) {
  Tensor out(start.dtype(), {n});
  T *dst = out.data<T>();
  if constexpr (std::is_integral_v<T>) {
    // Wrapping arithmetic: s + i * d lies between start and limit, but i * d
    // alone may not fit in int64.
    auto s = static_cast<uint64_t>(start.getInt(0)), d = static_cast<uint64_t>(delta.getInt(0));
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<T>(static_cast<int64_t>(s + static_cast<uint64_t>(i) * d));
  } else {
    using C = ComputeType<T>;
    C s = static_cast<C>(start.getDouble(0)), d = static_cast<C>(delta.getDouble(0));
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(s + static_cast<C>(i) * d);
  }
  return out;
}

Status rangeKernel(KernelContext &ctx) {
  const Tensor &start = ctx.in(0), &limit = ctx.in(1), &delta = ctx.in(2);
  for (int i = 0; i < 3; ++i)
    if (ctx.in(i).numel() != 1 || ctx.in(i).dtype() != start.dtype())
      return ctx.error("start, limit and delta must be scalars of one dtype");
  if (delta.getDouble(0) == 0) return ctx.error("delta is 0");
  DType d = start.dtype();
  if (d == DType::String || d == DType::Bool)
    return ctx.error("does not support dtype ", dtypeName(d));
  int64_t n = rangeCount(d, start, limit, delta);
  if (n > kMaxRangeLength)
    return ctx.error("the range has too many elements (more than ", kMaxRangeLength, ")");
  return dispatchNumeric(
      ctx, d, [&](auto tag) { ctx.setOutput(0, rangeOf<decltype(tag)>(start, delta, n)); });
}

Status oneHotKernel(KernelContext &ctx) {
  const Tensor &indices = ctx.in(0), &values = ctx.in(2);
  if (!isNumeric(indices.dtype())) return ctx.error("indices must be numeric");
  KILN_ASSIGN_OR_RETURN(double depthValue, readScalar(ctx, 1, "depth"));
  if (!(depthValue >= 1 && depthValue < 1e9))
    return ctx.error("depth must be a positive count, got ", depthValue);
  auto depth = static_cast<int64_t>(depthValue);
  if (values.numel() != 2) return ctx.error("values must hold [off, on], got ", values.numel());
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        resolveAxis(ctx, ctx.node().getInt("axis"), indices.rank() + 1));
  Shape64 shape = indices.shape();
  shape.insert(shape.begin() + axis, depth);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < indices.rank(); ++i) (i < axis ? outer : inner) *= indices.dim(i);
  Tensor out(values.dtype(), shape);
  visitDType(values.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T off = values.data<T>()[0], on = values.data<T>()[1];
    T *dst = out.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        // Indices outside [-depth, depth) give an all-off row.
        auto idx = static_cast<int64_t>(indices.getDouble(o * inner + i));
        if (idx < 0) idx += depth;
        for (int64_t d = 0; d < depth; ++d) dst[(o * depth + d) * inner + i] = d == idx ? on : off;
      }
  });
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// Whether element i is non-zero (non-empty for strings).
std::vector<bool> nonZeroMask(const Tensor &t) {
  std::vector<bool> mask(t.numel());
  visitDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, std::string>)
        mask[i] = !p[i].empty();
      else
        mask[i] = static_cast<ComputeType<T>>(p[i]) != ComputeType<T>(0);
    }
  });
  return mask;
}

Status nonZeroKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  std::vector<bool> mask = nonZeroMask(x);
  int64_t count = std::count(mask.begin(), mask.end(), true);
  // numpy treats a scalar as a 1-d tensor of one element here.
  Shape64 shape = x.rank() == 0 ? Shape64{1} : x.shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  Tensor out(DType::I64, {rank, count});
  int64_t *dst = out.data<int64_t>();
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0, k = 0; i < x.numel(); ++i, nextIndex(index, shape)) {
    if (!mask[i]) continue;
    for (int64_t a = 0; a < rank; ++a) dst[a * count + k] = index[a];
    ++k;
  }
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

Status compressKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0), &cond = ctx.in(1);
  if (cond.rank() != 1)
    return ctx.error("condition must be 1-d, got ", shapeToString(cond.shape()));
  std::vector<bool> keep = nonZeroMask(cond);
  // Without an axis the input is flattened first.
  Tensor src = ctx.node().hasAttr("axis") ? x : x.reshaped({x.numel()});
  int64_t axis = 0;
  if (ctx.node().hasAttr("axis")) {
    KILN_ASSIGN_OR_RETURN(axis, resolveAxis(ctx, ctx.node().getInt("axis"), x.rank()));
  }
  int64_t dim = src.dim(axis);
  std::vector<int64_t> chosen;
  for (int64_t i = 0; i < static_cast<int64_t>(keep.size()); ++i) {
    if (!keep[i]) continue;
    if (i >= dim) return ctx.error("condition selects index ", i, " beyond axis size ", dim);
    chosen.push_back(i);
  }
  Shape64 shape = src.shape();
  shape[axis] = static_cast<int64_t>(chosen.size());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < src.rank(); ++i)
    if (i != axis) (i < axis ? outer : inner) *= src.dim(i);
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c : chosen)
      for (int64_t i = 0; i < inner; ++i) offsets.push_back((o * dim + c) * inner + i);
  ctx.setOutput(0, gatherOffsets(src, shape, offsets));
  return Status::success();
}

Status triluKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got ", x.rank());
  int64_t k = 0;
  if (ctx.has(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kv, readIntsInput(ctx, 1, "k"));
    if (kv.size() != 1) return ctx.error("k must hold one value, got ", kv.size());
    k = kv[0];
  }
  bool upper = ctx.node().getInt("upper") != 0;
  int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  Tensor out(x.dtype(), x.shape());
  int64_t total = x.numel();
  visitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>();
    T *dst = out.data<T>();
    for (int64_t e = 0; e < total; ++e) {
      int64_t j = e % cols, i = (e / cols) % rows;
      bool keep = upper ? j - i >= k : j - i <= k;
      if (keep) dst[e] = src[e]; // the rest stays zero (empty for strings)
    }
  });
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

Status reverseSequenceKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got ", x.rank());
  int64_t batchAxis = ctx.node().getInt("batch_axis"), timeAxis = ctx.node().getInt("time_axis");
  if (batchAxis < 0 || batchAxis > 1 || timeAxis < 0 || timeAxis > 1 || batchAxis == timeAxis)
    return ctx.error("batch_axis and time_axis must be 0 and 1 in some order");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> lens, readIntsInput(ctx, 1, "sequence_lens"));
  if (static_cast<int64_t>(lens.size()) != x.dim(batchAxis))
    return ctx.error("sequence_lens has ", lens.size(), " entries for batch size ",
                     x.dim(batchAxis));
  for (int64_t l : lens)
    if (l < 0 || l > x.dim(timeAxis))
      return ctx.error("sequence length ", l, " is out of range [0, ", x.dim(timeAxis), "]");
  Shape64 strides = stridesOf(x.shape());
  std::vector<int64_t> index(x.rank(), 0), offsets(x.numel());
  for (int64_t e = 0; e < x.numel(); ++e, nextIndex(index, x.shape())) {
    int64_t t = index[timeAxis], len = lens[index[batchAxis]];
    int64_t src = t < len ? len - 1 - t : t;
    offsets[e] = e + (src - t) * strides[timeAxis];
  }
  ctx.setOutput(0, gatherOffsets(x, x.shape(), offsets));
  return Status::success();
}

// The dtype attribute of EyeLike and the random ops, or `fallback`.
Expected<DType> dtypeAttr(const KernelContext &ctx, DType fallback) {
  if (!ctx.node().hasAttr("dtype")) return fallback;
  auto d = dtypeFromOnnx(static_cast<int>(ctx.node().getInt("dtype")));
  if (!d) return ctx.error("unknown dtype code ", ctx.node().getInt("dtype"));
  return *d;
}

Status eyeLikeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (x.rank() != 2) return ctx.error("input must be 2-d, got ", shapeToString(x.shape()));
  KILN_ASSIGN_OR_RETURN(DType dtype, dtypeAttr(ctx, x.dtype()));
  if (dtype == DType::String) return ctx.error("dtype must not be string");
  int64_t k = ctx.node().getInt("k"), rows = x.dim(0), cols = x.dim(1);
  Tensor out(dtype, x.shape());
  // Row i has its one at column i + k; |k| beyond the matrix leaves zeros
  // (and is kept away from the addition, which could overflow).
  if (k > -rows && k < cols)
    for (int64_t i = 0; i < rows; ++i)
      if (i + k >= 0 && i + k < cols) out.setDouble(i * cols + i + k, 1.0);
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

std::mt19937_64 makeEngine(const KernelContext &ctx) {
  if (!ctx.node().hasAttr("seed")) return std::mt19937_64(ctx.options().seed);
  float seed = ctx.node().getFloat("seed");
  uint32_t bits;
  std::memcpy(&bits, &seed, sizeof bits);
  return std::mt19937_64(bits);
}

// Fills a tensor of the input's shape and the dtype attribute (default: the
// input's) with draw(engine, i).
template <class Draw> Status randomLike(KernelContext &ctx, Draw draw) {
  KILN_ASSIGN_OR_RETURN(DType dtype, dtypeAttr(ctx, ctx.in(0).dtype()));
  if (dtype == DType::String) return ctx.error("dtype must not be string");
  Tensor out(dtype, ctx.in(0).shape());
  std::mt19937_64 engine = makeEngine(ctx);
  for (int64_t i = 0; i < out.numel(); ++i) out.setDouble(i, draw(engine, i));
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

Status randomUniformLikeKernel(KernelContext &ctx) {
  std::uniform_real_distribution<double> dist(ctx.node().getFloat("low"),
                                              ctx.node().getFloat("high"));
  return randomLike(ctx, [&](std::mt19937_64 &e, int64_t) { return dist(e); });
}

Status randomNormalLikeKernel(KernelContext &ctx) {
  std::normal_distribution<double> dist(ctx.node().getFloat("mean"), ctx.node().getFloat("scale"));
  return randomLike(ctx, [&](std::mt19937_64 &e, int64_t) { return dist(e); });
}

Status bernoulliKernel(KernelContext &ctx) {
  const Tensor &p = ctx.in(0);
  if (!isFloat(p.dtype())) return ctx.error("probabilities must be floats");
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  return randomLike(
      ctx, [&](std::mt19937_64 &e, int64_t i) { return dist(e) < p.getDouble(i) ? 1.0 : 0.0; });
}

} // namespace

void registerIndexKernels(KernelTable &t) {
  t.add(OpKind::Range, rangeKernel);
  t.add(OpKind::OneHot, oneHotKernel);
  t.add(OpKind::NonZero, nonZeroKernel);
  t.add(OpKind::Compress, compressKernel);
  t.add(OpKind::Trilu, triluKernel);
  t.add(OpKind::ReverseSequence, reverseSequenceKernel);
  t.add(OpKind::EyeLike, eyeLikeKernel);
  t.add(OpKind::RandomUniformLike, randomUniformLikeKernel);
  t.add(OpKind::RandomNormalLike, randomNormalLikeKernel);
  t.add(OpKind::Bernoulli, bernoulliKernel);
}

} // namespace kiln
