// Interpreter kernels: Reduce*, ArgMax/ArgMin, CumSum, TopK. Reductions walk
// each output element's reduced sub-space through precomputed offsets, so one
// plain loop serves every set of axes. Floats accumulate in float (f32, f16,
// bf16) the way a float implementation would, or in double for f64 and when
// InterpOptions::accumulateF64 is set; integers accumulate in 64 bits and wrap
// back to their own type at the end.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kiln {

namespace {

// ---- shared geometry ---------------------------------------------------------

// A tensor viewed as [outer, len, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};

AxisSplit splitAt(const Shape64 &shape, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < axis; ++i) s.outer *= shape[i];
  s.len = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) s.inner *= shape[i];
  return s;
}

// Stores a compute value into storage type T (f16/bf16 round from float).
template <class T, class V> T storeAs(V v) {
  if constexpr (kIsHalfLike<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// Reads element of storage type T as its compute type.
template <class T> ComputeType<T> load(const T &v) {
  return static_cast<ComputeType<T>>(v);
}

// Reads a scalar (or one-element) integer input such as CumSum's axis or
// TopK's k.
Expected<int64_t> scalarIntInput(const KernelContext &ctx, int i, const char *what) {
  const Tensor &t = ctx.in(i);
  if (!isInt(t.dtype()))
    return ctx.error(what, " must be an integer tensor, got ", dtypeName(t.dtype()));
  if (t.numel() != 1)
    return ctx.error(what, " must hold exactly one value, got shape ", shapeToString(t.shape()));
  return t.getInt(0);
}

// ---- Reduce* -------------------------------------------------------------------

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// For each output element, the offset of its first input element (`bases`),
// and the offsets of the reduced elements relative to it (`offsets`).
struct ReducePlan {
  Shape64 outShape;
  std::vector<int64_t> bases;
  std::vector<int64_t> offsets;
};

ReducePlan planReduce(const Shape64 &in, const std::vector<bool> &reduced, bool keepdims) {
  ReducePlan p;
  Shape64 strides = stridesOf(in);
  Shape64 keptDims, keptStrides, redDims, redStrides;
  for (size_t i = 0; i < in.size(); ++i) {
    if (reduced[i]) {
      redDims.push_back(in[i]);
      redStrides.push_back(strides[i]);
      if (keepdims) p.outShape.push_back(1);
    } else {
      keptDims.push_back(in[i]);
      keptStrides.push_back(strides[i]);
      p.outShape.push_back(in[i]);
    }
  }
  // Offsets of every point of a sub-space given by dims and strides.
  auto offsetsOf = [](const Shape64 &dims, const Shape64 &str) {
    std::vector<int64_t> out;
    if (numelOf(dims) == 0) return out;
    out.reserve(numelOf(dims));
    std::vector<int64_t> idx(dims.size(), 0);
    do {
      int64_t off = 0;
      for (size_t k = 0; k < dims.size(); ++k) off += idx[k] * str[k];
      out.push_back(off);
    } while (nextIndex(idx, dims));
    return out;
  };
  p.bases = offsetsOf(keptDims, keptStrides);
  p.offsets = offsetsOf(redDims, redStrides);
  return p;
}

// Runs one reduction: acc = step(acc, x) over the reduced elements, then
// out = finish(acc, count).
template <class T, class Acc, class Step, class Finish>
void runReduce(const ReducePlan &p, const T *in, T *out, Acc init, Step step, Finish finish) {
  int64_t count = static_cast<int64_t>(p.offsets.size());
  for (size_t o = 0; o < p.bases.size(); ++o) {
    const T *base = in + p.bases[o];
    Acc acc = init;
    for (int64_t r : p.offsets) acc = step(acc, static_cast<Acc>(load(base[r])));
    out[o] = storeAs<T>(finish(acc, count));
  }
}

template <class Acc> Acc absOf(Acc x) {
  if constexpr (std::is_unsigned_v<Acc>)
    return x;
  else
    return x < 0 ? -x : x;
}

// log(sum(exp(x))) shifted by the maximum so large inputs do not overflow;
// an infinite or NaN maximum (or an empty set) needs no shift and gives the
// right inf/-inf/NaN unshifted.
template <class T, class Acc> void reduceLogSumExp(const ReducePlan &p, const T *in, T *out) {
  for (size_t o = 0; o < p.bases.size(); ++o) {
    const T *base = in + p.bases[o];
    Acc m = -std::numeric_limits<Acc>::infinity();
    for (int64_t r : p.offsets) m = std::max(m, static_cast<Acc>(load(base[r])));
    Acc shift = std::isfinite(m) ? m : Acc(0);
    Acc sum = 0;
    for (int64_t r : p.offsets) sum += std::exp(static_cast<Acc>(load(base[r])) - shift);
    out[o] = storeAs<T>(shift + std::log(sum));
  }
}

// The identity elements of max and min: -inf/+inf for floats, the lowest
// and highest value of the type for integers.
template <class C, class Acc> Acc maxIdentity() {
  if constexpr (std::numeric_limits<C>::has_infinity)
    return -static_cast<Acc>(std::numeric_limits<C>::infinity());
  else
    return static_cast<Acc>(std::numeric_limits<C>::lowest());
}
template <class C, class Acc> Acc minIdentity() {
  if constexpr (std::numeric_limits<C>::has_infinity)
    return static_cast<Acc>(std::numeric_limits<C>::infinity());
  else
    return static_cast<Acc>(std::numeric_limits<C>::max());
}

template <class T, class Acc>
void reduceWith(ReduceKind kind, const ReducePlan &p, const T *in, T *out) {
  using C = ComputeType<T>;
  auto same = [](Acc a, int64_t) { return a; };
  auto add = [](Acc a, Acc x) -> Acc { return a + x; };
  auto addSq = [](Acc a, Acc x) -> Acc { return a + x * x; };
  switch (kind) {
  case ReduceKind::Sum:
    return runReduce<T, Acc>(p, in, out, Acc(0), add, same);
  case ReduceKind::SumSquare:
    return runReduce<T, Acc>(p, in, out, Acc(0), addSq, same);
  case ReduceKind::L1:
    return runReduce<T, Acc>(
        p, in, out, Acc(0), [](Acc a, Acc x) -> Acc { return a + absOf(x); }, same);
  case ReduceKind::L2:
    return runReduce<T, Acc>(p, in, out, Acc(0), addSq,
                             [](Acc a, int64_t) { return std::sqrt(a); });
  case ReduceKind::LogSum:
    return runReduce<T, Acc>(p, in, out, Acc(0), add, [](Acc a, int64_t) { return std::log(a); });
  case ReduceKind::Prod:
    return runReduce<T, Acc>(
        p, in, out, Acc(1), [](Acc a, Acc x) -> Acc { return a * x; }, same);
  case ReduceKind::Mean:
    return runReduce<T, Acc>(p, in, out, Acc(0), add, [](Acc a, int64_t n) -> Acc {
      if constexpr (std::is_integral_v<Acc>)
        return n == 0 ? Acc(0) : static_cast<Acc>(a / static_cast<Acc>(n));
      else
        return a / static_cast<Acc>(n); // NaN for an empty set, as numpy
    });
  case ReduceKind::Max:
    // NaN wins (x != x), as in numpy's max; the empty set gives -inf or the
    // lowest value of T.
    return runReduce<T, Acc>(
        p, in, out, maxIdentity<C, Acc>(), [](Acc a, Acc x) { return (x > a || x != x) ? x : a; },
        same);
  case ReduceKind::Min:
    return runReduce<T, Acc>(
        p, in, out, minIdentity<C, Acc>(), [](Acc a, Acc x) { return (x < a || x != x) ? x : a; },
        same);
  case ReduceKind::LogSumExp:
    if constexpr (std::is_floating_point_v<Acc>) return reduceLogSumExp<T, Acc>(p, in, out);
    return;
  }
}

// Which axes input 1 reduces; nullopt when the op is the identity
// (noop_with_empty_axes with no or empty axes).
Expected<std::optional<std::vector<bool>>> reducedAxes(const KernelContext &ctx, int64_t rank) {
  std::vector<int64_t> axes;
  if (ctx.has(1)) {
    if (!isInt(ctx.in(1).dtype()))
      return ctx.error("axes must be an integer tensor, got ", dtypeName(ctx.in(1).dtype()));
    axes = toInt64s(ctx.in(1));
  }
  if (axes.empty()) {
    if (ctx.node().getInt("noop_with_empty_axes") != 0) return std::optional<std::vector<bool>>();
    return std::optional<std::vector<bool>>(std::vector<bool>(rank, true));
  }
  std::vector<bool> reduced(rank, false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t ax, resolveAxis(ctx, a, rank));
    if (reduced[ax]) return ctx.error("axis ", a, " appears more than once in axes");
    reduced[ax] = true;
  }
  return std::optional<std::vector<bool>>(std::move(reduced));
}

// Integer reductions: L2, LogSum and LogSumExp go through double; sum,
// product and sum of squares wrap in uint64 (exact modulo 2^64, so casting
// back to T gives the wrapped result without signed overflow); the rest use
// the signedness of T.
template <class T> void reduceInts(ReduceKind kind, const ReducePlan &p, const T *in, T *out) {
  bool viaDouble =
      kind == ReduceKind::L2 || kind == ReduceKind::LogSum || kind == ReduceKind::LogSumExp;
  bool wraps = kind == ReduceKind::Sum || kind == ReduceKind::Prod || kind == ReduceKind::SumSquare;
  if (viaDouble)
    reduceWith<T, double>(kind, p, in, out);
  else if (wraps || std::is_unsigned_v<T>)
    reduceWith<T, uint64_t>(kind, p, in, out);
  else
    reduceWith<T, int64_t>(kind, p, in, out);
}

Status reduceKernel(KernelContext &ctx, ReduceKind kind) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(auto reduced, reducedAxes(ctx, x.rank()));
  if (!reduced) {
    ctx.setOutput(0, x);
    return Status::success();
  }
  bool isMaxMin = kind == ReduceKind::Max || kind == ReduceKind::Min;
  if (x.dtype() == DType::Bool && !isMaxMin)
    return ctx.error("bool tensors can only be reduced by ReduceMax and ReduceMin");
  ReducePlan plan = planReduce(x.shape(), *reduced, ctx.node().getInt("keepdims") != 0);
  Tensor out(x.dtype(), plan.outShape);
  bool f64 = ctx.options().accumulateF64;
  return dispatchNumeric(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *in = x.data<T>();
    T *o = out.data<T>();
    if constexpr (std::is_floating_point_v<ComputeType<T>>) {
      if (f64 || std::is_same_v<T, double>)
        reduceWith<T, double>(kind, plan, in, o);
      else
        reduceWith<T, float>(kind, plan, in, o);
    } else {
      reduceInts<T>(kind, plan, in, o);
    }
    ctx.setOutput(0, std::move(out));
  });
}

