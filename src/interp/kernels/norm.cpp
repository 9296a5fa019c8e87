// Interpreter kernels: BatchNormalization (inference and training mode),
// InstanceNormalization, LayerNormalization, GroupNormalization, LRN and
// MeanVarianceNormalization. Instance, group and layer normalization are the
// same computation over different blocks of contiguous elements (a channel
// plane, a group of channel planes, a trailing-axes row), so they share
// normalizeBlocks and differ only in how scale and bias index into a block.
// Statistics accumulate in the float type of the input (f32 for f16/bf16),
// or in f64 when InterpOptions::accumulateF64 is set.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

namespace kiln {

namespace {

// A 1-d parameter with `count` values (scale, bias, mean, var).
Expected<std::vector<double>> param(const KernelContext &ctx, int input, int64_t count,
                                    const char *what) {
  const Tensor &t = ctx.in(input);
  if (t.numel() != count)
    return ctx.error(what, " has shape ", shapeToString(t.shape()), ", expected ", count,
                     " values");
  return toDoubles(t);
}

Expected<int64_t> channelsOf(const KernelContext &ctx, const Tensor &x) {
  if (x.rank() < 2)
    return ctx.error("input X has shape ", shapeToString(x.shape()), ", expected [N, C, ...]");
  return x.dim(1);
}

// Normalizes each of `blocks` contiguous blocks of `size` elements of x to
// zero mean and unit variance, then y = affine(block, i, normalized value)
// for element i of the block. Writes each block's mean and 1/stddev to
// meanOut/invStdOut when given.
template <class T, class Acc, class Affine>
void normalizeBlocks(const T *x, T *y, int64_t blocks, int64_t size, double eps, Affine &&affine,
                     std::vector<Acc> *meanOut = nullptr, std::vector<Acc> *invStdOut = nullptr) {
  for (int64_t b = 0; b < blocks; ++b) {
    const T *xb = x + b * size;
    Acc sum = 0;
    for (int64_t i = 0; i < size; ++i) sum += static_cast<Acc>(xb[i]);
    Acc mean = sum / static_cast<Acc>(size);
    Acc sq = 0;
    for (int64_t i = 0; i < size; ++i) {
      Acc d = static_cast<Acc>(xb[i]) - mean;
      sq += d * d;
    }
    Acc invStd = Acc(1) / std::sqrt(sq / static_cast<Acc>(size) + static_cast<Acc>(eps));
    for (int64_t i = 0; i < size; ++i)
      y[b * size + i] = static_cast<T>(affine(b, i, (static_cast<Acc>(xb[i]) - mean) * invStd));
    if (meanOut) meanOut->push_back(mean);
    if (invStdOut) invStdOut->push_back(invStd);
  }
}

// Runs f(T{}, Acc{}) for x's float dtype and the accumulator it calls for.
template <class F> Status dispatchNorm(const KernelContext &ctx, DType d, F &&f) {
  bool f64 = ctx.options().accumulateF64;
  return dispatchFloat(ctx, d, [&](auto tag) {
    using T = decltype(tag);
    if (f64 || std::is_same_v<T, double>)
      f(tag, double{});
    else
      f(tag, float{});
  });
}

// ---- BatchNormalization -------------------------------------------------------

// Per-channel mean and (population) variance over every axis but 1.
template <class T, class Acc>
void channelStats(const Tensor &x, std::vector<double> &mean, std::vector<double> &var) {
  int64_t n = x.dim(0), c = x.dim(1), size = x.numel() / std::max<int64_t>(1, n * c);
  const T *src = x.data<T>();
  for (int64_t ch = 0; ch < c; ++ch) {
    Acc sum = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < size; ++i) sum += static_cast<Acc>(src[(b * c + ch) * size + i]);
    Acc m = sum / static_cast<Acc>(n * size);
    Acc sq = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < size; ++i) {
        Acc d = static_cast<Acc>(src[(b * c + ch) * size + i]) - m;
        sq += d * d;
      }
    mean[ch] = static_cast<double>(m);
    var[ch] = static_cast<double>(sq / static_cast<Acc>(n * size));
  }
}

