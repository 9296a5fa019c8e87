// Interpreter kernels: AveragePool, MaxPool (with its optional argmax
// Indices), LpPool, the Global*Pool ops and MaxUnpool. The windowed pools
// first list, once per node, the input offsets each output position reads
// (padding and dilation resolved, so the per-channel loops are a plain
// gather), then reduce those taps for every (batch, channel) plane.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"
#include "interp/kernels/window.h"

#include <limits>

namespace kiln {

namespace {

// The taps of every output position of a window, in CSR form: output position
// o reads the in-plane offsets taps[start[o] .. start[o + 1]).
struct PoolPlan {
  int64_t batch = 0, channels = 0;
  Window win;
  int64_t inPlane = 0, outPlane = 0;
  std::vector<int64_t> start, taps;
  // Taps of each output position inside the input or its padding (the
  // divisor of AveragePool with count_include_pad).
  std::vector<int64_t> paddedCount;
};

void listTaps(PoolPlan &p) {
  const Window &w = p.win;
  size_t rank = w.rank();
  p.inPlane = numelOf(w.in);
  p.outPlane = numelOf(w.out);
  p.start.reserve(p.outPlane + 1);
  p.paddedCount.reserve(p.outPlane);
  std::vector<int64_t> o(rank, 0);
  for (int64_t out = 0; out < p.outPlane; ++out, nextIndex(o, w.out)) {
    p.start.push_back(static_cast<int64_t>(p.taps.size()));
    std::vector<int64_t> k(rank, 0);
    int64_t padded = 0;
    do {
      int64_t offset = 0;
      bool inInput = true, inPadded = true;
      for (size_t d = 0; d < rank; ++d) {
        int64_t pos = o[d] * w.strides[d] + k[d] * w.dilations[d] - w.padBegin[d];
        inInput = inInput && pos >= 0 && pos < w.in[d];
        inPadded = inPadded && pos >= -w.padBegin[d] && pos < w.in[d] + w.padEnd[d];
        offset = offset * w.in[d] + pos;
      }
      if (inInput) p.taps.push_back(offset);
      if (inPadded) ++padded;
    } while (nextIndex(k, w.kernel));
    p.paddedCount.push_back(padded);
  }
  p.start.push_back(static_cast<int64_t>(p.taps.size()));
}

// Reads kernel_shape, builds the window over x's spatial dims and lists taps.
Expected<PoolPlan> makePoolPlan(const KernelContext &ctx, const Tensor &x) {
  KILN_ASSIGN_OR_RETURN(Shape64 in, spatialDims(ctx, x, "input X"));
  Shape64 kernel = ctx.node().getInts("kernel_shape");
  if (kernel.size() != in.size())
    return ctx.error("kernel_shape has ", kernel.size(), " values, input X has ", in.size(),
                     " spatial dims");
  PoolPlan p;
  p.batch = x.dim(0);
  p.channels = x.dim(1);
  bool ceilMode = ctx.node().getInt("ceil_mode") != 0;
  KILN_ASSIGN_OR_RETURN(p.win, makeWindow(ctx, in, kernel, ceilMode));
  listTaps(p);
  return p;
}

Shape64 poolOutShape(const PoolPlan &p) {
  Shape64 s = {p.batch, p.channels};
  s.insert(s.end(), p.win.out.begin(), p.win.out.end());
  return s;
}

// y[plane, o] = reduce(plane, x plane, o) for every (batch, channel) plane and
// output position o.
template <class T, class F> void forEachWindow(const PoolPlan &p, const T *x, T *y, F &&reduce) {
  for (int64_t plane = 0; plane < p.batch * p.channels; ++plane) {
    const T *src = x + plane * p.inPlane;
    T *dst = y + plane * p.outPlane;
    for (int64_t o = 0; o < p.outPlane; ++o) dst[o] = reduce(plane, src, o);
  }
}

template <class T> Tensor averagePool(const PoolPlan &p, const Tensor &x, bool f64, bool countPad) {
  Tensor y(x.dtype(), poolOutShape(p));
  auto run = [&](auto accTag) {
    using Acc = decltype(accTag);
    forEachWindow(p, x.data<T>(), y.data<T>(), [&](int64_t, const T *src, int64_t o) {
      Acc sum = 0;
      for (int64_t t = p.start[o]; t < p.start[o + 1]; ++t) sum += static_cast<Acc>(src[p.taps[t]]);
      int64_t count = countPad ? p.paddedCount[o] : p.start[o + 1] - p.start[o];
      return static_cast<T>(count > 0 ? sum / static_cast<Acc>(count) : Acc(0));
    });
  };
  if (f64)
    run(double{});
  else
    run(ComputeType<T>{});
  return y;
}

Status averagePoolKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(PoolPlan p, makePoolPlan(ctx, x));
  bool countPad = ctx.node().getInt("count_include_pad") != 0;
  Tensor y;
  KILN_RETURN_IF_ERROR(dispatchFloat(ctx, x.dtype(), [&](auto tag) {
    y = averagePool<decltype(tag)>(p, x, ctx.options().accumulateF64, countPad);
  }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

template <class T> Tensor lpPool(const PoolPlan &p, const Tensor &x, double pNorm) {
  Tensor y(x.dtype(), poolOutShape(p));
  forEachWindow(p, x.data<T>(), y.data<T>(), [&](int64_t, const T *src, int64_t o) {
    double sum = 0;
    for (int64_t t = p.start[o]; t < p.start[o + 1]; ++t)
      sum += std::pow(std::fabs(static_cast<double>(src[p.taps[t]])), pNorm);
    return static_cast<T>(static_cast<ComputeType<T>>(std::pow(sum, 1.0 / pNorm)));
  });
  return y;
}

Status lpPoolKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(PoolPlan p, makePoolPlan(ctx, x));
  double pNorm = static_cast<double>(ctx.node().getInt("p"));
  if (pNorm <= 0) return ctx.error("p must be positive, got ", pNorm);
  Tensor y;
  KILN_RETURN_IF_ERROR(
      dispatchFloat(ctx, x.dtype(), [&](auto tag) { y = lpPool<decltype(tag)>(p, x, pNorm); }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// Flat index of in-plane offset `offset` in the whole input, in row-major
// order (storage_order 0) or with the spatial axes in column-major order (1).
int64_t argmaxIndex(const PoolPlan &p, int64_t plane, int64_t offset, bool columnMajor) {
  if (!columnMajor) return plane * p.inPlane + offset;
  int64_t index = 0, stride = 1;
  const Shape64 &in = p.win.in;
  // Peel row-major coordinates off from the last axis; the first spatial
  // axis varies fastest in column-major order.
  std::vector<int64_t> coord(in.size());
  for (size_t d = in.size(); d-- > 0;) {
    coord[d] = offset % in[d];
    offset /= in[d];
  }
  for (size_t d = 0; d < in.size(); ++d) {
    index += coord[d] * stride;
    stride *= in[d];
  }
  return plane * p.inPlane + index;
}

template <class T>
void maxPool(const PoolPlan &p, const Tensor &x, Tensor &y, Tensor *indices, bool columnMajor) {
  using C = ComputeType<T>;
  int64_t *idx = indices ? indices->data<int64_t>() : nullptr;
  forEachWindow(p, x.data<T>(), y.data<T>(), [&](int64_t plane, const T *src, int64_t o) {
    C best = std::numeric_limits<C>::lowest();
    int64_t bestOffset = -1;
    for (int64_t t = p.start[o]; t < p.start[o + 1]; ++t) {
      C v = static_cast<C>(src[p.taps[t]]);
      // NaN wins so that it propagates, like numpy's max.
      if (bestOffset < 0 || v > best || (v != v && best == best)) {
        best = v;
        bestOffset = p.taps[t];
      }
    }
    if (idx)
      idx[plane * p.outPlane + o] =
          bestOffset < 0 ? -1 : argmaxIndex(p, plane, bestOffset, columnMajor);
    return static_cast<T>(best);
  });
}

Status maxPoolKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (x.dtype() == DType::Bool) return ctx.error("bool tensors are not supported by this op");
  KILN_ASSIGN_OR_RETURN(PoolPlan p, makePoolPlan(ctx, x));
  bool columnMajor = ctx.node().getInt("storage_order") != 0;
  Tensor y(x.dtype(), poolOutShape(p));
  bool wantIndices = ctx.numOutputs() > 1 && ctx.node().output(1) != nullptr;
  Tensor indices = wantIndices ? Tensor(DType::I64, poolOutShape(p)) : Tensor();
  KILN_RETURN_IF_ERROR(dispatchNumeric(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      maxPool<T>(p, x, y, wantIndices ? &indices : nullptr, columnMajor);
  }));
  ctx.setOutput(0, std::move(y));
  if (wantIndices) ctx.setOutput(1, std::move(indices));
  return Status::success();
}

// ---- global pools -----------------------------------------------------------

enum class GlobalKind { Average, Max, Lp };

Status globalPool(KernelContext &ctx, GlobalKind kind) {
  const Tensor &x = ctx.in(0);
  if (x.rank() < 2) return ctx.error("input X must have rank 2 or more, got ", x.rank());
  Shape64 outShape = x.shape();
  for (size_t d = 2; d < outShape.size(); ++d) outShape[d] = 1;
  int64_t planes = x.dim(0) * x.dim(1);
  int64_t size = planes == 0 ? 0 : x.numel() / planes;
  // An empty batch (no planes) gives an empty output; planes of no
  // elements have no mean or max.
  if (planes > 0 && size == 0 && kind != GlobalKind::Lp)
    return ctx.error("input X has empty spatial dims ", shapeToString(x.shape()));
  double pNorm = kind == GlobalKind::Lp ? static_cast<double>(ctx.node().getInt("p")) : 0;
  if (kind == GlobalKind::Lp && pNorm <= 0) return ctx.error("p must be positive, got ", pNorm);
  Tensor y(x.dtype(), outShape);
  bool f64 = ctx.options().accumulateF64;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    const T *src = x.data<T>();
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T *s = src + plane * size;
      if (kind == GlobalKind::Max) {
        C best = static_cast<C>(s[0]);
        for (int64_t i = 1; i < size; ++i) {
          C v = static_cast<C>(s[i]);
          if (v > best || v != v) best = v; // NaN propagates, like numpy's max
        }
        y.data<T>()[plane] = static_cast<T>(best);
      } else if (kind == GlobalKind::Lp) {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i)
          sum += std::pow(std::fabs(static_cast<double>(s[i])), pNorm);
        y.data<T>()[plane] = static_cast<T>(static_cast<C>(std::pow(sum, 1.0 / pNorm)));
      } else if (f64) {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += static_cast<double>(s[i]);
        y.data<T>()[plane] = static_cast<T>(static_cast<C>(sum / static_cast<double>(size)));
      } else {
        C sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += static_cast<C>(s[i]);
        y.data<T>()[plane] = static_cast<T>(sum / static_cast<C>(size));
      }
    }
  };
  KILN_RETURN_IF_ERROR(dispatchFloat(ctx, x.dtype(), run));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

Status globalAveragePoolKernel(KernelContext &ctx) {
  return globalPool(ctx, GlobalKind::Average);
}
Status globalMaxPoolKernel(KernelContext &ctx) {
  return globalPool(ctx, GlobalKind::Max);
}
Status globalLpPoolKernel(KernelContext &ctx) {
  return globalPool(ctx, GlobalKind::Lp);
}

// ---- MaxUnpool ----------------------------------------------------------------

// The shape MaxPool with these attributes would have pooled x from: the
// space the indices point into.
Expected<Shape64> unpooledShape(const KernelContext &ctx, const Tensor &x) {
  KILN_ASSIGN_OR_RETURN(Shape64 in, spatialDims(ctx, x, "input X"));
  size_t n = in.size();
  Shape64 kernel = ctx.node().getInts("kernel_shape");
  if (kernel.size() != n)
    return ctx.error("kernel_shape has ", kernel.size(), " values, expected ", n);
  KILN_ASSIGN_OR_RETURN(Shape64 strides, spatialAttr(ctx, "strides", n, 1));
  KILN_ASSIGN_OR_RETURN(Shape64 pads, spatialAttr(ctx, "pads", 2 * n, 0));
  Shape64 shape = {x.dim(0), x.dim(1)};
  for (size_t d = 0; d < n; ++d) {
    shape.push_back((in[d] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + n]);
    if (shape.back() < 0) return ctx.error("unpooled shape ", shapeToString(shape), " is negative");
  }
  return shape;
}

// Y = zeros, Y[I[i]] = X[i]. The indices are flat positions in the unpooled
// shape; an explicit output_shape input keeps each element's coordinates and
// only changes the extent (as the ONNX reference outputs define it).
Status maxUnpoolKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0), &indices = ctx.in(1);
  if (indices.shape() != x.shape())
    return ctx.error("indices have shape ", shapeToString(indices.shape()),
                     ", expected the shape of X ", shapeToString(x.shape()));
  KILN_ASSIGN_OR_RETURN(Shape64 pooledFrom, unpooledShape(ctx, x));
  Shape64 shape = pooledFrom;
  if (ctx.has(2)) {
    shape = toInt64s(ctx.in(2));
    if (shape.size() != pooledFrom.size())
      return ctx.error("output_shape has ", shape.size(), " values, expected ", pooledFrom.size());
    for (int64_t d : shape)
      if (d < 0) return ctx.error("output_shape ", shapeToString(shape), " has a negative dim");
  }
  // Flat index in pooledFrom -> flat index in shape, by coordinates.
  std::vector<int64_t> target(x.numel());
  int64_t from = numelOf(pooledFrom);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t at = indices.getInt(i);
    if (at < 0 || at >= from)
      return ctx.error("index ", at, " is out of range for unpooled shape ",
                       shapeToString(pooledFrom));
    int64_t flat = 0, stride = 1;
    for (size_t d = pooledFrom.size(); d-- > 0;) {
      int64_t coord = at % pooledFrom[d];
      at /= pooledFrom[d];
      if (coord >= shape[d])
        return ctx.error("index ", indices.getInt(i), " falls outside output shape ",
                         shapeToString(shape));
      flat += coord * stride;
      stride *= shape[d];
    }
    target[i] = flat;
  }
  Tensor y(x.dtype(), shape);
  KILN_RETURN_IF_ERROR(dispatchNumeric(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < x.numel(); ++i) y.data<T>()[target[i]] = x.data<T>()[i];
  }));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

} // namespace

void registerPoolKernels(KernelTable &t) {
  t.add(OpKind::AveragePool, averagePoolKernel);
  t.add(OpKind::MaxPool, maxPoolKernel);
  t.add(OpKind::LpPool, lpPoolKernel);
  t.add(OpKind::MaxUnpool, maxUnpoolKernel);
  t.add(OpKind::GlobalAveragePool, globalAveragePoolKernel);
  t.add(OpKind::GlobalMaxPool, globalMaxPoolKernel);
  t.add(OpKind::GlobalLpPool, globalLpPoolKernel);
}

} // namespace kiln
