// Interpreter kernels for the ops that only look at or change a tensor's
// shape, or lay its elements out anew without looking at them: Constant,
// ConstantOfShape, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand,
// Tile, Shape and Size. Every kernel works for every dtype, strings included:
// elements are copied, never interpreted. Reshape-like ops return a tensor
// sharing the input's buffer (kernels never write into their inputs).
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>

namespace kiln {

namespace {

// Output tensors larger than this many bytes are rejected.
constexpr int64_t kMaxOutputBytes = int64_t{1} << 40;

// Checks that a `dtype` tensor of `shape` fits in kMaxOutputBytes; the product
// of dims is overflow-checked (a zero dim makes the tensor empty).
Status checkOutputSize(const KernelContext &ctx, const Shape64 &shape, DType dtype) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return Status::success();
  int64_t bytes = static_cast<int64_t>(dtypeSize(dtype));
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, d, &bytes) || bytes > kMaxOutputBytes)
      return ctx.error("output shape ", shapeToString(shape), " needs more than 2^40 bytes");
  return Status::success();
}

Status constantKernel(KernelContext &ctx) {
  const Tensor &v = ctx.node().getTensor("value");
  if (!v.defined()) return ctx.error("has no value attribute");
  ctx.setOutput(0, v);
  return Status::success();
}

// Reads a shape input: integers, rank <= 1, every dim >= 0.
Expected<Shape64> readShape(const KernelContext &ctx, int i) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, readIntsInput(ctx, i, "shape"));
  for (int64_t d : dims)
    if (d < 0) return ctx.error("shape ", shapeToString(dims), " has a negative dim");
  return dims;
}

Status constantOfShapeKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Shape64 shape, readShape(ctx, 0));
  Tensor value =
      ctx.node().hasAttr("value") ? ctx.node().getTensor("value") : Tensor::scalar<float>(0.0f);
  if (value.numel() != 1)
    return ctx.error("value must hold one element, got shape ", shapeToString(value.shape()));
  KILN_RETURN_IF_ERROR(checkOutputSize(ctx, shape, value.dtype()));
  Tensor out(value.dtype(), shape);
  visitDType(value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::fill_n(out.data<T>(), out.numel(), value.data<T>()[0]);
  });
  ctx.setOutput(0, std::move(out));
  return Status::success();
}

// The output shape of Reshape: 0 copies the input dim (unless allowzero), one
// -1 takes whatever is left.
Expected<Shape64> reshapeTarget(const KernelContext &ctx, const Shape64 &in,
                                const std::vector<int64_t> &target, bool allowZero) {
  Shape64 out(target.size());
  int64_t inferred = -1, known = 1;
  bool hasZero = false, overflow = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return ctx.error("shape ", shapeToString(target), " copies dim ", i, " of input ",
                         shapeToString(in), " which has no such dim");
      d = in[i];
    } else if (d == -1) {
      if (inferred >= 0) return ctx.error("shape ", shapeToString(target), " has two -1 dims");
      inferred = static_cast<int64_t>(i);
      continue;
    } else if (d < 0) {
      return ctx.error("shape ", shapeToString(target), " has an invalid dim ", d);
    }
    out[i] = d;
    if (d == 0) hasZero = true;
    else if (!overflow) overflow = __builtin_mul_overflow(known, d, &known);
  }
  if (hasZero) known = 0;
  else if (overflow)
    return ctx.error("shape ", shapeToString(target), " has more elements than int64 can count");
  int64_t numel = numelOf(in);
  if (inferred >= 0) {
    if (known == 0 || numel % known != 0)
      return ctx.error("cannot reshape ", shapeToString(in), " to ", shapeToString(target));
    out[inferred] = numel / known;
  } else if (known != numel) {
    return ctx.error("cannot reshape ", shapeToString(in), " (", numel, " elements) to ",
                     shapeToString(out));
  }
  return out;
}

Status reshapeKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> target, readIntsInput(ctx, 1, "shape"));
  bool allowZero = ctx.node().getInt("allowzero") != 0;
  KILN_ASSIGN_OR_RETURN(Shape64 shape, reshapeTarget(ctx, ctx.in(0).shape(), target, allowZero));
  ctx.setOutput(0, ctx.in(0).reshaped(std::move(shape)));
  return Status::success();
}

Status flattenKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  int64_t axis = ctx.node().getInt("axis");
  // Flatten's axis lies in [-rank, rank]: it may equal the rank (everything
  // goes to the first dim), and negative values count from the rank.
  if (axis < -x.rank() || axis > x.rank())
    return ctx.error("axis ", axis, " is out of range for rank ", x.rank());
  if (axis < 0) axis += x.rank();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? outer : inner) *= x.dim(i);
  ctx.setOutput(0, x.reshaped({outer, inner}));
  return Status::success();
}

// Resolves an axes list against `rank`: each in range, none repeated.
Expected<std::vector<int64_t>> resolveAxes(const KernelContext &ctx, std::vector<int64_t> axes,
                                           int64_t rank) {
  std::vector<bool> seen(rank, false);
  for (int64_t &a : axes) {
    KILN_ASSIGN_OR_RETURN(a, resolveAxis(ctx, a, rank));
    if (seen[a]) return ctx.error("axis ", a, " is repeated");
    seen[a] = true;
  }
  return axes;
}

