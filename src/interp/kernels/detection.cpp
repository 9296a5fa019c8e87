// Interpreter kernels: NonMaxSuppression and RoiAlign, the two detection
// post-/pre-processing ops.
//
// NonMaxSuppression is the greedy algorithm per (batch, class): candidates
// above score_threshold in descending score order (ties: lower box index
// first), each kept unless its IoU with a box already kept for that class
// exceeds iou_threshold. IoU is computed in float, in the same order of
// operations as ONNX Runtime, so borderline threshold comparisons agree.
//
// RoiAlign follows the reference (torchvision / ONNX Runtime) algorithm:
// each output bin averages (or maxes) bilinear samples on a regular grid, with
// sampling_ratio 0 meaning ceil(roi size / output size) samples per bin.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>
#include <cmath>

namespace kiln {

namespace {

// ---- NonMaxSuppression ------------------------------------------------------

// A box as [min, max] extents on both axes.
struct Box {
  float yMin, xMin, yMax, xMax;
};

// Box `i` of a [n, 4] float array: corners [y1, x1, y2, x2] in any order, or
// with center_point_box = 1, [x_center, y_center, width, height].
Box readBox(const float *data, int64_t i, bool centerPoint) {
  const float *b = data + 4 * i;
  if (centerPoint) {
    float halfW = b[2] / 2, halfH = b[3] / 2;
    return {b[1] - halfH, b[0] - halfW, b[1] + halfH, b[0] + halfW};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// True when the IoU of a and b exceeds the threshold. Empty intersections
// and degenerate boxes never suppress.
bool overlapsTooMuch(const Box &a, const Box &b, float iouThreshold) {
  float ixMin = std::max(a.xMin, b.xMin), ixMax = std::min(a.xMax, b.xMax);
  if (ixMax <= ixMin) return false;
  float iyMin = std::max(a.yMin, b.yMin), iyMax = std::min(a.yMax, b.yMax);
  if (iyMax <= iyMin) return false;
  float inter = (ixMax - ixMin) * (iyMax - iyMin);
  float areaA = (a.xMax - a.xMin) * (a.yMax - a.yMin);
  float areaB = (b.xMax - b.xMin) * (b.yMax - b.yMin);
  if (areaA <= 0 || areaB <= 0) return false;
  float uni = areaA + areaB - inter;
  if (uni <= 0) return false;
  return inter / uni > iouThreshold;
}

// The optional one-value input `slot` (shape [] or [1]), or null when absent.
Expected<const Tensor *> optionalScalar(const KernelContext &ctx, int slot, const char *name) {
  if (!ctx.has(slot) || ctx.in(slot).numel() == 0) return nullptr;
  const Tensor &t = ctx.in(slot);
  if (t.numel() != 1)
    return ctx.error(name, " must hold one value, got shape ", shapeToString(t.shape()));
  return &t;
}

std::vector<float> toFloats(const Tensor &t) {
  std::vector<double> v = toDoubles(t);
  return std::vector<float>(v.begin(), v.end());
}

// The boxes kept for one (batch, class), in selection order.
std::vector<int64_t> selectBoxes(const float *boxes, const float *scores, int64_t numBoxes,
                                 bool centerPoint, int64_t maxKeep, float iouThreshold,
                                 const float *scoreThreshold) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < numBoxes; ++i) {
    if (std::isnan(scores[i])) continue; // unordered: never a candidate
    if (!scoreThreshold || scores[i] > *scoreThreshold) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  std::vector<int64_t> kept;
  std::vector<Box> keptBoxes;
  for (int64_t i : order) {
    if (static_cast<int64_t>(kept.size()) >= maxKeep) break;
    Box box = readBox(boxes, i, centerPoint);
    bool suppressed = std::any_of(keptBoxes.begin(), keptBoxes.end(), [&](const Box &k) {
      return overlapsTooMuch(k, box, iouThreshold);
    });
    if (suppressed) continue;
    kept.push_back(i);
    keptBoxes.push_back(box);
  }
  return kept;
}

Status nonMaxSuppressionKernel(KernelContext &ctx) {
  const Tensor &boxesT = ctx.in(0), &scoresT = ctx.in(1);
  if (!isFloat(boxesT.dtype()) || !isFloat(scoresT.dtype()))
    return ctx.error("boxes and scores must be float tensors");
  if (boxesT.rank() != 3 || boxesT.dim(2) != 4)
    return ctx.error("boxes must have shape [batches, boxes, 4], got ",
                     shapeToString(boxesT.shape()));
  if (scoresT.rank() != 3)
    return ctx.error("scores must have shape [batches, classes, boxes], got ",
                     shapeToString(scoresT.shape()));
  int64_t batches = boxesT.dim(0), numBoxes = boxesT.dim(1), classes = scoresT.dim(1);
  if (scoresT.dim(0) != batches || scoresT.dim(2) != numBoxes)
    return ctx.error("scores shape ", shapeToString(scoresT.shape()),
                     " does not match boxes shape ", shapeToString(boxesT.shape()));
  int64_t centerPointBox = ctx.node().getInt("center_point_box");
  if (centerPointBox != 0 && centerPointBox != 1)
    return ctx.error("center_point_box must be 0 or 1, got ", centerPointBox);
  KILN_ASSIGN_OR_RETURN(const Tensor *maxT, optionalScalar(ctx, 2, "max_output_boxes_per_class"));
  KILN_ASSIGN_OR_RETURN(const Tensor *iouT, optionalScalar(ctx, 3, "iou_threshold"));
  KILN_ASSIGN_OR_RETURN(const Tensor *scoreT, optionalScalar(ctx, 4, "score_threshold"));
  if (maxT && !isInt(maxT->dtype()))
    return ctx.error("max_output_boxes_per_class must be an integer tensor");
  // Absent or non-positive max_output_boxes_per_class selects nothing.
  int64_t maxKeep = maxT ? std::max<int64_t>(maxT->getInt(0), 0) : 0;
  float iouThreshold = iouT ? static_cast<float>(iouT->getDouble(0)) : 0.0f;
  float scoreThreshold = scoreT ? static_cast<float>(scoreT->getDouble(0)) : 0.0f;

  std::vector<float> boxes = toFloats(boxesT), scores = toFloats(scoresT);
  std::vector<int64_t> selected; // (batch, class, box) triples
  for (int64_t n = 0; n < batches; ++n) {
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<int64_t> kept = selectBoxes(
          &boxes[n * numBoxes * 4], &scores[(n * classes + c) * numBoxes], numBoxes,
          centerPointBox == 1, maxKeep, iouThreshold, scoreT ? &scoreThreshold : nullptr);
      for (int64_t i : kept) selected.insert(selected.end(), {n, c, i});
    }
  }
  int64_t count = static_cast<int64_t>(selected.size()) / 3;
  ctx.setOutput(0, Tensor::fromVector(selected, {count, 3}));
  return Status::success();
}

// ---- RoiAlign ---------------------------------------------------------------

// One bilinear sample: four pixel offsets within a plane and their weights
// (all zero for a sample outside the feature map).
template <class C> struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  C w[4] = {0, 0, 0, 0};
};

// The bilinear sample at (y, x) of a height x width plane.
template <class C> Sample<C> bilinearSample(C y, C x, int64_t height, int64_t width) {
  Sample<C> s;
  // Outside the feature map (or NaN): the sample reads nothing.
  if (!(y >= C(-1) && y <= C(height) && x >= C(-1) && x <= C(width))) return s;
  y = std::max(y, C(0));
  x = std::max(x, C(0));
  int64_t yLow = static_cast<int64_t>(y), xLow = static_cast<int64_t>(x), yHigh, xHigh;
  if (yLow >= height - 1) {
    yHigh = yLow = height - 1;
    y = static_cast<C>(yLow);
  } else {
    yHigh = yLow + 1;
  }
  if (xLow >= width - 1) {
    xHigh = xLow = width - 1;
    x = static_cast<C>(xLow);
  } else {
    xHigh = xLow + 1;
  }
  C ly = y - static_cast<C>(yLow), lx = x - static_cast<C>(xLow), hy = 1 - ly, hx = 1 - lx;
  s.pos[0] = yLow * width + xLow;
  s.pos[1] = yLow * width + xHigh;
  s.pos[2] = yHigh * width + xLow;
  s.pos[3] = yHigh * width + xHigh;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

struct RoiAlignParams {
  int64_t outH = 1, outW = 1, samplingRatio = 0;
  float spatialScale = 1;
  bool halfPixel = true, maxMode = false;
};

// Sampling grids larger than this per bin side are rejected.
constexpr int64_t kMaxGrid = int64_t{1} << 16;
// Output and sample counts larger than this are rejected.
constexpr int64_t kMaxRoiElements = int64_t{1} << 31;

// The sampling grid side for a bin of `len` pixels, or -1 when it is not
// finite or exceeds kMaxGrid (checked in double, before the cast).
template <class C> int64_t gridSide(const RoiAlignParams &p, C len) {
  if (p.samplingRatio > 0) return p.samplingRatio <= kMaxGrid ? p.samplingRatio : -1;
  double side = std::ceil(static_cast<double>(len));
  if (!(side <= static_cast<double>(kMaxGrid))) return -1; // NaN too
  return side > 0 ? static_cast<int64_t>(side) : 0;
}

// The samples of every bin of one roi [x1, y1, x2, y2], bin-major: bin
// (ph, pw) owns gridH * gridW consecutive entries. Returns false (and no
// samples) when the grid would exceed kMaxGrid or kMaxRoiElements samples.
template <class C>
bool roiSamples(const RoiAlignParams &p, const C *roi, int64_t height, int64_t width,
                int64_t &gridH, int64_t &gridW, std::vector<Sample<C>> &samples) {
  C scale = static_cast<C>(p.spatialScale), offset = p.halfPixel ? C(0.5) : C(0);
  C startW = roi[0] * scale - offset, startH = roi[1] * scale - offset;
  C roiW = roi[2] * scale - offset - startW, roiH = roi[3] * scale - offset - startH;
  if (!p.halfPixel) { // the legacy mode forces malformed rois to 1x1
    roiW = std::max(roiW, C(1));
    roiH = std::max(roiH, C(1));
  }
  C binH = roiH / static_cast<C>(p.outH), binW = roiW / static_cast<C>(p.outW);
  gridH = gridSide(p, binH);
  gridW = gridSide(p, binW);
  int64_t count = 0;
  if (gridH < 0 || gridW < 0 || __builtin_mul_overflow(p.outH, p.outW, &count) ||
      __builtin_mul_overflow(count, gridH * gridW, &count) || count > kMaxRoiElements)
    return false;
  samples.clear();
  samples.reserve(count);
  for (int64_t ph = 0; ph < p.outH; ++ph)
    for (int64_t pw = 0; pw < p.outW; ++pw)
      for (int64_t iy = 0; iy < gridH; ++iy) {
        C y = startH + static_cast<C>(ph) * binH +
              (static_cast<C>(iy) + C(0.5)) * binH / static_cast<C>(gridH);
        for (int64_t ix = 0; ix < gridW; ++ix) {
          C x = startW + static_cast<C>(pw) * binW +
                (static_cast<C>(ix) + C(0.5)) * binW / static_cast<C>(gridW);
          samples.push_back(bilinearSample(y, x, height, width));
        }
      }
  return true;
}

// Pools one bin of one channel plane from its `count` samples.
template <class C>
C poolBin(const RoiAlignParams &p, const C *plane, const Sample<C> *s, int64_t count) {
  if (!p.maxMode) {
    C sum = 0;
    for (int64_t k = 0; k < count; ++k)
      sum += s[k].w[0] * plane[s[k].pos[0]] + s[k].w[1] * plane[s[k].pos[1]] +
             s[k].w[2] * plane[s[k].pos[2]] + s[k].w[3] * plane[s[k].pos[3]];
    return sum / static_cast<C>(std::max<int64_t>(count, 1));
  }
  // Max mode takes the largest weighted corner of each sample, as ONNX
  // Runtime and the ONNX reference do.
  C best = 0;
  for (int64_t k = 0; k < count; ++k) {
    C v = s[k].w[0] * plane[s[k].pos[0]];
    for (int q = 1; q < 4; ++q) v = std::max(v, s[k].w[q] * plane[s[k].pos[q]]);
    best = k == 0 ? v : std::max(best, v);
  }
  return best;
}

Expected<RoiAlignParams> readRoiAlignParams(const KernelContext &ctx) {
  const Node &node = ctx.node();
  RoiAlignParams p;
  p.outH = node.getInt("output_height");
  p.outW = node.getInt("output_width");
  p.samplingRatio = node.getInt("sampling_ratio");
  p.spatialScale = node.getFloat("spatial_scale");
  if (p.outH <= 0 || p.outW <= 0)
    return ctx.error("output_height and output_width must be positive");
  if (p.samplingRatio < 0) return ctx.error("sampling_ratio must not be negative");
  std::string mode = node.getString("mode");
  if (mode != "avg" && mode != "max") return ctx.error("unknown mode '", mode, "'");
  p.maxMode = mode == "max";
  std::string ctm = node.getString("coordinate_transformation_mode");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return ctx.error("unknown coordinate_transformation_mode '", ctm, "'");
  p.halfPixel = ctm == "half_pixel";
  return p;
}

template <class C> std::vector<C> readAs(const Tensor &t) {
  std::vector<double> v = toDoubles(t);
  return std::vector<C>(v.begin(), v.end());
}

template <class C>
Status roiAlign(KernelContext &ctx, const RoiAlignParams &p, const std::vector<int64_t> &batchIdx) {
  const Tensor &x = ctx.in(0);
  int64_t numRois = ctx.in(1).dim(0);
  int64_t batch = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  if (height == 0 || width == 0)
    return ctx.error("X must have a non-empty spatial plane, got ", shapeToString(x.shape()));
  int64_t bins = 0, outSize = 0;
  if (__builtin_mul_overflow(p.outH, p.outW, &bins) || bins > kMaxRoiElements ||
      __builtin_mul_overflow(numRois * channels, bins, &outSize) || outSize > kMaxRoiElements)
    return ctx.error("output of ", numRois, " rois x ", channels, " channels x ", p.outH, "x",
                     p.outW, " is too large");
  std::vector<C> rois = readAs<C>(ctx.in(1)), data = readAs<C>(x);
  std::vector<double> out(outSize);
  int64_t plane = height * width;
  for (int64_t r = 0; r < numRois; ++r) {
    if (batchIdx[r] < 0 || batchIdx[r] >= batch)
      return ctx.error("batch index ", batchIdx[r], " of roi ", r, " is outside [0, ", batch, ")");
    for (int k = 0; k < 4; ++k)
      if (!std::isfinite(rois[4 * r + k])) return ctx.error("roi ", r, " is not finite");
    int64_t gridH = 0, gridW = 0;
    std::vector<Sample<C>> samples;
    if (!roiSamples(p, &rois[4 * r], height, width, gridH, gridW, samples))
      return ctx.error("the sampling grid of roi ", r, " is too large (more than ", kMaxGrid,
                       " per side or ", kMaxRoiElements, " samples)");
    int64_t perBin = gridH * gridW;
    for (int64_t c = 0; c < channels; ++c) {
      const C *in = &data[(batchIdx[r] * channels + c) * plane];
      double *o = &out[(r * channels + c) * bins];
      for (int64_t bin = 0; bin < bins; ++bin)
        o[bin] = poolBin(p, in, samples.data() + bin * perBin, perBin);
    }
  }
  Tensor f64 = Tensor::fromVector(out, {numRois, channels, p.outH, p.outW});
  ctx.setOutput(0, convertTensor(f64, x.dtype()));
  return Status::success();
}

Status roiAlignKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0), &rois = ctx.in(1), &idx = ctx.in(2);
  KILN_ASSIGN_OR_RETURN(RoiAlignParams p, readRoiAlignParams(ctx));
  if (!isFloat(x.dtype()) || !isFloat(rois.dtype()))
    return ctx.error("X and rois must be float tensors");
  if (x.rank() != 4) return ctx.error("X must have rank 4, got ", shapeToString(x.shape()));
  if (rois.rank() != 2 || rois.dim(1) != 4)
    return ctx.error("rois must have shape [num_rois, 4], got ", shapeToString(rois.shape()));
  if (!isInt(idx.dtype()) || idx.shape() != Shape64{rois.dim(0)})
    return ctx.error("batch_indices must be an integer tensor of shape [", rois.dim(0), "]");
  std::vector<int64_t> batchIdx = toInt64s(idx);
  if (ctx.options().accumulateF64 || x.dtype() == DType::F64)
    return roiAlign<double>(ctx, p, batchIdx);
  return roiAlign<float>(ctx, p, batchIdx);
}

} // namespace

void registerDetectionKernels(KernelTable &t) {
  t.add(OpKind::NonMaxSuppression, nonMaxSuppressionKernel);
  t.add(OpKind::RoiAlign, roiAlignKernel);
}

} // namespace kiln
