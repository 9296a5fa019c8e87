#include "backend/cpu/conv_step.h"

#include "passes/fusion.h"

namespace kiln::cpu {

namespace {

std::vector<int64_t> intsOr(const Node &n, const char *name, std::vector<int64_t> def) {
  std::vector<int64_t> v = n.getInts(name);
  return v.empty() ? def : v;
}

} // namespace

Expected<std::unique_ptr<ConvStep>> ConvStep::create(const Node &node, std::vector<int> inputSlots,
                                                     int outputSlot) {
  std::unique_ptr<ConvStep> s(new ConvStep());
  const Node *conv = &node;
  if (node.op() == OpKind::Fused) conv = node.getGraph("body")->nodes().front().get();
  if (conv->op() != OpKind::Conv) return Error{"not a conv"};
  // The weights and bias as the outer graph holds them.
  const Value *wv = node.op() == OpKind::Fused ? node.input(1) : conv->input(1);
  const Value *bv = conv->input(2) ? (node.op() == OpKind::Fused ? node.input(2) : conv->input(2))
                                   : nullptr;
  const Tensor *w = constantOf(wv);
  const Tensor *b = bv ? constantOf(bv) : nullptr;
  if (!w || w->dtype() != DType::F32 || (bv && (!b || b->dtype() != DType::F32)))
    return Error{"conv needs constant f32 weights"};
  if (w->rank() != 3 && w->rank() != 4) return Error{"only 1-D and 2-D convs"};
  const Value *x = conv->input(0);
  if (!x->type().isTensor() || x->type().dtype() != DType::F32) return Error{"conv input not f32"};
  const std::string autoPad = conv->getString("auto_pad");
  if (!autoPad.empty() && autoPad != "NOTSET" && autoPad != "VALID")
    return Error{"auto_pad SAME_* depends on the input size"};

  s->oneD_ = w->rank() == 3;
  const int spatial = s->oneD_ ? 1 : 2;
  kernels::ConvShape &cs = s->shape_;
  cs.groups = conv->getInt("group");
  cs.K = w->dim(0);
  cs.C = w->dim(1) * cs.groups;
  cs.R = s->oneD_ ? 1 : w->dim(2);
  cs.S = w->dim(w->rank() - 1);
  std::vector<int64_t> strides = intsOr(*conv, "strides", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> dil = intsOr(*conv, "dilations", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> pads = autoPad == "VALID" ? std::vector<int64_t>(2 * spatial, 0)
                                                 : intsOr(*conv, "pads", std::vector<int64_t>(2 * spatial, 0));
  if (static_cast<int>(strides.size()) != spatial || static_cast<int>(dil.size()) != spatial ||
      static_cast<int>(pads.size()) != 2 * spatial)
    return Error{"conv attributes do not match its rank"};
  if (s->oneD_) {
    cs.strideW = strides[0];
    cs.dilationW = dil[0];
    cs.padLeft = pads[0];
    cs.padRight = pads[1];
  } else {
    cs.strideH = strides[0];
    cs.strideW = strides[1];
    cs.dilationH = dil[0];
    cs.dilationW = dil[1];
    cs.padTop = pads[0];
    cs.padLeft = pads[1];
    cs.padBottom = pads[2];
    cs.padRight = pads[3];
  }
  // A stand-in spatial size that fits the kernel, so the shape is valid for
  // packing; each run sets the real one.
  cs.H = (cs.R - 1) * cs.dilationH + 1;
  cs.W = (cs.S - 1) * cs.dilationW + 1;
  if (!cs.valid()) return Error{"conv attributes are invalid"};
  if (node.op() == OpKind::Fused) {
    KILN_ASSIGN_OR_RETURN(s->plan_, planEpilogue(node, cs.K, /*rowChannels=*/true));
  }
  s->packed_ = kernels::PackedConv::pack(cs, w->data<float>(), b ? b->data<float>() : nullptr);
  // Only 1-D convs get the small-output path: that is where a handful of
  // output pixels occurs (framing convs); packing it for every 2-D conv
  // would double their weights and their load time for nothing.
  if (cs.groups == 1 && s->oneD_) {
    const int64_t taps = cs.C * cs.R * cs.S;
    s->transposedWeights_ =
        kernels::PackedB::pack(/*transB=*/true, taps, cs.K, w->data<float>(), taps);
    if (b) s->bias_.assign(b->data<float>(), b->data<float>() + cs.K);
  }
  s->label_ = "conv " + node.describe();
  s->in_ = std::move(inputSlots);
  s->out_ = outputSlot;
  s->reads.push_back(s->in_[0]);
  if (s->plan_.residualInput >= 0) s->reads.push_back(s->in_[s->plan_.residualInput]);
  s->writes = {outputSlot};
  return s;
}

void ConvStep::runSmallSpatial(const kernels::ConvShape &s, const float *x, float *y,
                               const kernels::Epilogue &ep, ExecContext &ctx) const {
  const int64_t P = s.outH() * s.outW(), taps = s.C * s.R * s.S;
  std::vector<float> col(static_cast<size_t>(s.N * P * taps)), yt(static_cast<size_t>(s.N * P * s.K));
  // im2col, one row of taps per output pixel (zeros in the padding).
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t oh = 0; oh < s.outH(); ++oh)
      for (int64_t ow = 0; ow < s.outW(); ++ow) {
        float *row = col.data() + ((n * s.outH() + oh) * s.outW() + ow) * taps;
        for (int64_t c = 0; c < s.C; ++c)
          for (int64_t r = 0; r < s.R; ++r) {
            const int64_t ih = oh * s.strideH - s.padTop + r * s.dilationH;
            for (int64_t q = 0; q < s.S; ++q) {
              const int64_t iw = ow * s.strideW - s.padLeft + q * s.dilationW;
              const bool inside = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
              *row++ = inside ? x[((n * s.C + c) * s.H + ih) * s.W + iw] : 0.0f;
            }
          }
      }
  kernels::GemmOptions opts;
  opts.pool = ctx.pool;
  kernels::sgemmPackedB(false, s.N * P, 1.0f, col.data(), taps, *transposedWeights_, 0.0f,
                        yt.data(), s.K, opts);
  // Back to [N][K][P], then bias and the epilogue on each image's K x P.
  for (int64_t n = 0; n < s.N; ++n) {
    float *img = y + n * s.K * P;
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t p = 0; p < P; ++p)
        img[k * P + p] = yt[(n * P + p) * s.K + k] + (bias_.empty() ? 0.0f : bias_[k]);
    kernels::Epilogue imageEp = ep;
    for (int i = 0; i < imageEp.count; ++i)
      if (imageEp.ops[i].kind == kernels::EpilogueKind::kAddTensor)
        imageEp.ops[i].data += n * s.K * P;
    if (!imageEp.empty()) kernels::applyEpilogue(imageEp, img, P, 0, 0, s.K, P);
  }
}

Status ConvStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &xv = frame.slots[in_[0]];
  if (!xv.isTensor() || xv.tensor.dtype() != DType::F32)
    return makeError(label_, ": input must be an f32 tensor, got ", xv.describe());
  const Tensor &x = xv.tensor;
  const int64_t rank = oneD_ ? 3 : 4;
  if (x.rank() != rank || x.dim(1) != shape_.C)
    return makeError(label_, ": input of shape ", shapeToString(x.shape()), " does not match ",
                     shape_.C, " input channels (rank ", rank, ")");
  kernels::ConvShape s = shape_;
  s.N = x.dim(0);
  s.H = oneD_ ? 1 : x.dim(2);
  s.W = x.dim(rank - 1);
  if (!s.valid())
    return makeError(label_, ": input of shape ", shapeToString(x.shape()),
                     " is too small for the kernel");
  Shape64 outShape = oneD_ ? Shape64{s.N, s.K, s.outW()} : Shape64{s.N, s.K, s.outH(), s.outW()};
  Tensor y = frame.allocate(out_, DType::F32, outShape);
  kernels::Epilogue ep = plan_.epilogue;
  if (plan_.residualOp >= 0) {
    const RtValue &r = frame.slots[in_[plan_.residualInput]];
    if (!r.isTensor() || r.tensor.dtype() != DType::F32 || r.tensor.shape() != outShape)
      return makeError(label_, ": residual must be f32", shapeToString(outShape), ", got ",
                       r.describe());
    ep.ops[plan_.residualOp].data = r.tensor.data<float>();
    ep.ops[plan_.residualOp].ld = s.outH() * s.outW();
  }
  if (s.N > 0 && transposedWeights_ && s.outH() * s.outW() <= kSmallPixels)
    runSmallSpatial(s, x.data<float>(), y.data<float>(), ep, ctx);
  else if (s.N > 0)
    packed_.run(s, x.data<float>(), y.data<float>(), ep, nullptr, ctx.pool);
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
