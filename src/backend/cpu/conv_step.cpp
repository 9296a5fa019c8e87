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
  const Tensor *w = fusion::constantOf(wv);
  const Tensor *b = bv ? fusion::constantOf(bv) : nullptr;
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
  s->label_ = "conv " + node.describe();
  s->in_ = std::move(inputSlots);
  s->out_ = outputSlot;
  s->reads.push_back(s->in_[0]);
  if (s->plan_.residualInput >= 0) s->reads.push_back(s->in_[s->plan_.residualInput]);
  s->writes = {outputSlot};
  return s;
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
  if (s.N > 0) packed_.run(s, x.data<float>(), y.data<float>(), ep, nullptr, ctx.pool);
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
