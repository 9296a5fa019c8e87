// Type and shape inference for the ops of ir/ops/nn.def except those of
// infer/rnn.cpp and infer/sampling.cpp: convolutions, pooling,
// normalizations, matrix products, Einsum, Det and the quantize ops. Batch
// and channel dims pass through symbolically; a spatial dim is computed only
// when the input dim is a number (otherwise it is "?"). Attributes that do not
// fit the input's rank make dims unknown rather than failing: the kernels
// report such errors at run time with the values at hand.
#include "ir/infer/families.h"
#include "ir/infer/infer.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace kiln {

namespace {

// ---- windows ------------------------------------------------------------------

// A window's attributes, one entry per spatial axis (empty kernel: unknown).
struct WindowAttrs {
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string autoPad;
  bool ceilMode = false;
  bool valid = true; // false when an attribute has the wrong length
};

std::vector<int64_t> intsOr(const Node &n, const char *name, size_t count, int64_t fill) {
  return n.hasAttr(name) ? n.getInts(name) : std::vector<int64_t>(count, fill);
}

WindowAttrs windowAttrs(const Node &n, size_t rank, std::vector<int64_t> kernel) {
  WindowAttrs w;
  w.kernel = std::move(kernel);
  w.strides = intsOr(n, "strides", rank, 1);
  w.dilations = intsOr(n, "dilations", rank, 1);
  w.pads = intsOr(n, "pads", 2 * rank, 0);
  w.autoPad = n.getString("auto_pad");
  w.ceilMode = n.schema().findAttr("ceil_mode") && n.getInt("ceil_mode") != 0;
  w.valid = w.kernel.size() == rank && w.strides.size() == rank && w.dilations.size() == rank &&
            w.pads.size() == 2 * rank;
  return w;
}

// Dim arithmetic on attribute values is done in 128 bits, where products and
// sums of a few int64 values cannot overflow; a result outside int64 (or
// negative) is an unknown dim.
using Wide = __int128;
Dim wideDim(Wide v) {
  return v >= 0 && v <= INT64_MAX ? Dim(static_cast<int64_t>(v)) : Dim::unknown();
}

// Output size of spatial axis i of a conv or pool (see interp/kernels/window.cpp).
Dim windowOut(const Dim &in, const WindowAttrs &w, size_t i) {
  if (!w.valid || !in.isStatic() || w.strides[i] <= 0 || w.kernel[i] <= 0) return Dim::unknown();
  Wide n = in.value(), s = w.strides[i], span = Wide(w.kernel[i] - 1) * w.dilations[i] + 1;
  if (w.autoPad == "SAME_UPPER" || w.autoPad == "SAME_LOWER") return wideDim((n + s - 1) / s);
  size_t rank = w.kernel.size();
  Wide pb = w.autoPad == "VALID" ? 0 : w.pads[i], pe = w.autoPad == "VALID" ? 0 : w.pads[i + rank];
  Wide room = n + pb + pe - span;
  if (room < 0) return Dim::unknown();
  bool ceil = w.ceilMode && w.autoPad != "VALID";
  Wide out = (ceil ? (room + s - 1) / s : room / s) + 1;
  if (ceil && (out - 1) * s >= n + pb) --out;
  return wideDim(out);
}

// [N, channels, spatial...] for an input shape x of a windowed op.
Shape windowedShape(const Shape &x, const Dim &channels, const WindowAttrs &w) {
  Shape out({x.dims[0], channels});
  for (size_t i = 0; i + 2 < x.dims.size(); ++i) out.dims.push_back(windowOut(x.dims[i + 2], w, i));
  return out;
}

// The spatial kernel dims from kernel_shape, else from static weight dims.
std::vector<int64_t> kernelOf(const Node &n, const Shape &w, size_t rank) {
  if (n.hasAttr("kernel_shape")) return n.getInts("kernel_shape");
  if (!w.rankKnown || w.rank() != static_cast<int64_t>(rank) + 2) return {};
  std::vector<int64_t> k;
  for (size_t i = 2; i < w.dims.size(); ++i) {
    if (!w.dims[i].isStatic()) return {};
    k.push_back(w.dims[i].value());
  }
  return k;
}

// Shape of Conv, ConvInteger and QLinearConv outputs; x and w at xIn, wIn.
Shape convShape(const InferContext &ctx, int xIn, int wIn) {
  const Shape &x = ctx.inputShape(xIn), &w = ctx.inputShape(wIn);
  Dim channels = w.rankKnown && w.rank() >= 1 ? w.dims[0] : Dim::unknown();
  if (!x.rankKnown) {
    if (!w.rankKnown) return Shape::unranked();
    Shape out({Dim::unknown(), channels});
    out.dims.resize(w.dims.size(), Dim::unknown());
    return out;
  }
  if (x.rank() < 3) return Shape::unranked();
  size_t rank = x.dims.size() - 2;
  return windowedShape(x, channels, windowAttrs(ctx.node(), rank, kernelOf(ctx.node(), w, rank)));
}

Status inferConv(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), convShape(ctx, 0, 1));
  return Status::success();
}