Status squeezeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  std::vector<bool> drop(x.rank(), false);
  if (ctx.has(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, readIntsInput(ctx, 1, "axes"));
    KILN_ASSIGN_OR_RETURN(axes, resolveAxes(ctx, axes, x.rank()));
    for (int64_t a : axes) {
      if (x.dim(a) != 1)
        return ctx.error("cannot squeeze axis ", a, " of shape ", shapeToString(x.shape()),
                         ": its size is not 1");
      drop[a] = true;
    }
  } else {
    for (int64_t i = 0; i < x.rank(); ++i) drop[i] = x.dim(i) == 1;
  }
  Shape64 shape;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) shape.push_back(x.dim(i));
  ctx.setOutput(0, x.reshaped(std::move(shape)));
  return Status::success();
}

Status unsqueezeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, readIntsInput(ctx, 1, "axes"));
  int64_t outRank = x.rank() + static_cast<int64_t>(axes.size());
  KILN_ASSIGN_OR_RETURN(axes, resolveAxes(ctx, axes, outRank));
  std::vector<bool> inserted(outRank, false);
  for (int64_t a : axes) inserted[a] = true;
  Shape64 shape(outRank);
  for (int64_t i = 0, k = 0; i < outRank; ++i) shape[i] = inserted[i] ? 1 : x.dim(k++);
  ctx.setOutput(0, x.reshaped(std::move(shape)));
  return Status::success();
}

Status transposeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  int64_t rank = x.rank();
  std::vector<int64_t> perm = ctx.node().getInts("perm");
  if (!ctx.node().hasAttr("perm"))
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != rank)
    return ctx.error("perm has ", perm.size(), " entries for an input of rank ", rank);
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return ctx.error("perm ", shapeToString(perm), " is not a permutation of 0..", rank - 1);
    seen[p] = true;
  }
  Shape64 inStrides = stridesOf(x.shape());
  Shape64 shape(rank), strides(rank);
  for (int64_t i = 0; i < rank; ++i) {
    shape[i] = x.dim(perm[i]);
    strides[i] = inStrides[perm[i]];
  }
  ctx.setOutput(0, gatherOffsets(x, shape, stridedOffsets(shape, strides, 0)));
  return Status::success();
}

Status expandKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(Shape64 target, readShape(ctx, 1));
  auto shape = broadcastShapes64(x.shape(), target);
  if (!shape.ok()) return ctx.error(shape.error().message);
  KILN_RETURN_IF_ERROR(checkOutputSize(ctx, *shape, x.dtype()));
  ctx.setOutput(0, gatherOffsets(x, *shape, broadcastOffsets(x.shape(), *shape)));
  return Status::success();
}

Status tileKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, readIntsInput(ctx, 1, "repeats"));
  if (static_cast<int64_t>(repeats.size()) != x.rank())
    return ctx.error("repeats has ", repeats.size(), " entries for an input of rank ", x.rank());
  Shape64 shape(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (repeats[i] < 0)
      return ctx.error("repeats ", shapeToString(repeats), " has a negative entry");
    if (__builtin_mul_overflow(x.dim(i), repeats[i], &shape[i]))
      return ctx.error("repeats ", shapeToString(repeats), " overflow dim ", i);
  }
  KILN_RETURN_IF_ERROR(checkOutputSize(ctx, shape, x.dtype()));
  // Output index i along an axis reads input index i % dim.
  Shape64 inStrides = stridesOf(x.shape());
  std::vector<int64_t> offsets(numelOf(shape));
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t k = 0; k < static_cast<int64_t>(offsets.size()); ++k) {
    int64_t off = 0;
    for (size_t a = 0; a < shape.size(); ++a) off += index[a] % x.dim(a) * inStrides[a];
    offsets[k] = off;
    nextIndex(index, shape);
  }
  ctx.setOutput(0, gatherOffsets(x, shape, offsets));
  return Status::success();
}

Status shapeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  int64_t rank = x.rank();
  // Negative start/end count from the back; both clamp to [0, rank].
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  int64_t start = clampAxis(ctx.node().getInt("start"));
  int64_t end = ctx.node().hasAttr("end") ? clampAxis(ctx.node().getInt("end")) : rank;
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x.dim(i));
  int64_t n = static_cast<int64_t>(dims.size());
  ctx.setOutput(0, Tensor::fromVector(dims, {n}));
  return Status::success();
}

Status sizeKernel(KernelContext &ctx) {
  ctx.setOutput(0, Tensor::scalar<int64_t>(ctx.in(0).numel()));
  return Status::success();
}

} // namespace

void registerShapeKernels(KernelTable &t) {
  t.add(OpKind::Constant, constantKernel);
  t.add(OpKind::ConstantOfShape, constantOfShapeKernel);
  t.add(OpKind::Reshape, reshapeKernel);
  t.add(OpKind::Flatten, flattenKernel);
  t.add(OpKind::Squeeze, squeezeKernel);
  t.add(OpKind::Unsqueeze, unsqueezeKernel);
  t.add(OpKind::Transpose, transposeKernel);
  t.add(OpKind::Expand, expandKernel);
  t.add(OpKind::Tile, tileKernel);
  t.add(OpKind::Shape, shapeKernel);
  t.add(OpKind::Size, sizeKernel);
}

} // namespace kiln
