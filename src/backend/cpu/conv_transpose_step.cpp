#include "backend/cpu/conv_transpose_step.h"

#include "passes/fusion.h"

#include <algorithm>

namespace kiln::cpu {

namespace {

std::vector<int64_t> intsOr(const Node &n, const char *name, std::vector<int64_t> def) {
  std::vector<int64_t> v = n.getInts(name);
  return v.empty() ? def : v;
}

int64_t floorDiv2(int64_t v) {
  return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

} // namespace

Expected<std::unique_ptr<ConvTransposeStep>>
ConvTransposeStep::create(const Node &node, std::vector<int> inputSlots, int outputSlot) {
  if (node.op() != OpKind::ConvTranspose) return Error{"not a conv transpose"};
  std::unique_ptr<ConvTransposeStep> s(new ConvTransposeStep());
  const Tensor *w = constantOf(node.input(1));
  const Value *bv = node.input(2);
  const Tensor *b = bv ? constantOf(bv) : nullptr;
  if (!w || w->dtype() != DType::F32 || (bv && (!b || b->dtype() != DType::F32)))
    return Error{"conv transpose needs constant f32 weights"};
  if (w->rank() != 3 && w->rank() != 4) return Error{"only 1-D and 2-D conv transposes"};
  const Value *x = node.input(0);
  if (!x->type().isTensor() || x->type().dtype() != DType::F32)
    return Error{"conv transpose input not f32"};
  s->autoPad_ = node.getString("auto_pad");
  if (s->autoPad_ != "NOTSET" && s->autoPad_ != "VALID" && s->autoPad_ != "SAME_UPPER" &&
      s->autoPad_ != "SAME_LOWER")
    return Error{"unknown auto_pad"};

  s->oneD_ = w->rank() == 3;
  const size_t n = s->oneD_ ? 1 : 2;
  s->groups_ = node.getInt("group");
  s->C_ = w->dim(0);
  if (s->groups_ < 1 || s->C_ % s->groups_ != 0) return Error{"group does not divide C"};
  s->K_ = w->dim(1) * s->groups_;
  if (b && b->numel() != s->K_) return Error{"bias does not match the output channels"};
  const Shape64 kernel(w->shape().begin() + 2, w->shape().end());
  if (node.hasAttr("kernel_shape") && node.getInts("kernel_shape") != kernel)
    return Error{"kernel_shape does not match the weights"};
  std::vector<int64_t> strides = intsOr(node, "strides", std::vector<int64_t>(n, 1));
  std::vector<int64_t> dil = intsOr(node, "dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = intsOr(node, "pads", std::vector<int64_t>(2 * n, 0));
  std::vector<int64_t> outPad = intsOr(node, "output_padding", std::vector<int64_t>(n, 0));
  std::vector<int64_t> outShape = node.getInts("output_shape");
  if (outShape.size() == n + 2) outShape.erase(outShape.begin(), outShape.begin() + 2);
  if (strides.size() != n || dil.size() != n || pads.size() != 2 * n || outPad.size() != n ||
      (!outShape.empty() && outShape.size() != n))
    return Error{"conv transpose attributes do not match its rank"};
  for (size_t i = 0; i < n; ++i) {
    Axis a;
    a.kernel = kernel[i], a.stride = strides[i], a.dilation = dil[i];
    a.padBegin = pads[i], a.padEnd = pads[n + i], a.outputPadding = outPad[i];
    a.requestedOut = outShape.empty() ? -1 : outShape[i];
    if (a.kernel < 1 || a.stride < 1 || a.dilation < 1 || (!outShape.empty() && outShape[i] < 0))
      return Error{"conv transpose attributes are invalid"};
    s->axes_.push_back(a);
  }

  // A 1-D op runs with its sequence along H (see conv_transpose.h).
  kernels::ConvTransposeShape ks;
  ks.C = s->C_, ks.K = s->K_, ks.groups = s->groups_;
  ks.R = kernel[0], ks.S = s->oneD_ ? 1 : kernel[1];
  s->packed_ =
      kernels::PackedConvTranspose::pack(ks, w->data<float>(), b ? b->data<float>() : nullptr);
  if (b) s->bias_.assign(b->data<float>(), b->data<float>() + s->K_);
  s->label_ = "conv_transpose " + node.describe();
  s->in_ = inputSlots[0];
  s->out_ = outputSlot;
  s->reads = {s->in_};
  s->writes = {outputSlot};
  return s;
}

std::pair<int64_t, int64_t> ConvTransposeStep::geometry(const Axis &a, int64_t in) const {
  const int64_t full = a.stride * (in - 1) + a.outputPadding + (a.kernel - 1) * a.dilation + 1;
  const bool same = autoPad_ == "SAME_UPPER" || autoPad_ == "SAME_LOWER";
  if (a.requestedOut >= 0 || same) {
    // As the interpreter: the padding makes the full result the requested
    // size; the odd element goes to the end for SAME_UPPER, else the start.
    const int64_t out = a.requestedOut >= 0 ? a.requestedOut : in * a.stride;
    const int64_t total = full - out, half = floorDiv2(total);
    return {out, autoPad_ == "SAME_UPPER" ? half : total - half};
  }
  if (autoPad_ == "VALID") return {full, 0};
  return {full - a.padBegin - a.padEnd, a.padBegin};
}

Status ConvTransposeStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &xv = frame.slots[in_];
  if (!xv.isTensor() || xv.tensor.dtype() != DType::F32)
    return makeError(label_, ": input must be an f32 tensor, got ", xv.describe());
  const Tensor &x = xv.tensor;
  const int64_t rank = oneD_ ? 3 : 4;
  if (x.rank() != rank || x.dim(1) != C_)
    return makeError(label_, ": input of shape ", shapeToString(x.shape()), " does not match ", C_,
                     " input channels (rank ", rank, ")");
  kernels::ConvTransposeShape s;
  s.N = x.dim(0), s.C = C_, s.K = K_, s.groups = groups_;
  Shape64 outShape = {s.N, K_};
  std::vector<std::pair<int64_t, int64_t>> geo;
  for (size_t i = 0; i < axes_.size(); ++i) {
    geo.push_back(geometry(axes_[i], x.dim(2 + int64_t(i))));
    if (geo.back().first < 0)
      return makeError(label_, ": spatial axis ", i, " has negative output size ",
                       geo.back().first);
    outShape.push_back(geo.back().first);
  }
  const Axis &ah = axes_[0];
  s.H = x.dim(2), s.R = ah.kernel, s.strideH = ah.stride, s.dilationH = ah.dilation;
  s.padTop = geo[0].second, s.outH = geo[0].first;
  if (!oneD_) {
    const Axis &aw = axes_[1];
    s.W = x.dim(3), s.S = aw.kernel, s.strideW = aw.stride, s.dilationW = aw.dilation;
    s.padLeft = geo[1].second, s.outW = geo[1].first;
  }
  Tensor y(DType::F32, outShape);
  if (s.valid()) {
    packed_.run(s, x.data<float>(), y.data<float>(), ctx.pool);
  } else if (!bias_.empty() && y.numel() > 0) { // no input pixels: just the bias
    const int64_t plane = y.numel() / (s.N * K_);
    for (int64_t p = 0; p < s.N * K_; ++p)
      std::fill_n(y.data<float>() + p * plane, plane, bias_[size_t(p % K_)]);
  }
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