Status inferConvInteger(InferContext &ctx) {
  ctx.setOutput(0, DType::I32, convShape(ctx, 0, 1));
  return Status::success();
}

Status inferQLinearConv(InferContext &ctx) {
  DType d = ctx.has(7) ? ctx.inputDType(7) : ctx.inputDType(0);
  ctx.setOutput(0, d, convShape(ctx, 0, 3));
  return Status::success();
}

Status inferConvTranspose(InferContext &ctx) {
  const Node &n = ctx.node();
  const Shape &x = ctx.inputShape(0), &w = ctx.inputShape(1);
  int64_t group = n.getInt("group");
  Dim channels = Dim::unknown();
  if (w.rankKnown && w.rank() >= 2 && w.dims[1].isStatic())
    channels = wideDim(Wide(w.dims[1].value()) * group);
  if (!x.rankKnown || x.rank() < 3) {
    ctx.setOutput(0, ctx.inputDType(0), Shape::unranked());
    return Status::success();
  }
  size_t rank = x.dims.size() - 2;
  WindowAttrs a = windowAttrs(n, rank, kernelOf(n, w, rank));
  std::vector<int64_t> outPad = intsOr(n, "output_padding", rank, 0);
  std::vector<int64_t> outShape = n.getInts("output_shape");
  if (outShape.size() == rank + 2) outShape.erase(outShape.begin(), outShape.begin() + 2);
  Shape out({x.dims[0], channels});
  for (size_t i = 0; i < rank; ++i) {
    const Dim &in = x.dims[i + 2];
    if (outShape.size() == rank) {
      out.dims.push_back(outShape[i]);
    } else if (!a.valid || outPad.size() != rank || !in.isStatic()) {
      out.dims.push_back(Dim::unknown());
    } else if (a.autoPad == "SAME_UPPER" || a.autoPad == "SAME_LOWER") {
      out.dims.push_back(wideDim(Wide(in.value()) * a.strides[i]));
    } else {
      Wide pads = a.autoPad == "VALID" ? 0 : Wide(a.pads[i]) + a.pads[i + rank];
      Wide span = (Wide(a.kernel[i]) - 1) * a.dilations[i] + 1;
      out.dims.push_back(
          wideDim(Wide(a.strides[i]) * (in.value() - 1) + outPad[i] + span - pads));
    }
  }
  ctx.setOutput(0, ctx.inputDType(0), std::move(out));
  return Status::success();
}

// ---- pooling ------------------------------------------------------------------

Shape poolShape(const InferContext &ctx) {
  const Shape &x = ctx.inputShape(0);
  if (!x.rankKnown || x.rank() < 3) return x.rankKnown ? x : Shape::unranked();
  size_t rank = x.dims.size() - 2;
  return windowedShape(x, x.dims[1],
                       windowAttrs(ctx.node(), rank, ctx.node().getInts("kernel_shape")));
}