template <ReduceKind K> Status reduceOp(KernelContext &ctx) {
  return reduceKernel(ctx, K);
}

// ---- ArgMax / ArgMin -------------------------------------------------------------

// True when x should replace the current best: strictly better, or equal
// with select_last_index. NaN counts as the extreme (numpy picks the first).
template <class C> bool beats(C x, C best, bool wantMax, bool last) {
  if constexpr (std::is_floating_point_v<C>) {
    bool xn = std::isnan(x), bn = std::isnan(best);
    if (xn || bn) return xn && (!bn || last);
  }
  if (x == best) return last;
  return wantMax ? x > best : x < best;
}

Status argKernel(KernelContext &ctx, bool wantMax) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), x.rank()));
  bool keepdims = ctx.node().getInt("keepdims") != 0;
  bool last = ctx.node().getInt("select_last_index") != 0;
  AxisSplit s = splitAt(x.shape(), axis);
  if (s.len == 0 && s.outer * s.inner > 0)
    return ctx.error("cannot take ", wantMax ? "argmax" : "argmin", " over axis ", axis,
                     " of size 0");
  Shape64 outShape = x.shape();
  if (keepdims)
    outShape[axis] = 1;
  else
    outShape.erase(outShape.begin() + axis);
  Tensor out(DType::I64, outShape);
  int64_t *o = out.data<int64_t>();
  KILN_RETURN_IF_ERROR(dispatchNumeric(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *in = x.data<T>();
    for (int64_t a = 0; a < s.outer; ++a)
      for (int64_t b = 0; b < s.inner; ++b) {
        const T *row = in + a * s.len * s.inner + b;
        int64_t best = 0;
        for (int64_t j = 1; j < s.len; ++j)
          if (beats(load(row[j * s.inner]), load(row[best * s.inner]), wantMax, last)) best = j;
        o[a * s.inner + b] = best;
      }
  }));
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