// y = scale * (x - mean) / sqrt(var + eps) + bias per channel, in C.
template <class T, class C>
void batchNormApply(const Tensor &x, Tensor &y, const std::vector<double> &scale,
                    const std::vector<double> &bias, const std::vector<double> &mean,
                    const std::vector<double> &var, double eps) {
  int64_t n = x.dim(0), c = x.dim(1), size = x.numel() / std::max<int64_t>(1, n * c);
  const T *src = x.data<T>();
  T *dst = y.data<T>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      C s = static_cast<C>(scale[ch]), m = static_cast<C>(mean[ch]), bi = static_cast<C>(bias[ch]);
      C den = std::sqrt(static_cast<C>(var[ch]) + static_cast<C>(eps));
      int64_t base = (b * c + ch) * size;
      for (int64_t i = 0; i < size; ++i)
        dst[base + i] = static_cast<T>(s * (static_cast<C>(src[base + i]) - m) / den + bi);
    }
}

// Running statistics: input * momentum + batch value * (1 - momentum), in
// the dtype of the mean/var inputs.
Tensor runningStat(const Tensor &input, const std::vector<double> &batch, double momentum) {
  Tensor out(input.dtype(), input.shape());
  for (int64_t i = 0; i < input.numel(); ++i)
    out.setDouble(i, input.getDouble(i) * momentum + batch[i] * (1 - momentum));
  return out;
}

Status batchNormKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t c, channelsOf(ctx, x));
  KILN_ASSIGN_OR_RETURN(auto scale, param(ctx, 1, c, "scale"));
  KILN_ASSIGN_OR_RETURN(auto bias, param(ctx, 2, c, "bias"));
  KILN_ASSIGN_OR_RETURN(auto mean, param(ctx, 3, c, "input_mean"));
  KILN_ASSIGN_OR_RETURN(auto var, param(ctx, 4, c, "input_var"));
  double eps = ctx.node().getFloat("epsilon");
  bool training = ctx.node().getInt("training_mode") != 0;
  std::vector<double> batchMean(c), batchVar(c);
  Tensor y(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(dispatchNorm(ctx, x.dtype(), [&](auto tag, auto accTag) {
    using T = decltype(tag);
    if (training && x.numel() > 0) channelStats<T, decltype(accTag)>(x, batchMean, batchVar);
    batchNormApply<T, ComputeType<T>>(x, y, scale, bias, training ? batchMean : mean,
                                      training ? batchVar : var, eps);
  }));
  ctx.setOutput(0, std::move(y));
  if (training) {
    double momentum = ctx.node().getFloat("momentum");
    if (ctx.numOutputs() > 1) ctx.setOutput(1, runningStat(ctx.in(3), batchMean, momentum));
    if (ctx.numOutputs() > 2) ctx.setOutput(2, runningStat(ctx.in(4), batchVar, momentum));
  } else if (ctx.numOutputs() > 1) {
    // Outside training the statistics pass through unchanged.
    ctx.setOutput(1, ctx.in(3));
    if (ctx.numOutputs() > 2) ctx.setOutput(2, ctx.in(4));
  }
  return Status::success();
}

// ---- instance, group and layer normalization --------------------------------

