// Interpreter kernels that read or write a tensor at positions given by an
// index tensor: Gather, GatherElements, GatherND, ScatterElements and
// ScatterND. Indices may be negative (counted from the back of their axis);
// an index outside [-dim, dim) is an error, never a wild read or write. The
// gathers move elements of any dtype; the scatters also combine them
// (reduction add/mul/max/min) for numeric dtypes.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>

namespace kiln {

namespace {

int64_t dimProduct(const Shape64 &s, int64_t from, int64_t to) {
  int64_t n = 1;
  for (int64_t i = from; i < to; ++i) n *= s[i];
  return n;
}

// Reads an index tensor (i32 or i64 per ONNX; any integer dtype accepted).
Expected<std::vector<int64_t>> readIndices(const KernelContext &ctx, int i) {
  const Tensor &t = ctx.in(i);
  if (!isInt(t.dtype()))
    return ctx.error("indices (input ", i, ") must be integers, got ", dtypeName(t.dtype()));
  return toInt64s(t);
}

// Resolves one possibly negative index against a dim of size n.
Expected<int64_t> resolveIndex(const KernelContext &ctx, int64_t index, int64_t n, int64_t axis) {
  if (index < -n || index >= n)
    return ctx.error("index ", index, " is out of range for axis ", axis, " of size ", n);
  return index < 0 ? index + n : index;
}

Status gatherKernel(KernelContext &ctx) {
  const Tensor &data = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), data.rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> indices, readIndices(ctx, 1));
  int64_t dim = data.dim(axis);
  for (int64_t &i : indices) {
    KILN_ASSIGN_OR_RETURN(i, resolveIndex(ctx, i, dim, axis));
  }
  // Output: data dims before axis, then the indices' dims, then the rest.
  const Shape64 &ds = data.shape();
  Shape64 shape(ds.begin(), ds.begin() + axis);
  shape.insert(shape.end(), ctx.in(1).shape().begin(), ctx.in(1).shape().end());
  shape.insert(shape.end(), ds.begin() + axis + 1, ds.end());
  int64_t outer = dimProduct(ds, 0, axis), inner = dimProduct(ds, axis + 1, data.rank());
  int64_t n = static_cast<int64_t>(indices.size());
  Tensor out(data.dtype(), shape);
  visitDType(data.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *src = data.data<T>();
    T *dst = out.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        std::copy_n(src + (o * dim + indices[j]) * inner, inner, dst + (o * n + j) * inner);
  });
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// For each element of an index tensor of the rank of `data`, the offset in
// data of the element it names: its own position with the coordinate on
// `axis` replaced by the index value. Shared by GatherElements and
// ScatterElements.
Expected<std::vector<int64_t>> elementOffsets(const KernelContext &ctx, const Tensor &data,
                                              const Tensor &indexTensor, int64_t axis) {
  if (indexTensor.rank() != data.rank())
    return ctx.error("indices have rank ", indexTensor.rank(), ", data has rank ", data.rank());
  for (int64_t a = 0; a < data.rank(); ++a)
    if (a != axis && indexTensor.dim(a) > data.dim(a))
      return ctx.error("indices shape ", shapeToString(indexTensor.shape()), " exceeds data shape ",
                       shapeToString(data.shape()), " on axis ", a);
  std::vector<int64_t> indices = toInt64s(indexTensor);
  Shape64 strides = stridesOf(data.shape());
  std::vector<int64_t> pos(data.rank(), 0), offsets(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(int64_t idx, resolveIndex(ctx, indices[k], data.dim(axis), axis));
    int64_t off = 0;
    for (int64_t a = 0; a < data.rank(); ++a) off += (a == axis ? idx : pos[a]) * strides[a];
    offsets[k] = off;
    nextIndex(pos, indexTensor.shape());
  }
  return offsets;
}