Status inferPool(InferContext &ctx) {
  Shape s = poolShape(ctx);
  ctx.setOutput(0, ctx.inputDType(0), s);
  if (ctx.numOutputs() > 1) ctx.setOutput(1, DType::I64, s); // MaxPool's Indices
  return Status::success();
}

Status inferGlobalPool(InferContext &ctx) {
  Shape s = ctx.inputShape(0);
  for (size_t i = 2; i < s.dims.size(); ++i) s.dims[i] = Dim(1);
  ctx.setOutput(0, ctx.inputDType(0), std::move(s));
  return Status::success();
}

Status inferMaxUnpool(InferContext &ctx) {
  const Shape &x = ctx.inputShape(0);
  if (ctx.has(2)) {
    if (auto v = ctx.constantInts(2)) {
      ctx.setOutput(0, ctx.inputDType(0), Shape::fromStatic(*v));
      return Status::success();
    }
    Shape s = x.rankKnown ? Shape(std::vector<Dim>(x.dims.size(), Dim::unknown())) : x;
    ctx.setOutput(0, ctx.inputDType(0), std::move(s));
    return Status::success();
  }
  if (!x.rankKnown || x.rank() < 3) {
    ctx.setOutput(0, ctx.inputDType(0), x);
    return Status::success();
  }
  const Node &n = ctx.node();
  size_t rank = x.dims.size() - 2;
  std::vector<int64_t> k = n.getInts("kernel_shape"), s = intsOr(n, "strides", rank, 1),
                       p = intsOr(n, "pads", 2 * rank, 0);
  Shape out({x.dims[0], x.dims[1]});
  for (size_t i = 0; i < rank; ++i) {
    const Dim &in = x.dims[i + 2];
    bool ok = in.isStatic() && k.size() == rank && s.size() == rank && p.size() == 2 * rank;
    out.dims.push_back(ok ? wideDim(Wide(in.value() - 1) * s[i] + k[i] - p[i] - p[i + rank])
                          : Dim::unknown());
  }
  ctx.setOutput(0, ctx.inputDType(0), std::move(out));
  return Status::success();
}

// ---- normalization --------------------------------------------------------------

Status sameAsInput(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), ctx.inputShape(0));
  return Status::success();
}

// Y like X; the optional running mean and var like the mean and var inputs.
Status inferBatchNorm(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), ctx.inputShape(0));
  if (ctx.numOutputs() > 1) ctx.setOutput(1, ctx.inputDType(3), ctx.inputShape(3));
  if (ctx.numOutputs() > 2) ctx.setOutput(2, ctx.inputDType(4), ctx.inputShape(4));
  return Status::success();
}

// Y like X; Mean and InvStdDev keep X's leading dims up to `axis`, then 1s,
// in the stash type.
Status inferLayerNorm(InferContext &ctx) {
  const Shape &x = ctx.inputShape(0);
  ctx.setOutput(0, ctx.inputDType(0), x);
  DType stash =
      dtypeFromOnnx(static_cast<int>(ctx.node().getInt("stash_type"))).value_or(DType::F32);
  if (!isFloat(stash)) stash = DType::F32;
  Shape stats = Shape::unranked();
  if (x.rankKnown) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx.node().getInt("axis"), x.rank()));
    stats = x;
    for (int64_t i = axis; i < x.rank(); ++i) stats.dims[i] = Dim(1);
  }
  for (int i = 1; i < ctx.numOutputs(); ++i) ctx.setOutput(i, stash, stats);
  return Status::success();
}

// ---- matrix products ------------------------------------------------------------