Status instanceNormKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t c, channelsOf(ctx, x));
  KILN_ASSIGN_OR_RETURN(auto scale, param(ctx, 1, c, "scale"));
  KILN_ASSIGN_OR_RETURN(auto bias, param(ctx, 2, c, "bias"));
  int64_t blocks = x.dim(0) * c, size = blocks == 0 ? 0 : x.numel() / blocks;
  double eps = ctx.node().getFloat("epsilon");
  Tensor y(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(dispatchNorm(ctx, x.dtype(), [&](auto tag, auto accTag) {
    using T = decltype(tag);
    using Acc = decltype(accTag);
    normalizeBlocks<T, Acc>(x.data<T>(), y.data<T>(), blocks, size, eps,
                            [&](int64_t b, int64_t, Acc v) {
                              int64_t ch = b % c;
                              return v * static_cast<Acc>(scale[ch]) + static_cast<Acc>(bias[ch]);
                            });
  }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// Scale and bias hold one value per channel (opset 21) or, in the opset 18
// form, one per group.
Status groupNormKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t c, channelsOf(ctx, x));
  int64_t groups = ctx.node().getInt("num_groups");
  if (groups <= 0 || c % groups != 0)
    return ctx.error("num_groups ", groups, " does not divide the ", c, " channels");
  int64_t perGroup = c / groups;
  bool paramPerGroup = ctx.in(1).numel() == groups && groups != c;
  KILN_ASSIGN_OR_RETURN(auto scale, param(ctx, 1, paramPerGroup ? groups : c, "scale"));
  KILN_ASSIGN_OR_RETURN(auto bias, param(ctx, 2, paramPerGroup ? groups : c, "bias"));
  int64_t blocks = x.dim(0) * groups, size = blocks == 0 ? 0 : x.numel() / blocks;
  int64_t plane = perGroup == 0 ? 0 : size / perGroup; // spatial size of one channel
  double eps = ctx.node().getFloat("epsilon");
  Tensor y(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(dispatchNorm(ctx, x.dtype(), [&](auto tag, auto accTag) {
    using T = decltype(tag);
    using Acc = decltype(accTag);
    normalizeBlocks<T, Acc>(x.data<T>(), y.data<T>(), blocks, size, eps,
                            [&](int64_t b, int64_t i, Acc v) {
                              int64_t g = b % groups;
                              int64_t k = paramPerGroup ? g : g * perGroup + i / plane;
                              return v * static_cast<Acc>(scale[k]) + static_cast<Acc>(bias[k]);
                            });
  }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// Scale (and bias) values for each element of the normalized trailing shape,
// broadcast from the input's shape.
Expected<std::vector<double>> broadcastParam(const KernelContext &ctx, int input,
                                             const Shape64 &shape, const char *what) {
  const Tensor &t = ctx.in(input);
  auto full = broadcastShapes64(t.shape(), shape);
  if (!full.ok() || *full != shape)
    return ctx.error(what, " has shape ", shapeToString(t.shape()),
                     " which does not broadcast to the normalized shape ", shapeToString(shape));
  std::vector<double> values = toDoubles(t), out;
  for (int64_t off : broadcastOffsets(t.shape(), shape)) out.push_back(values[off]);
  return out;
}

Status layerNormKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), x.rank()));
  Shape64 outer(x.shape().begin(), x.shape().begin() + axis);
  Shape64 inner(x.shape().begin() + axis, x.shape().end());
  int64_t rows = numelOf(outer), cols = numelOf(inner);
  KILN_ASSIGN_OR_RETURN(auto scale, broadcastParam(ctx, 1, inner, "scale"));
  std::vector<double> bias(cols, 0.0);
  if (ctx.has(2)) {
    KILN_ASSIGN_OR_RETURN(bias, broadcastParam(ctx, 2, inner, "bias"));
  }
  double eps = ctx.node().getFloat("epsilon");
  Tensor y(x.dtype(), x.shape());
  std::vector<double> means, invStds;
  KILN_RETURN_IF_ERROR(dispatchNorm(ctx, x.dtype(), [&](auto tag, auto accTag) {
    using T = decltype(tag);
    using Acc = decltype(accTag);
    std::vector<Acc> m, s;
    normalizeBlocks<T, Acc>(
        x.data<T>(), y.data<T>(), rows, cols, eps,
        [&](int64_t, int64_t i, Acc v) {
          return v * static_cast<Acc>(scale[i]) + static_cast<Acc>(bias[i]);
        },
        &m, &s);
    means.assign(m.begin(), m.end());
    invStds.assign(s.begin(), s.end());
  }));
  ctx.setOutput(0, std::move(y));
  // Mean and InvStdDev keep the reduced axes as 1s, in the stash type.
  Shape64 statShape = outer;
  statShape.resize(x.rank(), 1);
  DType stash =
      dtypeFromOnnx(static_cast<int>(ctx.node().getInt("stash_type"))).value_or(DType::F32);
  if (!isFloat(stash)) stash = DType::F32;
  if (ctx.numOutputs() > 1)
    ctx.setOutput(1, convertTensor(Tensor::fromVector(means, statShape), stash));
  if (ctx.numOutputs() > 2)
    ctx.setOutput(2, convertTensor(Tensor::fromVector(invStds, statShape), stash));
  return Status::success();
}

// ---- LRN and MeanVarianceNormalization ----------------------------------------

// y = x / (bias + alpha / size * sum of x^2 over the nearby channels)^beta.
Status lrnKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t c, channelsOf(ctx, x));
  int64_t size = ctx.node().getInt("size");
  if (size <= 0) return ctx.error("size must be positive, got ", size);
  double alpha = ctx.node().getFloat("alpha"), beta = ctx.node().getFloat("beta");
  double bias = ctx.node().getFloat("bias");
  int64_t n = x.dim(0), plane = n * c == 0 ? 0 : x.numel() / (n * c);
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  Tensor y(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(dispatchNorm(ctx, x.dtype(), [&](auto tag, auto accTag) {
    using T = decltype(tag);
    using Acc = decltype(accTag);
    const T *src = x.data<T>();
    T *dst = y.data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t i = 0; i < plane; ++i) {
          Acc sq = 0;
          for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after);
               ++k) {
            Acc v = static_cast<Acc>(src[(b * c + k) * plane + i]);
            sq += v * v;
          }
          int64_t at = (b * c + ch) * plane + i;
          Acc den = std::pow(static_cast<Acc>(bias) + static_cast<Acc>(alpha / size) * sq,
                             static_cast<Acc>(beta));
          dst[at] = static_cast<T>(static_cast<Acc>(src[at]) / den);
        }
  }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// y = (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9), statistics over `axes`.