Status gatherElementsKernel(KernelContext &ctx) {
  const Tensor &data = ctx.in(0);
  if (!isInt(ctx.in(1).dtype())) return ctx.error("indices must be integers");
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), data.rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, elementOffsets(ctx, data, ctx.in(1), axis));
  ctx.setOutput(0, gatherOffsets(data, ctx.in(1).shape(), offsets));
  return Status::success();
}

// The layout of a GatherND/ScatterND index tensor of shape
// [batch..., rest..., k] against data of shape [batch..., dims..., slice...].
struct NdPlan {
  int64_t batches = 1;          // product of the batch dims
  int64_t perBatch = 1;         // index tuples per batch
  int64_t k = 0;                // length of one index tuple
  int64_t slice = 1;            // elements addressed by one tuple
  int64_t batchStride = 1;      // data elements per batch
  std::vector<int64_t> offsets; // per tuple: offset of its slice in data
};

Expected<NdPlan> planNd(const KernelContext &ctx, const Tensor &data, const Tensor &indexTensor,
                        int64_t batchDims) {
  int64_t r = data.rank(), q = indexTensor.rank();
  if (q < 1) return ctx.error("indices must have rank >= 1");
  NdPlan p;
  p.k = indexTensor.dim(q - 1);
  if (batchDims < 0 || batchDims >= q || batchDims + p.k > r)
    return ctx.error("indices shape ", shapeToString(indexTensor.shape()), " with batch_dims ",
                     batchDims, " does not fit data shape ", shapeToString(data.shape()));
  for (int64_t a = 0; a < batchDims; ++a)
    if (data.dim(a) != indexTensor.dim(a))
      return ctx.error("batch dim ", a, " differs: data ", shapeToString(data.shape()),
                       ", indices ", shapeToString(indexTensor.shape()));
  p.batches = dimProduct(data.shape(), 0, batchDims);
  p.perBatch = dimProduct(indexTensor.shape(), batchDims, q - 1);
  p.slice = dimProduct(data.shape(), batchDims + p.k, r);
  p.batchStride = dimProduct(data.shape(), batchDims, r);
  Shape64 strides = stridesOf(data.shape());
  std::vector<int64_t> indices = toInt64s(indexTensor);
  for (int64_t t = 0; t < p.batches * p.perBatch; ++t) {
    int64_t off = (t / p.perBatch) * p.batchStride;
    for (int64_t m = 0; m < p.k; ++m) {
      int64_t a = batchDims + m;
      KILN_ASSIGN_OR_RETURN(int64_t idx, resolveIndex(ctx, indices[t * p.k + m], data.dim(a), a));
      off += idx * strides[a];
    }
    p.offsets.push_back(off);
  }
  return p;
}

Status gatherNdKernel(KernelContext &ctx) {
  const Tensor &data = ctx.in(0), &idx = ctx.in(1);
  if (!isInt(idx.dtype())) return ctx.error("indices must be integers");
  int64_t batchDims = ctx.node().getInt("batch_dims");
  KILN_ASSIGN_OR_RETURN(NdPlan p, planNd(ctx, data, idx, batchDims));
  Shape64 shape(idx.shape().begin(), idx.shape().end() - 1);
  shape.insert(shape.end(), data.shape().begin() + batchDims + p.k, data.shape().end());
  Tensor out(data.dtype(), shape);
  visitDType(data.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t t = 0; t < p.offsets.size(); ++t)
      std::copy_n(data.data<T>() + p.offsets[t], p.slice, out.data<T>() + t * p.slice);
  });
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

enum class Reduction { None, Add, Mul, Max, Min };

Expected<Reduction> readReduction(const KernelContext &ctx, DType dtype) {
  std::string r = ctx.node().getString("reduction");
  Reduction red;
  if (r == "none")
    red = Reduction::None;
  else if (r == "add")
    red = Reduction::Add;
  else if (r == "mul")
    red = Reduction::Mul;
  else if (r == "max")
    red = Reduction::Max;
  else if (r == "min")
    red = Reduction::Min;
  else
    return ctx.error("unknown reduction '", r, "'");
  if (red != Reduction::None && dtype == DType::String)
    return ctx.error("reduction '", r, "' does not apply to strings");
  return red;
}