Status argMaxKernel(KernelContext &ctx) {
  return argKernel(ctx, true);
}
Status argMinKernel(KernelContext &ctx) {
  return argKernel(ctx, false);
}

// ---- CumSum ------------------------------------------------------------------------

template <class T, class Acc>
void cumSumLoop(const AxisSplit &s, const T *in, T *out, bool exclusive, bool reverse) {
  for (int64_t a = 0; a < s.outer; ++a)
    for (int64_t b = 0; b < s.inner; ++b) {
      int64_t base = a * s.len * s.inner + b;
      Acc acc = 0;
      for (int64_t step = 0; step < s.len; ++step) {
        int64_t j = reverse ? s.len - 1 - step : step;
        int64_t off = base + j * s.inner;
        Acc x = static_cast<Acc>(load(in[off]));
        if (!exclusive) acc += x;
        out[off] = storeAs<T>(acc);
        if (exclusive) acc += x;
      }
    }
}

Status cumSumKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (x.dtype() == DType::Bool) return ctx.error("CumSum does not accept bool tensors");
  KILN_ASSIGN_OR_RETURN(int64_t rawAxis, scalarIntInput(ctx, 1, "axis"));
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, rawAxis, x.rank()));
  bool exclusive = ctx.node().getInt("exclusive") != 0;
  bool reverse = ctx.node().getInt("reverse") != 0;
  AxisSplit s = splitAt(x.shape(), axis);
  Tensor out(x.dtype(), x.shape());
  bool f64 = ctx.options().accumulateF64;
  KILN_RETURN_IF_ERROR(dispatchNumeric(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *in = x.data<T>();
    T *o = out.data<T>();
    if constexpr (std::is_floating_point_v<ComputeType<T>>) {
      if (f64 || std::is_same_v<T, double>)
        cumSumLoop<T, double>(s, in, o, exclusive, reverse);
      else
        cumSumLoop<T, float>(s, in, o, exclusive, reverse);
    } else {
      cumSumLoop<T, uint64_t>(s, in, o, exclusive, reverse); // wraps like T, exactly
    }
  }));
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// ---- TopK ---------------------------------------------------------------------------

