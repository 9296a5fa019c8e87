// Host ops whose output size depends on the input values (host_ops.h,
// "selection"): NonZero, Compress, TopK, Unique and NonMaxSuppression.
//
// Elements are compared through one ElementOrder per tensor, which holds
// every element as a value of one of four kinds (float dtypes as double,
// which represents each of them exactly; signed ints and bools as int64;
// unsigned ints as uint64; strings as they are). Ordering a double the way
// the interpreter orders the element's own compute type gives the same
// order, and one comparison function serves every dtype, which keeps the
// runtime library small. The algorithms (stable sort, partial sort with an
// index tie-break, greedy suppression) are the interpreter's, so the results
// agree bit for bit.
#include "runtime/cpu/host_ops.h"

#include "runtime/cpu/host_ops_util.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln::runtime::host {

namespace {

using namespace detail;

// Three-way comparison of the elements of one tensor: NaN above every
// number and equal to NaN (numpy's order for unique, and TopK's: NaN is the
// largest value and never among the smallest).
class ElementOrder {
public:
  explicit ElementOrder(const Tensor &t) : dtype_(t.dtype()) {
    const int64_t n = t.numel();
    if (dtype_ == DType::String) {
      strings_ = t.data<std::string>();
    } else if (isFloat(dtype_)) {
      floats_.resize(n);
      for (int64_t i = 0; i < n; ++i) floats_[i] = t.getDouble(i);
    } else if (isUnsignedInt(dtype_)) {
      unsigneds_.resize(n);
      for (int64_t i = 0; i < n; ++i) unsigneds_[i] = static_cast<uint64_t>(t.getInt(i));
    } else {
      signeds_.resize(n);
      for (int64_t i = 0; i < n; ++i) signeds_[i] = t.getInt(i);
    }
  }

  int compare(int64_t a, int64_t b) const {
    if (strings_) return threeWay(strings_[a], strings_[b]);
    if (!floats_.empty()) {
      const double x = floats_[a], y = floats_[b];
      const bool nx = std::isnan(x), ny = std::isnan(y);
      if (nx || ny) return nx == ny ? 0 : nx ? 1 : -1;
      return threeWay(x, y);
    }
    if (!unsigneds_.empty()) return threeWay(unsigneds_[a], unsigneds_[b]);
    return threeWay(signeds_[a], signeds_[b]);
  }

private:
  template <class T> static int threeWay(const T &x, const T &y) { return x < y ? -1 : y < x; }

  DType dtype_;
  const std::string *strings_ = nullptr;
  std::vector<double> floats_;
  std::vector<uint64_t> unsigneds_;
  std::vector<int64_t> signeds_;
};

Tensor int64Vector(const std::vector<int64_t> &v) {
  return Tensor::fromVector(v, {static_cast<int64_t>(v.size())});
}

// ---- Unique ------------------------------------------------------------------------

// The input as `dim` items along the axis: item i is made of the elements
// (o * dim + i) * inner + j for o < outer, j < inner.
int compareItems(const ElementOrder &order, const AxisSplit &v, int64_t a, int64_t b) {
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t j = 0; j < v.inner; ++j)
      if (int c = order.compare((o * v.dim + a) * v.inner + j, (o * v.dim + b) * v.inner + j))
        return c;
  return 0;
}

struct UniqueGroups {
  std::vector<int64_t> first;   // per unique item: its first occurrence
  std::vector<int64_t> counts;  // per unique item
  std::vector<int64_t> inverse; // per input item: its unique item
};

UniqueGroups groupItems(const ElementOrder &order, const AxisSplit &v, bool sorted) {
  std::vector<int64_t> byValue(v.dim);
  std::iota(byValue.begin(), byValue.end(), 0);
  // A stable sort keeps the first occurrence first within each run.
  std::stable_sort(byValue.begin(), byValue.end(),
                   [&](int64_t a, int64_t b) { return compareItems(order, v, a, b) < 0; });
  UniqueGroups g;
  std::vector<int64_t> groupOf(v.dim);
  for (int64_t k = 0; k < v.dim; ++k) {
    const int64_t item = byValue[k];
    if (k == 0 || compareItems(order, v, byValue[k - 1], item) != 0) {
      g.first.push_back(item);
      g.counts.push_back(0);
    }
    groupOf[item] = static_cast<int64_t>(g.first.size()) - 1;
    ++g.counts.back();
  }
  // rank[s]: the output position of sorted group s.
  std::vector<int64_t> rank(g.first.size());
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> byFirst = rank;
    std::sort(byFirst.begin(), byFirst.end(),
              [&](int64_t a, int64_t b) { return g.first[a] < g.first[b]; });
    UniqueGroups reordered;
    for (size_t pos = 0; pos < byFirst.size(); ++pos) {
      rank[byFirst[pos]] = static_cast<int64_t>(pos);
      reordered.first.push_back(g.first[byFirst[pos]]);
      reordered.counts.push_back(g.counts[byFirst[pos]]);
    }
    g.first = std::move(reordered.first);
    g.counts = std::move(reordered.counts);
  }
  for (int64_t item = 0; item < v.dim; ++item) g.inverse.push_back(rank[groupOf[item]]);
  return g;
}