// Numpy matmul of symbolic shapes; unknown where a shape is unranked.
Expected<Shape> matmulShape(const InferContext &ctx, const Shape &a, const Shape &b) {
  if (!a.rankKnown || !b.rankKnown) return Shape::unranked();
  if (a.rank() == 0 || b.rank() == 0) return ctx.error("matmul operands must not be scalars");
  Shape a2 = a, b2 = b;
  if (a.rank() == 1) a2.dims.insert(a2.dims.begin(), Dim(1));
  if (b.rank() == 1) b2.dims.push_back(Dim(1));
  const Dim &ka = a2.dims.back(), &kb = b2.dims[b2.dims.size() - 2];
  if (ka.isStatic() && kb.isStatic() && ka.value() != kb.value())
    return ctx.error("inner dims do not match: A is ", a.str(), ", B is ", b.str());
  Shape aBatch(std::vector<Dim>(a2.dims.begin(), a2.dims.end() - 2));
  Shape bBatch(std::vector<Dim>(b2.dims.begin(), b2.dims.end() - 2));
  auto batch = broadcastShapes(aBatch, bBatch);
  if (!batch.ok()) return ctx.error(batch.error().message);
  Shape out = *batch;
  if (a.rank() > 1) out.dims.push_back(a2.dims[a2.dims.size() - 2]);
  if (b.rank() > 1) out.dims.push_back(b2.dims.back());
  return out;
}

Status inferMatMul(InferContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Shape s, matmulShape(ctx, ctx.inputShape(0), ctx.inputShape(1)));
  ctx.setOutput(0, ctx.inputDType(0), std::move(s));
  return Status::success();
}

Status inferMatMulInteger(InferContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Shape s, matmulShape(ctx, ctx.inputShape(0), ctx.inputShape(1)));
  ctx.setOutput(0, DType::I32, std::move(s));
  return Status::success();
}

Status inferQLinearMatMul(InferContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Shape s, matmulShape(ctx, ctx.inputShape(0), ctx.inputShape(3)));
  ctx.setOutput(0, ctx.inputDType(7), std::move(s));
  return Status::success();
}

Status inferGemm(InferContext &ctx) {
  const Shape &a = ctx.inputShape(0), &b = ctx.inputShape(1);
  bool ta = ctx.node().getInt("transA") != 0, tb = ctx.node().getInt("transB") != 0;
  Dim m = a.rankKnown && a.rank() == 2 ? a.dims[ta ? 1 : 0] : Dim::unknown();
  Dim n = b.rankKnown && b.rank() == 2 ? b.dims[tb ? 0 : 1] : Dim::unknown();
  ctx.setOutput(0, ctx.inputDType(0), Shape({m, n}));
  return Status::success();
}

// Einsum's output dims from the equation; unranked when it cannot be read
// with confidence (the kernel reports bad equations).
Shape einsumShape(const InferContext &ctx) {
  std::string eq;
  for (char ch : ctx.node().getString("equation"))
    if (!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::map<char, Dim> dims;
  std::map<char, int> uses;
  Shape ellipsis; // the broadcast of every operand's ellipsis dims
  bool anyEllipsis = false;
  size_t start = 0;
  for (int op = 0; op < ctx.numInputs(); ++op) {
    size_t comma = lhs.find(',', start);
    std::string term = lhs.substr(start, comma == std::string::npos ? comma : comma - start);
    start = comma == std::string::npos ? lhs.size() : comma + 1;
    const Shape &s = ctx.inputShape(op);
    if (!s.rankKnown) return Shape::unranked();
    size_t dots = term.find("...");
    std::string letters = term;
    if (dots != std::string::npos) letters.erase(dots, 3);
    int64_t ellRank = s.rank() - static_cast<int64_t>(letters.size());
    if (ellRank < 0 || (dots == std::string::npos && ellRank != 0)) return Shape::unranked();
    int64_t axis = 0;
    for (size_t i = 0; i < term.size(); ++i) {
      if (i == dots) {
        Shape part(std::vector<Dim>(s.dims.begin() + axis, s.dims.begin() + axis + ellRank));
        auto b = broadcastShapes(ellipsis, part);
        if (!b.ok()) return Shape::unranked();
        ellipsis = *b;
        anyEllipsis = true;
        axis += ellRank;
        i += 2;
        continue;
      }
      char l = term[i];
      const Dim &d = s.dims[axis++];
      ++uses[l];
      auto it = dims.find(l);
      if (it == dims.end() || (it->second.isStatic() && it->second.value() == 1)) dims[l] = d;
    }
  }
  // Implicit mode: the ellipsis dims, then the labels used once, sorted.
  std::string out = anyEllipsis ? "..." : "";
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {
    for (auto [l, n] : uses)
      if (n == 1) out += l;
  }
  Shape result;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out.compare(i, 3, "...") == 0) {
      result.dims.insert(result.dims.end(), ellipsis.dims.begin(), ellipsis.dims.end());
      i += 2;
      continue;
    }
    auto it = dims.find(out[i]);
    if (it == dims.end()) return Shape::unranked();
    result.dims.push_back(it->second);
  }
  return result;
}

