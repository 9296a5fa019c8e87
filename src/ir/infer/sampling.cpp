// Type and shape inference for Resize, GridSample, DepthToSpace,
// SpaceToDepth, RoiAlign and NonMaxSuppression.
//
// Resize's output dims are known when its scales or sizes come from a
// Constant (and the input dims are static where they are resized); a dim
// that is not resized keeps its input dim, symbol included. NonMaxSuppression
// selects a run-time number of boxes: [?, 3].
#include "ir/infer/families.h"
#include "ir/infer/infer.h"

#include <cfloat>
#include <cmath>

namespace kiln {

namespace {

// True when optional input i is given and not statically empty.
bool maybeGiven(const InferContext &ctx, int i) {
  if (!ctx.has(i)) return false;
  const Shape &s = ctx.inputShape(i);
  return !(s.rankKnown && s.rank() == 1 && s.dims[0].isStatic() && s.dims[0].value() == 0);
}

// A dim computed in floating point: static only when finite and within
// [0, 2^40]; anything else (NaN, inf, negative, absurd) is unknown.
Dim dimFromDouble(double v) {
  if (!(v >= 0.0 && v <= 0x1p40)) return Dim::unknown();
  return Dim(static_cast<int64_t>(v));
}

// Resize: floor(in * scale) per resized axis for constant scales; the sizes
// (adjusted by keep_aspect_ratio_policy) for constant sizes.
Status inferResize(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &in = ctx.inputShape(0);
  if (!in.rankKnown) {
    ctx.setOutput(0, dtype, Shape::unranked());
    return Status::success();
  }
  int64_t rank = in.rank();
  std::vector<int64_t> axes = ctx.node().getInts("axes");
  if (!ctx.node().hasAttr("axes"))
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  for (int64_t &a : axes) {
    auto ax = normalizeAxis(a, rank);
    if (!ax.ok()) return ctx.error(ax.error().message);
    a = *ax;
  }

  Shape out = in;
  for (int64_t a : axes) out.dims[a] = Dim::unknown();
  bool hasScales = maybeGiven(ctx, 2), hasSizes = maybeGiven(ctx, 3);
  const Tensor *scales = hasScales ? ctx.constantInput(2) : nullptr;
  std::optional<std::vector<int64_t>> sizes = hasSizes ? ctx.constantInts(3) : std::nullopt;
  if (scales && scales->numel() == static_cast<int64_t>(axes.size()) && isFloat(scales->dtype())) {
    for (size_t i = 0; i < axes.size(); ++i) {
      const Dim &d = in.dims[axes[i]];
      // Scales are float32 in the model; a double beyond float's range
      // would not convert, so it stays as is (and gives an unknown dim).
      double raw = scales->getDouble(i);
      double s = std::fabs(raw) <= FLT_MAX ? static_cast<float>(raw) : raw;
      if (d.isStatic() && s > 0)
        out.dims[axes[i]] = dimFromDouble(std::floor(static_cast<double>(d.value()) * s));
      else if (s == 1.0)
        out.dims[axes[i]] = d; // keeps its symbol
    }
  } else if (sizes && sizes->size() == axes.size()) {
    std::string policy = ctx.node().getString("keep_aspect_ratio_policy");
    if (policy == "stretch") {
      for (size_t i = 0; i < axes.size(); ++i) out.dims[axes[i]] = Dim((*sizes)[i]);
    } else {
      // One common scale; needs every resized input dim.
      bool known = true;
      double common = policy == "not_larger" ? INFINITY : 0.0;
      for (size_t i = 0; i < axes.size(); ++i) {
        const Dim &d = in.dims[axes[i]];
        if (!d.isStatic() || d.value() == 0) {
          known = false;
          break;
        }
        double s = static_cast<double>((*sizes)[i]) / d.value();
        common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
      }
      for (size_t i = 0; known && i < axes.size(); ++i)
        out.dims[axes[i]] = dimFromDouble(
            std::floor(common * static_cast<double>(in.dims[axes[i]].value()) + 0.5));
    }
  }
  ctx.setOutput(0, dtype, std::move(out));
  return Status::success();
}

// GridSample: [N, C, grid's output dims...].
Status inferGridSample(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &x = ctx.inputShape(0), &grid = ctx.inputShape(1);
  if (!grid.rankKnown || grid.rank() < 3) {
    Shape out = Shape::unranked();
    if (x.rankKnown) out = Shape(std::vector<Dim>(x.rank(), Dim::unknown()));
    if (x.rankKnown && x.rank() >= 2) {
      out.dims[0] = x.dims[0];
      out.dims[1] = x.dims[1];
    }
    ctx.setOutput(0, dtype, std::move(out));
    return Status::success();
  }
  Dim n = grid.dims[0], c = Dim::unknown();
  if (x.rankKnown && x.rank() >= 2) {
    c = x.dims[1];
    if (!n.isStatic() && !n.isSymbol()) n = x.dims[0];
  }
  std::vector<Dim> dims{n, c};
  dims.insert(dims.end(), grid.dims.begin() + 1, grid.dims.end() - 1);
  ctx.setOutput(0, dtype, Shape(std::move(dims)));
  return Status::success();
}

// DepthToSpace [N, C/b^2, H*b, W*b]; SpaceToDepth [N, C*b^2, H/b, W/b].
Status inferDepthSpace(InferContext &ctx) {
  DType dtype = ctx.inputDType(0);
  const Shape &x = ctx.inputShape(0);
  int64_t b = ctx.node().getInt("blocksize");
  if (!x.rankKnown) {
    ctx.setOutput(0, dtype, Shape(std::vector<Dim>(4, Dim::unknown())));
    return Status::success();
  }
  if (x.rank() != 4) return ctx.error("input must have rank 4, got ", x.str());
  if (b <= 0) return ctx.error("blocksize must be positive, got ", b);
  bool toSpace = ctx.node().op() == OpKind::DepthToSpace;
  // b*b and d*b can overflow for a huge blocksize: such a product is
  // unknown (bb == 0 below), and so is any dim computed from it.
  int64_t bb = 0;
  if (__builtin_mul_overflow(b, b, &bb)) bb = 0;
  auto scaled = [&](const Dim &d, int64_t mul, int64_t div) {
    int64_t v = 0;
    if (!d.isStatic() || mul <= 0 || div <= 0 || __builtin_mul_overflow(d.value(), mul, &v))
      return Dim::unknown();
    return Dim(v / div);
  };
  Shape out({x.dims[0], Dim(), Dim(), Dim()});
  if (toSpace) {
    // Without b*b in range, only C = 0 is divisible by it.
    if (x.dims[1].isStatic() && (bb ? x.dims[1].value() % bb : x.dims[1].value()) != 0)
      return ctx.error("channels ", x.dims[1].value(), " are not divisible by blocksize^2");
    out.dims[1] = bb ? scaled(x.dims[1], 1, bb) : x.dims[1].isStatic() ? Dim(0) : Dim::unknown();
    out.dims[2] = scaled(x.dims[2], b, 1);
    out.dims[3] = scaled(x.dims[3], b, 1);
  } else {
    for (int a = 2; a < 4; ++a)
      if (x.dims[a].isStatic() && x.dims[a].value() % b != 0)
        return ctx.error("spatial dim ", x.dims[a].value(), " is not divisible by blocksize ", b);
    out.dims[1] = scaled(x.dims[1], bb, 1);
    out.dims[2] = scaled(x.dims[2], 1, b);
    out.dims[3] = scaled(x.dims[3], 1, b);
  }
  ctx.setOutput(0, dtype, std::move(out));
  return Status::success();
}

// RoiAlign: [num_rois, C, output_height, output_width].
Status inferRoiAlign(InferContext &ctx) {
  const Shape &x = ctx.inputShape(0), &rois = ctx.inputShape(1);
  Dim numRois = rois.rankKnown && rois.rank() == 2 ? rois.dims[0] : Dim::unknown();
  if (!numRois.isStatic() && !numRois.isSymbol()) {
    const Shape &idx = ctx.inputShape(2);
    if (idx.rankKnown && idx.rank() == 1) numRois = idx.dims[0];
  }
  Dim c = x.rankKnown && x.rank() == 4 ? x.dims[1] : Dim::unknown();
  ctx.setOutput(0, ctx.inputDType(0),
                Shape({numRois, c, Dim(ctx.node().getInt("output_height")),
                       Dim(ctx.node().getInt("output_width"))}));
  return Status::success();
}

Status inferNonMaxSuppression(InferContext &ctx) {
  ctx.setOutput(0, DType::I64, Shape({Dim::unknown(), Dim(3)}));
  return Status::success();
}

} // namespace

void registerSamplingInference(InferTable &t) {
  t.add(OpKind::Resize, inferResize);
  t.add(OpKind::GridSample, inferGridSample);
  t.add(OpKind::DepthToSpace, inferDepthSpace);
  t.add(OpKind::SpaceToDepth, inferDepthSpace);
  t.add(OpKind::RoiAlign, inferRoiAlign);
  t.add(OpKind::NonMaxSuppression, inferNonMaxSuppression);
}

} // namespace kiln