// ---- NonMaxSuppression -----------------------------------------------------------------

// A box as [min, max] extents on both axes.
struct Box {
  float yMin, xMin, yMax, xMax;
};

// Box i: corners [y1, x1, y2, x2] in any order, or with centerPoint,
// [x_center, y_center, width, height].
Box readBox(const float *data, int64_t i, bool centerPoint) {
  const float *b = data + 4 * i;
  if (centerPoint) {
    float halfW = b[2] / 2, halfH = b[3] / 2;
    return {b[1] - halfH, b[0] - halfW, b[1] + halfH, b[0] + halfW};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// True when the IoU of a and b exceeds the threshold, computed in float in
// the interpreter's (and ONNX Runtime's) order of operations. Empty
// intersections and degenerate boxes never suppress.
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

// The optional one-value input, or null when absent (undefined or empty).
Expected<const Tensor *> optionalScalar(const Tensor &t, const char *name) {
  if (!t.defined() || t.numel() == 0) return nullptr;
  if (t.numel() != 1)
    return makeError(name, " must hold one value, got shape ", shapeToString(t.shape()));
  return &t;
}

std::vector<float> toFloats(const Tensor &t) {
  std::vector<float> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<float>(t.getDouble(i));
  return v;
}

// The boxes kept for one (batch, class), in selection order: candidates
// above the score threshold by descending score (ties: lower index first),
// each kept unless it overlaps a kept one too much.
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

} // namespace

// ---- NonZero and Compress ------------------------------------------------------------

Expected<Tensor> nonZero(const Tensor &x) {
  std::vector<bool> mask = nonZeroMask(x);
  const int64_t count = std::count(mask.begin(), mask.end(), true);
  // numpy treats a scalar as a 1-d tensor of one element here.
  const Shape64 shape = x.rank() == 0 ? Shape64{1} : x.shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(DType::I64, {rank, count}));
  int64_t *dst = out.data<int64_t>(), k = 0;
  forEachIndex(shape, [&](int64_t i, const std::vector<int64_t> &index) {
    if (!mask[i]) return;
    for (int64_t a = 0; a < rank; ++a) dst[a * count + k] = index[a];
    ++k;
  });
  return out;
}

Expected<Tensor> compress(const Tensor &x, const Tensor &condition, const CompressParams &params) {
  if (condition.rank() != 1)
    return makeError("condition must be 1-d, got ", shapeToString(condition.shape()));
  std::vector<bool> keep = nonZeroMask(condition);
  // Without an axis the input is flattened first.
  const Tensor src = params.hasAxis ? x : x.reshaped({x.numel()});
  int64_t axis = 0;
  if (params.hasAxis) {
    KILN_ASSIGN_OR_RETURN(axis, resolveAxis(params.axis, x.rank()));
  }
  const AxisSplit s = splitAt(src.shape(), axis);
  std::vector<int64_t> chosen;
  for (int64_t i = 0; i < static_cast<int64_t>(keep.size()); ++i) {
    if (!keep[i]) continue;
    if (i >= s.dim) return makeError("condition selects index ", i, " beyond axis size ", s.dim);
    chosen.push_back(i);
  }
  Shape64 shape = src.shape();
  shape[axis] = static_cast<int64_t>(chosen.size());
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(x.dtype(), shape));
  int64_t to = 0;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t c : chosen) {
      copyElements(src, (o * s.dim + c) * s.inner, out, to, s.inner);
      to += s.inner;
    }
  return out;
}

// ---- TopK and Unique ----------------------------------------------------------------------

Expected<std::vector<Tensor>> topK(const Tensor &x, const Tensor &kTensor,
                                   const TopKParams &params) {
  if (x.rank() == 0) return makeError("input must have rank at least 1");
  KILN_RETURN_IF_ERROR(checkNotString(x, "input"));
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(params.axis, x.rank()));
  KILN_ASSIGN_OR_RETURN(int64_t k, readOneInt(kTensor, "k"));
  if (k < 0 || k > x.dim(axis))
    return makeError("k = ", k, " is out of range for axis ", axis, " of size ", x.dim(axis));
  const AxisSplit s = splitAt(x.shape(), axis);
  Shape64 shape = x.shape();
  shape[axis] = k;
  KILN_ASSIGN_OR_RETURN(Tensor values, newTensor(x.dtype(), shape));
  KILN_ASSIGN_OR_RETURN(Tensor indices, newTensor(DType::I64, shape));
  const ElementOrder order(x);
  std::vector<int64_t> row(s.dim);
  for (int64_t a = 0; a < s.outer; ++a)
    for (int64_t b = 0; b < s.inner; ++b) {
      const int64_t inBase = a * s.dim * s.inner + b, outBase = a * k * s.inner + b;
      std::iota(row.begin(), row.end(), int64_t(0));
      std::partial_sort(row.begin(), row.begin() + k, row.end(), [&](int64_t i, int64_t j) {
        int c = order.compare(inBase + i * s.inner, inBase + j * s.inner);
        return c != 0 ? (params.largest ? c > 0 : c < 0) : i < j;
      });
      for (int64_t j = 0; j < k; ++j) {
        copyElements(x, inBase + row[j] * s.inner, values, outBase + j * s.inner, 1);
        indices.data<int64_t>()[outBase + j * s.inner] = row[j];
      }
    }
  return std::vector<Tensor>{std::move(values), std::move(indices)};
}