Status inferEinsum(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(0), einsumShape(ctx));
  return Status::success();
}

Status inferDet(InferContext &ctx) {
  Shape s = ctx.inputShape(0);
  if (s.rankKnown) {
    if (s.rank() < 2) return ctx.error("input must have rank 2 or more, got ", s.str());
    s.dims.resize(s.dims.size() - 2);
  }
  ctx.setOutput(0, ctx.inputDType(0), std::move(s));
  return Status::success();
}

// ---- quantization -----------------------------------------------------------------

Status inferQuantize(InferContext &ctx) {
  DType d = DType::U8;
  if (ctx.has(2))
    d = ctx.inputDType(2);
  else if (int64_t code = ctx.node().getInt("output_dtype"); code != 0)
    d = dtypeFromOnnx(static_cast<int>(code)).value_or(DType::U8);
  ctx.setOutput(0, d, ctx.inputShape(0));
  return Status::success();
}

Status inferDequantize(InferContext &ctx) {
  ctx.setOutput(0, ctx.inputDType(1), ctx.inputShape(0));
  return Status::success();
}

Status inferDynamicQuantize(InferContext &ctx) {
  ctx.setOutput(0, DType::U8, ctx.inputShape(0));
  ctx.setOutput(1, DType::F32, Shape());
  ctx.setOutput(2, DType::U8, Shape());
  return Status::success();
}

} // namespace

void registerNnInference(InferTable &t) {
  t.add(OpKind::Conv, inferConv);
  t.add(OpKind::ConvInteger, inferConvInteger);
  t.add(OpKind::QLinearConv, inferQLinearConv);
  t.add(OpKind::ConvTranspose, inferConvTranspose);
  for (OpKind k : {OpKind::AveragePool, OpKind::MaxPool, OpKind::LpPool}) t.add(k, inferPool);
  for (OpKind k : {OpKind::GlobalAveragePool, OpKind::GlobalMaxPool, OpKind::GlobalLpPool})
    t.add(k, inferGlobalPool);
  t.add(OpKind::MaxUnpool, inferMaxUnpool);
  t.add(OpKind::BatchNormalization, inferBatchNorm);
  for (OpKind k : {OpKind::InstanceNormalization, OpKind::GroupNormalization, OpKind::LRN,
                   OpKind::MeanVarianceNormalization})
    t.add(k, sameAsInput);
  t.add(OpKind::LayerNormalization, inferLayerNorm);
  t.add(OpKind::Gemm, inferGemm);
  t.add(OpKind::MatMul, inferMatMul);
  t.add(OpKind::MatMulInteger, inferMatMulInteger);
  t.add(OpKind::QLinearMatMul, inferQLinearMatMul);
  t.add(OpKind::Einsum, inferEinsum);
  t.add(OpKind::Det, inferDet);
  t.add(OpKind::QuantizeLinear, inferQuantize);
  t.add(OpKind::DequantizeLinear, inferDequantize);
  t.add(OpKind::DynamicQuantizeLinear, inferDynamicQuantize);
}

} // namespace kiln
