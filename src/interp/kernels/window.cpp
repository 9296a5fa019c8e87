// Sliding-window geometry for the conv and pool kernels (see window.h): the
// output size and padding of each spatial axis under the four auto_pad modes.
#include "interp/kernels/window.h"

namespace kiln {

Expected<Shape64> spatialAttr(const KernelContext &ctx, const std::string &name, size_t count,
                              int64_t fill) {
  if (!ctx.node().hasAttr(name)) return Shape64(count, fill);
  Shape64 v = ctx.node().getInts(name);
  if (v.size() != count)
    return ctx.error("attribute '", name, "' has ", v.size(), " values, expected ", count);
  return v;
}

Expected<Shape64> spatialDims(const KernelContext &ctx, const Tensor &x, const char *what) {
  if (x.rank() < 3)
    return ctx.error(what, " has shape ", shapeToString(x.shape()),
                     ", expected rank 3 or more ([N, C, spatial...])");
  return Shape64(x.shape().begin() + 2, x.shape().end());
}

namespace {

// Output size of one axis with explicit pads; error when the padded input is
// shorter than the dilated kernel.
Expected<int64_t> explicitOutSize(const KernelContext &ctx, const Window &w, size_t i,
                                  bool ceilMode) {
  int64_t room = w.in[i] + w.padBegin[i] + w.padEnd[i] - w.span(i);
  if (room < 0)
    return ctx.error("spatial axis ", i, ": the padded input (",
                     w.in[i] + w.padBegin[i] + w.padEnd[i],
                     ") is smaller than the dilated kernel (", w.span(i), ")");
  int64_t s = w.strides[i];
  int64_t out = (ceilMode ? (room + s - 1) / s : room / s) + 1;
  // With ceil_mode the last window must still start inside the input or its
  // left padding, as PyTorch and ONNX Runtime define it.
  if (ceilMode && (out - 1) * s >= w.in[i] + w.padBegin[i]) --out;
  return out;
}

} // namespace

Expected<Window> makeWindow(const KernelContext &ctx, const Shape64 &in, const Shape64 &kernel,
                            bool ceilMode) {
  size_t n = in.size();
  Window w;
  w.in = in;
  w.kernel = kernel;
  KILN_ASSIGN_OR_RETURN(w.strides, spatialAttr(ctx, "strides", n, 1));
  KILN_ASSIGN_OR_RETURN(w.dilations, spatialAttr(ctx, "dilations", n, 1));
  KILN_ASSIGN_OR_RETURN(Shape64 pads, spatialAttr(ctx, "pads", 2 * n, 0));
  for (size_t i = 0; i < n; ++i) {
    if (w.kernel[i] <= 0)
      return ctx.error("kernel dims must be > 0, got ", shapeToString(w.kernel));
    if (w.strides[i] <= 0) return ctx.error("strides must be > 0, got ", shapeToString(w.strides));
    if (w.dilations[i] <= 0)
      return ctx.error("dilations must be > 0, got ", shapeToString(w.dilations));
  }
  w.padBegin.assign(pads.begin(), pads.begin() + n);
  w.padEnd.assign(pads.begin() + n, pads.end());
  w.out.resize(n);

  std::string autoPad = ctx.node().getString("auto_pad");
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // Output covers ceil(in / stride) positions; the padding that takes is
    // split evenly, the odd element going to the end (UPPER) or start (LOWER).
    for (size_t i = 0; i < n; ++i) {
      w.out[i] = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(0, (w.out[i] - 1) * w.strides[i] + w.span(i) - in[i]);
      int64_t small = total / 2;
      w.padBegin[i] = autoPad == "SAME_UPPER" ? small : total - small;
      w.padEnd[i] = total - w.padBegin[i];
    }
    return w;
  }
  if (autoPad == "VALID") {
    std::fill(w.padBegin.begin(), w.padBegin.end(), 0);
    std::fill(w.padEnd.begin(), w.padEnd.end(), 0);
  } else if (autoPad != "NOTSET") {
    return ctx.error("unknown auto_pad '", autoPad, "'");
  }
  for (size_t i = 0; i < n; ++i) {
    if (w.padBegin[i] < 0 || w.padEnd[i] < 0)
      return ctx.error("pads must not be negative, got ", shapeToString(pads));
    KILN_ASSIGN_OR_RETURN(w.out[i], explicitOutSize(ctx, w, i, ceilMode && autoPad != "VALID"));
  }
  return w;
}

RowMap mapRows(const Window &w, const Shape64 &from, const Shape64 &to) {
  RowMap map;
  size_t last = w.rank() - 1;
  Shape64 fromRows(from.begin(), from.end() - 1), kRows(w.kernel.begin(), w.kernel.end() - 1);
  map.rowTaps.assign(numelOf(fromRows), {});
  std::vector<int64_t> f(last, 0);
  for (auto &taps : map.rowTaps) {
    std::vector<int64_t> k(last, 0);
    int64_t tap = 0;
    do {
      int64_t row = 0;
      bool inside = true;
      for (size_t d = 0; d < last; ++d) {
        int64_t pos = f[d] * w.strides[d] + k[d] * w.dilations[d] - w.padBegin[d];
        inside = inside && pos >= 0 && pos < to[d];
        row = row * to[d] + pos;
      }
      if (inside) taps.emplace_back(tap, row * to[last]);
      ++tap;
    } while (nextIndex(k, kRows));
    nextIndex(f, fromRows);
  }

  int64_t fromW = from[last], toW = to[last], stride = w.strides[last];
  for (int64_t kx = 0; kx < w.kernel[last]; ++kx) {
    int64_t off = kx * w.dilations[last] - w.padBegin[last];
    map.colOff.push_back(off);
    // Smallest column with col * stride + off >= 0, and one past the largest
    // with col * stride + off < toW.
    map.colLo.push_back(off >= 0 ? 0 : (-off + stride - 1) / stride);
    map.colHi.push_back(toW - 1 - off < 0 ? 0 : std::min(fromW, (toW - 1 - off) / stride + 1));
  }
  return map;
}

} // namespace kiln