// Combines an existing element with an update; f16/bf16 compute in float.
template <class T> T combine(const T &old, const T &upd, Reduction r) {
  if constexpr (std::is_same_v<T, std::string>) {
    return upd;
  } else {
    using C = ComputeType<T>;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Integers wrap: add and mul in an unsigned type at least as wide as
      // unsigned int (so that no promotion to int can overflow), then back.
      using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
      if (r == Reduction::Add) return static_cast<T>(static_cast<W>(old) + static_cast<W>(upd));
      if (r == Reduction::Mul) return static_cast<T>(static_cast<W>(old) * static_cast<W>(upd));
    }
    C a = static_cast<C>(old), b = static_cast<C>(upd), v = b;
    switch (r) {
    case Reduction::None:
      v = b;
      break;
    case Reduction::Add:
      v = static_cast<C>(a + b);
      break;
    case Reduction::Mul:
      v = static_cast<C>(a * b);
      break;
    case Reduction::Max:
      v = std::max(a, b);
      break;
    case Reduction::Min:
      v = std::min(a, b);
      break;
    }
    return static_cast<T>(v);
  }
}

// Writes updates[k] into out[offsets[k] + j] for j < slice, in order (so
// repeated indices reduce, or the last write wins for "none").
void scatterInto(Tensor &out, const Tensor &updates, const std::vector<int64_t> &offsets,
                 int64_t slice, Reduction r) {
  visitDType(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T *dst = out.data<T>();
    const T *upd = updates.data<T>();
    for (size_t k = 0; k < offsets.size(); ++k)
      for (int64_t j = 0; j < slice; ++j)
        dst[offsets[k] + j] = combine(dst[offsets[k] + j], upd[k * slice + j], r);
  });
}

Status scatterElementsKernel(KernelContext &ctx) {
  const Tensor &data = ctx.in(0), &idx = ctx.in(1), &updates = ctx.in(2);
  if (!isInt(idx.dtype())) return ctx.error("indices must be integers");
  if (updates.dtype() != data.dtype() || updates.shape() != idx.shape())
    return ctx.error("updates ", dtypeName(updates.dtype()), shapeToString(updates.shape()),
                     " must have the data's dtype and the indices' shape ",
                     shapeToString(idx.shape()));
  KILN_ASSIGN_OR_RETURN(Reduction r, readReduction(ctx, data.dtype()));
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), data.rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, elementOffsets(ctx, data, idx, axis));
  Tensor out = data.clone();
  scatterInto(out, updates, offsets, 1, r);
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

Status scatterNdKernel(KernelContext &ctx) {
  const Tensor &data = ctx.in(0), &idx = ctx.in(1), &updates = ctx.in(2);
  if (!isInt(idx.dtype())) return ctx.error("indices must be integers");
  KILN_ASSIGN_OR_RETURN(Reduction r, readReduction(ctx, data.dtype()));
  KILN_ASSIGN_OR_RETURN(NdPlan p, planNd(ctx, data, idx, 0));
  // updates must be indices.shape[:-1] + data.shape[k:].
  Shape64 want(idx.shape().begin(), idx.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + p.k, data.shape().end());
  if (updates.dtype() != data.dtype() || updates.shape() != want)
    return ctx.error("updates are ", dtypeName(updates.dtype()), shapeToString(updates.shape()),
                     ", expected ", dtypeName(data.dtype()), shapeToString(want));
  Tensor out = data.clone();
  scatterInto(out, updates, p.offsets, p.slice, r);
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

} // namespace

void registerGatherScatterKernels(KernelTable &t) {
  t.add(OpKind::Gather, gatherKernel);
  t.add(OpKind::GatherElements, gatherElementsKernel);
  t.add(OpKind::GatherND, gatherNdKernel);
  t.add(OpKind::ScatterElements, scatterElementsKernel);
  t.add(OpKind::ScatterND, scatterNdKernel);
}

} // namespace kiln