Expected<std::vector<Tensor>> unique(const Tensor &x, const UniqueParams &params) {
  // Without an axis the flattened elements are the items.
  const Tensor src = params.hasAxis ? x : x.reshaped({x.numel()});
  int64_t axis = 0;
  if (params.hasAxis) {
    KILN_ASSIGN_OR_RETURN(axis, resolveAxis(params.axis, x.rank()));
  }
  const AxisSplit v = splitAt(src.shape(), axis);
  const UniqueGroups g = groupItems(ElementOrder(src), v, params.sorted);
  Shape64 shape = src.shape();
  shape[axis] = static_cast<int64_t>(g.first.size());
  KILN_ASSIGN_OR_RETURN(Tensor y, newTensor(x.dtype(), shape));
  int64_t to = 0;
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t item : g.first) {
      copyElements(src, (o * v.dim + item) * v.inner, y, to, v.inner);
      to += v.inner;
    }
  return std::vector<Tensor>{std::move(y), int64Vector(g.first), int64Vector(g.inverse),
                             int64Vector(g.counts)};
}

// ---- NonMaxSuppression ----------------------------------------------------------------------

Expected<Tensor> nonMaxSuppression(const Tensor &boxesT, const Tensor &scoresT,
                                   const Tensor &maxOutputBoxesPerClass,
                                   const Tensor &iouThreshold, const Tensor &scoreThreshold,
                                   const NonMaxSuppressionParams &params) {
  if (!isFloat(boxesT.dtype()) || !isFloat(scoresT.dtype()))
    return makeError("boxes and scores must be float tensors");
  if (boxesT.rank() != 3 || boxesT.dim(2) != 4)
    return makeError("boxes must have shape [batches, boxes, 4], got ",
                     shapeToString(boxesT.shape()));
  if (scoresT.rank() != 3)
    return makeError("scores must have shape [batches, classes, boxes], got ",
                     shapeToString(scoresT.shape()));
  const int64_t batches = boxesT.dim(0), numBoxes = boxesT.dim(1), classes = scoresT.dim(1);
  if (scoresT.dim(0) != batches || scoresT.dim(2) != numBoxes)
    return makeError("scores shape ", shapeToString(scoresT.shape()),
                     " does not match boxes shape ", shapeToString(boxesT.shape()));
  KILN_ASSIGN_OR_RETURN(const Tensor *maxT,
                        optionalScalar(maxOutputBoxesPerClass, "max_output_boxes_per_class"));
  KILN_ASSIGN_OR_RETURN(const Tensor *iouT, optionalScalar(iouThreshold, "iou_threshold"));
  KILN_ASSIGN_OR_RETURN(const Tensor *scoreT, optionalScalar(scoreThreshold, "score_threshold"));
  if (maxT && !isInt(maxT->dtype()))
    return makeError("max_output_boxes_per_class must be an integer tensor");
  // Absent or non-positive max_output_boxes_per_class selects nothing.
  const int64_t maxKeep = maxT ? std::max<int64_t>(maxT->getInt(0), 0) : 0;
  const float iou = iouT ? static_cast<float>(iouT->getDouble(0)) : 0.0f;
  const float minScore = scoreT ? static_cast<float>(scoreT->getDouble(0)) : 0.0f;

  const std::vector<float> boxes = toFloats(boxesT), scores = toFloats(scoresT);
  std::vector<int64_t> selected; // (batch, class, box) triples
  for (int64_t n = 0; n < batches; ++n)
    for (int64_t c = 0; c < classes; ++c)
      for (int64_t i : selectBoxes(boxes.data() + n * numBoxes * 4,
                                   scores.data() + (n * classes + c) * numBoxes,
                                   numBoxes, params.centerPointBox, maxKeep, iou,
                                   scoreT ? &minScore : nullptr))
        selected.insert(selected.end(), {n, c, i});
  return Tensor::fromVector(selected, {static_cast<int64_t>(selected.size()) / 3, 3});
}

} // namespace kiln::runtime::host