// Orders candidate indices of one row: by value (NaN above every number, so
// it is the largest and never among the smallest), ties by lower index.
template <class C> struct TopKOrder {
  const std::vector<C> &vals;
  bool largest;
  bool operator()(int64_t i, int64_t j) const {
    C a = vals[i], b = vals[j];
    bool an = a != a, bn = b != b;
    if (an != bn) return largest ? an : bn;
    if (!an && a != b) return largest ? a > b : a < b;
    return i < j;
  }
};

Status topKKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (x.rank() == 0) return ctx.error("input must have rank at least 1");
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), x.rank()));
  KILN_ASSIGN_OR_RETURN(int64_t k, scalarIntInput(ctx, 1, "k"));
  if (k < 0 || k > x.dim(axis))
    return ctx.error("k = ", k, " is out of range for axis ", axis, " of size ", x.dim(axis));
  bool largest = ctx.node().getInt("largest") != 0;
  // sorted=0 leaves the order unspecified; sorted order is one valid choice.
  AxisSplit s = splitAt(x.shape(), axis);
  Shape64 outShape = x.shape();
  outShape[axis] = k;
  Tensor values(x.dtype(), outShape), indices(DType::I64, outShape);
  int64_t *idxOut = indices.data<int64_t>();
  KILN_RETURN_IF_ERROR(dispatchNumeric(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *in = x.data<T>();
    T *valOut = values.data<T>();
    std::vector<ComputeType<T>> row(s.len);
    std::vector<int64_t> order(s.len);
    for (int64_t a = 0; a < s.outer; ++a)
      for (int64_t b = 0; b < s.inner; ++b) {
        int64_t inBase = a * s.len * s.inner + b, outBase = a * k * s.inner + b;
        for (int64_t j = 0; j < s.len; ++j) row[j] = load(in[inBase + j * s.inner]);
        std::iota(order.begin(), order.end(), int64_t(0));
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          TopKOrder<ComputeType<T>>{row, largest});
        for (int64_t j = 0; j < k; ++j) {
          valOut[outBase + j * s.inner] = in[inBase + order[j] * s.inner];
          idxOut[outBase + j * s.inner] = order[j];
        }
      }
  }));
  ctx.setOutput(0, std::move(values));
  ctx.setOutput(1, std::move(indices));
  return Status::success();
}

} // namespace

void registerReduceKernels(KernelTable &t) {
  t.add(OpKind::ReduceSum, reduceOp<ReduceKind::Sum>);
  t.add(OpKind::ReduceMean, reduceOp<ReduceKind::Mean>);
  t.add(OpKind::ReduceMax, reduceOp<ReduceKind::Max>);
  t.add(OpKind::ReduceMin, reduceOp<ReduceKind::Min>);
  t.add(OpKind::ReduceProd, reduceOp<ReduceKind::Prod>);
  t.add(OpKind::ReduceL1, reduceOp<ReduceKind::L1>);
  t.add(OpKind::ReduceL2, reduceOp<ReduceKind::L2>);
  t.add(OpKind::ReduceLogSum, reduceOp<ReduceKind::LogSum>);
  t.add(OpKind::ReduceLogSumExp, reduceOp<ReduceKind::LogSumExp>);
  t.add(OpKind::ReduceSumSquare, reduceOp<ReduceKind::SumSquare>);
  t.add(OpKind::ArgMax, argMaxKernel);
  t.add(OpKind::ArgMin, argMinKernel);
  t.add(OpKind::CumSum, cumSumKernel);
  t.add(OpKind::TopK, topKKernel);
}

} // namespace kiln