Status mvnKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  std::vector<int64_t> axes =
      ctx.node().hasAttr("axes") ? ctx.node().getInts("axes") : std::vector<int64_t>{0, 2, 3};
  Shape64 statShape = x.shape();
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, a, x.rank()));
    statShape[axis] = 1;
  }
  std::vector<int64_t> slot = broadcastOffsets(statShape, x.shape());
  int64_t slots = numelOf(statShape), count = slots == 0 ? 0 : x.numel() / slots;
  Tensor y(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(dispatchNorm(ctx, x.dtype(), [&](auto tag, auto accTag) {
    using T = decltype(tag);
    using Acc = decltype(accTag);
    const T *src = x.data<T>();
    std::vector<Acc> sum(slots, 0), sumSq(slots, 0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      Acc v = static_cast<Acc>(src[i]);
      sum[slot[i]] += v;
      sumSq[slot[i]] += v * v;
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      Acc mean = sum[slot[i]] / static_cast<Acc>(count);
      Acc var = sumSq[slot[i]] / static_cast<Acc>(count) - mean * mean;
      Acc std = std::sqrt(std::max(var, Acc(0)));
      y.data<T>()[i] = static_cast<T>((static_cast<Acc>(src[i]) - mean) / (std + Acc(1e-9)));
    }
  }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

} // namespace

void registerNormKernels(KernelTable &t) {
  t.add(OpKind::BatchNormalization, batchNormKernel);
  t.add(OpKind::InstanceNormalization, instanceNormKernel);
  t.add(OpKind::LayerNormalization, layerNormKernel);
  t.add(OpKind::GroupNormalization, groupNormKernel);
  t.add(OpKind::LRN, lrnKernel);
  t.add(OpKind::MeanVarianceNormalization, mvnKernel);
}

} // namespace kiln
