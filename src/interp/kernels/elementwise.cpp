// Interpreter kernels for the elementwise ops that are neither plain unary
// (unary.cpp) nor plain binary (binary.cpp): variadic Max/Min/Sum/Mean over
// any number of broadcasting inputs, Where, Clip, Identity and Dropout (which
// is the identity at inference).
#include "interp/kernels/common.h"
#include "interp/kernels/elementwise_helpers.h"
#include "interp/kernels/families.h"

#include <cmath>

namespace kiln {

namespace {

using namespace ew;

// ---- Max, Min, Sum, Mean ------------------------------------------------------

enum class Variadic { Max, Min, Sum, Mean };

// Folds one more value into the running result. Max and Min propagate NaN
// (as numpy's maximum/minimum do): once NaN, always NaN.
template <class Acc> Acc combine(Variadic kind, Acc acc, Acc v) {
  switch (kind) {
  case Variadic::Max:
    if constexpr (kIsFloatType<Acc>)
      if (std::isnan(v)) return v;
    return v > acc ? v : acc;
  case Variadic::Min:
    if constexpr (kIsFloatType<Acc>)
      if (std::isnan(v)) return v;
    return v < acc ? v : acc;
  case Variadic::Sum:
  case Variadic::Mean:
    return wrapAdd(acc, v);
  }
  return acc;
}

// Computes the op in accumulator type Acc over inputs of storage type T.
template <class T, class Acc>
Tensor foldInputs(Variadic kind, const std::vector<const Tensor *> &ins, const Broadcast &bc) {
  Tensor out(ins[0]->dtype(), bc.shape);
  T *dst = out.data<T>();
  for (int64_t i = 0; i < bc.numel; ++i) {
    Acc acc = static_cast<Acc>(static_cast<ComputeType<T>>(ins[0]->data<T>()[bc.at(0, i)]));
    for (size_t k = 1; k < ins.size(); ++k) {
      Acc v = static_cast<Acc>(static_cast<ComputeType<T>>(ins[k]->data<T>()[bc.at(k, i)]));
      acc = combine(kind, acc, v);
    }
    if (kind == Variadic::Mean) acc = static_cast<Acc>(acc / static_cast<Acc>(ins.size()));
    dst[i] = static_cast<T>(static_cast<ComputeType<T>>(acc));
  }
  return out;
}

Status variadicKernel(KernelContext &ctx, Variadic kind) {
  int n = ctx.numInputs();
  if (n == 0) return ctx.error("needs at least one input");
  std::vector<const Tensor *> ins;
  for (int i = 0; i < n; ++i) {
    KILN_RETURN_IF_ERROR(requireTensor(ctx, i));
    ins.push_back(&ctx.in(i));
  }
  KILN_RETURN_IF_ERROR(requireSameDType(ctx, 0, n - 1));
  KILN_ASSIGN_OR_RETURN(Broadcast bc, broadcastAll(ctx, ins));
  // Sum and Mean accumulate; with accumulateF64 float sums run in double.
  bool wide = ctx.options().accumulateF64 && (kind == Variadic::Sum || kind == Variadic::Mean);
  Tensor out;
  KILN_RETURN_IF_ERROR(dispatchArith(ctx, ins[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatType<T>) {
      if (wide) {
        out = foldInputs<T, double>(kind, ins, bc);
        return;
      }
    }
    out = foldInputs<T, ComputeType<T>>(kind, ins, bc);
  }));
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// ---- Where --------------------------------------------------------------------

Status whereKernel(KernelContext &ctx) {
  for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(requireTensor(ctx, i));
  const Tensor &cond = ctx.in(0), &x = ctx.in(1), &y = ctx.in(2);
  if (cond.dtype() != DType::Bool)
    return ctx.error("condition must be bool, got ", dtypeName(cond.dtype()));
  KILN_RETURN_IF_ERROR(requireSameDType(ctx, 1, 2));
  KILN_ASSIGN_OR_RETURN(Broadcast bc, broadcastAll(ctx, {&cond, &x, &y}));
  Tensor out(x.dtype(), bc.shape);
  dispatchAny(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool *pc = cond.data<bool>();
    const T *px = x.data<T>();
    const T *py = y.data<T>();
    T *po = out.data<T>();
    for (int64_t i = 0; i < bc.numel; ++i)
      po[i] = pc[bc.at(0, i)] ? px[bc.at(1, i)] : py[bc.at(2, i)];
  });
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// ---- Clip ---------------------------------------------------------------------

// Bound input i (1: min, 2: max) when present: a one-element tensor of the
// input's dtype.
Status checkBound(const KernelContext &ctx, int i) {
  if (!ctx.has(i)) return Status::success();
  KILN_RETURN_IF_ERROR(requireTensor(ctx, i));
  KILN_RETURN_IF_ERROR(requireSameDType(ctx, 0, i));
  if (ctx.in(i).numel() != 1)
    return ctx.error(i == 1 ? "min" : "max", " must have one element, got shape ",
                     shapeToString(ctx.in(i).shape()));
  return Status::success();
}

// y = min(max(x, lo), hi): when min > max every element becomes max, as the
// spec says; NaN inputs stay NaN (both comparisons are false).
Status clipKernel(KernelContext &ctx) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  KILN_RETURN_IF_ERROR(checkBound(ctx, 1));
  KILN_RETURN_IF_ERROR(checkBound(ctx, 2));
  const Tensor &x = ctx.in(0);
  Tensor out(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(dispatchArith(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    bool hasLo = ctx.has(1), hasHi = ctx.has(2);
    C lo = hasLo ? static_cast<C>(ctx.in(1).data<T>()[0]) : C{};
    C hi = hasHi ? static_cast<C>(ctx.in(2).data<T>()[0]) : C{};
    const T *src = x.data<T>();
    T *dst = out.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      C v = static_cast<C>(src[i]);
      if (hasLo && v < lo) v = lo;
      if (hasHi && v > hi) v = hi;
      dst[i] = static_cast<T>(v);
    }
  }));
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// ---- Identity, Dropout --------------------------------------------------------

// Passes the value through whatever its kind (tensor, sequence, optional).
Status identityKernel(KernelContext &ctx) {
  if (!ctx.has(0)) return ctx.error("input 0 is missing");
  ctx.setOutput(0, ctx.value(0));
  return Status::success();
}

// Inference dropout: output = input, mask all true. Training mode with a
// non-zero ratio drops random elements, which a reference cannot reproduce.
Status dropoutKernel(KernelContext &ctx) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  bool training = false;
  if (ctx.has(2)) {
    KILN_RETURN_IF_ERROR(requireTensor(ctx, 2));
    if (ctx.in(2).numel() != 1) return ctx.error("training_mode must have one element");
    training = ctx.in(2).getDouble(0) != 0;
  }
  double ratio = 0.5;
  if (ctx.has(1)) {
    KILN_RETURN_IF_ERROR(requireTensor(ctx, 1));
    if (ctx.in(1).numel() != 1 || !isFloat(ctx.in(1).dtype()))
      return ctx.error("ratio must be a one-element float tensor");
    ratio = ctx.in(1).getDouble(0);
  }
  if (training && ratio != 0) return ctx.error("training-mode dropout is not supported");
  const Tensor &x = ctx.in(0);
  ctx.setOutput(0, x);
  if (ctx.numOutputs() > 1) {
    Tensor mask(DType::Bool, x.shape());
    for (int64_t i = 0; i < mask.numel(); ++i) mask.data<bool>()[i] = true;
    ctx.setOutput(1, std::move(mask));
  }
  return Status::success();
}

} // namespace

void registerElementwiseKernels(KernelTable &t) {
  t.add(OpKind::Max, [](KernelContext &c) { return variadicKernel(c, Variadic::Max); });
  t.add(OpKind::Min, [](KernelContext &c) { return variadicKernel(c, Variadic::Min); });
  t.add(OpKind::Sum, [](KernelContext &c) { return variadicKernel(c, Variadic::Sum); });
  t.add(OpKind::Mean, [](KernelContext &c) { return variadicKernel(c, Variadic::Mean); });
  t.add(OpKind::Where, whereKernel);
  t.add(OpKind::Clip, clipKernel);
  t.add(OpKind::Identity, identityKernel);
  t.add(OpKind::Dropout, dropoutKernel);
}

} // namespace kiln
