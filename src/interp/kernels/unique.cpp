// Interpreter kernel for Unique: the distinct elements of a tensor (or the
// distinct slices along an axis), with the index of each one's first
// occurrence, the inverse mapping and the counts. Sorted output orders the
// items as numpy.unique does (lexicographically for slices); unsorted output
// keeps the order of first occurrence.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>
#include <numeric>

namespace kiln {

namespace {

// The input viewed as `count` items along the axis: item i is made of the
// elements (o * count + i) * inner + j for o < outer, j < inner.
struct ItemView {
  int64_t outer = 1, count = 1, inner = 1;
};

// Three-way comparison of items a and b, element by element.
template <class T> int compareItems(const T *p, const ItemView &v, int64_t a, int64_t b) {
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t j = 0; j < v.inner; ++j) {
      const T &x = p[(o * v.count + a) * v.inner + j];
      const T &y = p[(o * v.count + b) * v.inner + j];
      if constexpr (std::is_same_v<T, std::string>) {
        if (x != y) return x < y ? -1 : 1;
      } else {
        auto cx = static_cast<ComputeType<T>>(x), cy = static_cast<ComputeType<T>>(y);
        // NaNs sort last and equal each other (numpy.unique's order), which
        // also keeps the ordering strict-weak for std::stable_sort.
        if constexpr (std::is_floating_point_v<ComputeType<T>>) {
          bool nx = std::isnan(cx), ny = std::isnan(cy);
          if (nx || ny) {
            if (nx != ny) return nx ? 1 : -1;
            continue;
          }
        }
        if (cx < cy) return -1;
        if (cy < cx) return 1;
      }
    }
  return 0;
}

struct UniqueGroups {
  std::vector<int64_t> first;   // per unique item: first occurrence
  std::vector<int64_t> counts;  // per unique item
  std::vector<int64_t> inverse; // per input item: its unique item
};

// Groups equal items; unique items are ordered by value when `sorted`,
// else by first occurrence.
template <class T> UniqueGroups groupItems(const T *p, const ItemView &v, bool sorted) {
  std::vector<int64_t> order(v.count);
  std::iota(order.begin(), order.end(), 0);
  // A stable sort keeps the first occurrence first within each run.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return compareItems(p, v, a, b) < 0; });
  UniqueGroups g;
  std::vector<int64_t> groupOf(v.count);
  for (int64_t k = 0; k < v.count; ++k) {
    int64_t item = order[k];
    if (k == 0 || compareItems(p, v, order[k - 1], item) != 0) {
      g.first.push_back(item);
      g.counts.push_back(0);
    }
    groupOf[item] = static_cast<int64_t>(g.first.size()) - 1;
    ++g.counts.back();
  }
  // rank[s] = position of sorted group s in the output order.
  std::vector<int64_t> rank(g.first.size());
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> byFirst(g.first.size());
    std::iota(byFirst.begin(), byFirst.end(), 0);
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
  for (int64_t item = 0; item < v.count; ++item) g.inverse.push_back(rank[groupOf[item]]);
  return g;
}

Tensor int64Vector(const std::vector<int64_t> &v) {
  return Tensor::fromVector(v, {static_cast<int64_t>(v.size())});
}

Status uniqueKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  bool hasAxis = ctx.node().hasAttr("axis");
  // Without an axis the flattened elements are the items.
  Tensor src = hasAxis ? x : x.reshaped({x.numel()});
  int64_t axis = 0;
  if (hasAxis) {
    KILN_ASSIGN_OR_RETURN(axis, resolveAxis(ctx, ctx.node().getInt("axis"), x.rank()));
  }
  ItemView view;
  for (int64_t i = 0; i < src.rank(); ++i) {
    if (i < axis) view.outer *= src.dim(i);
    if (i > axis) view.inner *= src.dim(i);
  }
  view.count = src.dim(axis);
  bool sorted = ctx.node().getInt("sorted") != 0;
  UniqueGroups g;
  visitDType(x.dtype(), [&](auto tag) { g = groupItems(src.data<decltype(tag)>(), view, sorted); });

  int64_t u = static_cast<int64_t>(g.first.size());
  Shape64 shape = src.shape();
  shape[axis] = u;
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t item : g.first)
      for (int64_t j = 0; j < view.inner; ++j)
        offsets.push_back((o * view.count + item) * view.inner + j);
  ctx.setOutput(0, gatherOffsets(src, shape, offsets));
  if (ctx.numOutputs() > 1) ctx.setOutput(1, int64Vector(g.first));
  if (ctx.numOutputs() > 2) ctx.setOutput(2, int64Vector(g.inverse));
  if (ctx.numOutputs() > 3) ctx.setOutput(3, int64Vector(g.counts));
  return Status::success();
}

} // namespace

void registerUniqueKernels(KernelTable &t) {
  t.add(OpKind::Unique, uniqueKernel);
}

} // namespace kiln
