// Interpreter kernels: Softmax, LogSoftmax, Hardmax and the loss ops built on
// them (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss). All work along
// one axis of a tensor viewed as [outer, len, inner]. Softmax subtracts the
// maximum before exponentiating, so large inputs do not overflow. Math runs in
// float for f32/f16/bf16 and in double for f64 or with
// InterpOptions::accumulateF64.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <cmath>
#include <limits>

namespace kiln {

namespace {

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

template <class T, class V> T storeAs(V v) {
  if constexpr (kIsHalfLike<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

template <class Acc, class T> Acc load(const T &v) {
  return static_cast<Acc>(static_cast<ComputeType<T>>(v));
}

// Calls f(T{}, Acc{}) for a float dtype with the accumulator type the options
// ask for.
template <class F> Status dispatchFloatAcc(const KernelContext &ctx, DType d, F &&f) {
  bool f64 = ctx.options().accumulateF64;
  return dispatchFloat(ctx, d, [&](auto tag) {
    using T = decltype(tag);
    if (f64 || std::is_same_v<T, double>)
      f(tag, double{});
    else
      f(tag, float{});
  });
}

// ---- Softmax, LogSoftmax ------------------------------------------------------

// One softmax per (outer, inner) line: max, sum of shifted exponentials, then
// either e^(x-m)/sum or x-m-log(sum).
template <class T, class Acc>
void softmaxLines(const AxisSplit &s, const T *in, T *out, bool logOutput) {
  for (int64_t a = 0; a < s.outer; ++a)
    for (int64_t b = 0; b < s.inner; ++b) {
      int64_t base = a * s.len * s.inner + b;
      Acc m = -std::numeric_limits<Acc>::infinity();
      for (int64_t j = 0; j < s.len; ++j) m = std::max(m, load<Acc>(in[base + j * s.inner]));
      Acc sum = 0;
      for (int64_t j = 0; j < s.len; ++j) sum += std::exp(load<Acc>(in[base + j * s.inner]) - m);
      Acc logSum = std::log(sum);
      for (int64_t j = 0; j < s.len; ++j) {
        int64_t off = base + j * s.inner;
        Acc shifted = load<Acc>(in[off]) - m;
        out[off] = storeAs<T>(logOutput ? shifted - logSum : std::exp(shifted) / sum);
      }
    }
}

Status softmaxKernel(KernelContext &ctx, bool logOutput) {
  const Tensor &x = ctx.in(0);
  if (x.rank() == 0) return ctx.error("input must have rank at least 1");
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), x.rank()));
  AxisSplit s = splitAt(x.shape(), axis);
  Tensor out(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(dispatchFloatAcc(ctx, x.dtype(), [&](auto tag, auto acc) {
    using T = decltype(tag);
    softmaxLines<T, decltype(acc)>(s, x.data<T>(), out.data<T>(), logOutput);
  }));
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

Status softmaxOp(KernelContext &ctx) {
  return softmaxKernel(ctx, false);
}
Status logSoftmaxOp(KernelContext &ctx) {
  return softmaxKernel(ctx, true);
}

// ---- Hardmax ------------------------------------------------------------------------

// 1 at the first maximum of each line (a NaN counts as the maximum, as in
// numpy's argmax), 0 elsewhere.
Status hardmaxKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (x.rank() == 0) return ctx.error("input must have rank at least 1");
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), x.rank()));
  AxisSplit s = splitAt(x.shape(), axis);
  Tensor out(x.dtype(), x.shape()); // zero-initialized
  KILN_RETURN_IF_ERROR(dispatchFloat(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    const T *in = x.data<T>();
    T *o = out.data<T>();
    for (int64_t a = 0; a < s.outer; ++a)
      for (int64_t b = 0; b < s.inner; ++b) {
        if (s.len == 0) continue;
        int64_t base = a * s.len * s.inner + b;
        int64_t best = 0;
        C bestVal = load<C>(in[base]);
        for (int64_t j = 1; j < s.len && !std::isnan(bestVal); ++j) {
          C v = load<C>(in[base + j * s.inner]);
          if (v > bestVal || std::isnan(v)) {
            best = j;
            bestVal = v;
          }
        }
        o[base + best * s.inner] = storeAs<T>(1.0f);
      }
  }));
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss -----------------------

enum class Reduction { None, Sum, Mean };

// What both loss ops share: input [N, C, d1..dk] seen as [N, C, D], target
// [N, d1..dk] of class indices, optional per-class weights [C].
struct LossSetup {
  int64_t n = 0, c = 0, d = 1;
  Reduction reduction = Reduction::Mean;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  std::vector<int64_t> target;
  std::vector<double> weights; // empty when the weight input is absent
};

Expected<LossSetup> readLossInputs(const KernelContext &ctx) {
  const Tensor &x = ctx.in(0), &target = ctx.in(1);
  LossSetup s;
  if (x.rank() < 2) return ctx.error("input 0 must have rank at least 2, got ", x.rank());
  Shape64 expected = x.shape();
  expected.erase(expected.begin() + 1);
  if (!isInt(target.dtype()))
    return ctx.error("target must be an integer tensor, got ", dtypeName(target.dtype()));
  if (target.shape() != expected)
    return ctx.error("target has shape ", shapeToString(target.shape()), ", expected ",
                     shapeToString(expected), " for input of shape ", shapeToString(x.shape()));
  s.n = x.dim(0);
  s.c = x.dim(1);
  for (int64_t i = 2; i < x.rank(); ++i) s.d *= x.dim(i);
  std::string reduction = ctx.node().getString("reduction");
  if (reduction == "none")
    s.reduction = Reduction::None;
  else if (reduction == "sum")
    s.reduction = Reduction::Sum;
  else if (reduction == "mean")
    s.reduction = Reduction::Mean;
  else
    return ctx.error("unknown reduction '", reduction, "' (expected none, sum or mean)");
  s.hasIgnore = ctx.node().hasAttr("ignore_index");
  if (s.hasIgnore) s.ignoreIndex = ctx.node().getInt("ignore_index");
  s.target = toInt64s(target);
  if (ctx.has(2)) {
    const Tensor &w = ctx.in(2);
    if (w.shape() != Shape64{s.c})
      return ctx.error("weight has shape ", shapeToString(w.shape()), ", expected [", s.c, "]");
    s.weights = toDoubles(w);
  }
  return s;
}

// The loss from log-probabilities `logp` laid out [N, C, D]: per element
// -logp[target] * weight[target] (0 where the target is ignore_index), then
// summed, or divided by the summed weights for mean (which is the plain
// mean when there are no weights and nothing is ignored).
template <class Acc>
Expected<Tensor> nllFromLogProbs(const KernelContext &ctx, const LossSetup &s,
                                 const std::vector<Acc> &logp, DType dtype,
                                 const Shape64 &targetShape) {
  std::vector<Acc> loss(s.n * s.d, Acc(0));
  Acc weightSum = 0;
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t j = 0; j < s.d; ++j) {
      int64_t t = s.target[i * s.d + j];
      if (s.hasIgnore && t == s.ignoreIndex) continue;
      if (t < 0 || t >= s.c)
        return ctx.error("target value ", t, " at position ", i * s.d + j, " is out of range for ",
                         s.c, " classes");
      Acc w = s.weights.empty() ? Acc(1) : static_cast<Acc>(s.weights[t]);
      loss[i * s.d + j] = -logp[(i * s.c + t) * s.d + j] * w;
      weightSum += w;
    }
  if (s.reduction == Reduction::None) {
    Tensor out(dtype, targetShape);
    for (size_t k = 0; k < loss.size(); ++k) out.setDouble(k, static_cast<double>(loss[k]));
    return out;
  }
  Acc total = 0;
  for (Acc v : loss) total += v;
  if (s.reduction == Reduction::Mean) total /= weightSum; // NaN when all weights are 0, as numpy
  Tensor out(dtype, {});
  out.setDouble(0, static_cast<double>(total));
  return out;
}

Status nllLossKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(LossSetup s, readLossInputs(ctx));
  Status status;
  KILN_RETURN_IF_ERROR(dispatchFloatAcc(ctx, x.dtype(), [&](auto tag, auto acc) {
    using T = decltype(tag);
    using Acc = decltype(acc);
    std::vector<Acc> logp(x.numel());
    for (int64_t k = 0; k < x.numel(); ++k) logp[k] = load<Acc>(x.data<T>()[k]);
    auto loss = nllFromLogProbs<Acc>(ctx, s, logp, x.dtype(), ctx.in(1).shape());
    if (!loss.ok())
      status = loss.error();
    else
      ctx.setOutput(0, std::move(*loss));
  }));
  return status;
}

// Log-softmax over the class axis of [N, C, D].
template <class T, class Acc> std::vector<Acc> logSoftmaxClasses(const LossSetup &s, const T *x) {
  std::vector<Acc> logp(s.n * s.c * s.d);
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t j = 0; j < s.d; ++j) {
      const T *line = x + i * s.c * s.d + j;
      Acc m = -std::numeric_limits<Acc>::infinity();
      for (int64_t c = 0; c < s.c; ++c) m = std::max(m, load<Acc>(line[c * s.d]));
      Acc sum = 0;
      for (int64_t c = 0; c < s.c; ++c) sum += std::exp(load<Acc>(line[c * s.d]) - m);
      Acc logSum = std::log(sum);
      for (int64_t c = 0; c < s.c; ++c)
        logp[(i * s.c + c) * s.d + j] = load<Acc>(line[c * s.d]) - m - logSum;
    }
  return logp;
}

Status sceLossKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(LossSetup s, readLossInputs(ctx));
  Status status;
  KILN_RETURN_IF_ERROR(dispatchFloatAcc(ctx, x.dtype(), [&](auto tag, auto acc) {
    using T = decltype(tag);
    using Acc = decltype(acc);
    std::vector<Acc> logp = logSoftmaxClasses<T, Acc>(s, x.data<T>());
    auto loss = nllFromLogProbs<Acc>(ctx, s, logp, x.dtype(), ctx.in(1).shape());
    if (!loss.ok()) {
      status = loss.error();
      return;
    }
    ctx.setOutput(0, std::move(*loss));
    if (ctx.numOutputs() > 1) {
      Tensor logProb(x.dtype(), x.shape());
      for (size_t k = 0; k < logp.size(); ++k) logProb.data<T>()[k] = storeAs<T>(logp[k]);
      ctx.setOutput(1, std::move(logProb));
    }
  }));
  return status;
}

} // namespace

void registerSoftmaxKernels(KernelTable &t) {
  t.add(OpKind::Softmax, softmaxOp);
  t.add(OpKind::LogSoftmax, logSoftmaxOp);
  t.add(OpKind::Hardmax, hardmaxKernel);
  t.add(OpKind::NegativeLogLikelihoodLoss, nllLossKernel);
  t.add(OpKind::SoftmaxCrossEntropyLoss, sceLossKernel);
}

} // namespace kiln
