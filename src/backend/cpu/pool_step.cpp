#include "backend/cpu/pool_step.h"

namespace kiln::cpu {

namespace {

// ONNX pooling output size along one axis (ceil_mode drops a last window
// that would start in the end padding).
int64_t outSize(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t padBegin,
                int64_t padEnd, bool ceilMode) {
  const int64_t room = in + padBegin + padEnd - dil * (k - 1) - 1;
  if (room < 0) return 0;
  int64_t out = (ceilMode ? (room + stride - 1) / stride : room / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padBegin) --out;
  return out;
}

} // namespace

Expected<std::unique_ptr<PoolStep>> PoolStep::create(const Node &node, int inputSlot,
                                                     int outputSlot) {
  std::unique_ptr<PoolStep> s(new PoolStep());
  s->op_ = node.op();
  const Value *x = node.input(0);
  if (!x || !x->type().isTensor() || x->type().dtype() != DType::F32 ||
      !x->type().shape().rankKnown)
    return Error{"pool input must be f32 with a known rank"};
  if (node.numOutputs() > 1 && node.output(1)) return Error{"MaxPool indices are not supported"};
  s->rank_ = static_cast<int>(x->type().shape().rank());
  const bool global = s->op_ == OpKind::GlobalAveragePool || s->op_ == OpKind::GlobalMaxPool;
  if (!global) {
    if (s->rank_ != 3 && s->rank_ != 4) return Error{"only 1-D and 2-D pooling"};
    const int spatial = s->rank_ - 2;
    const std::string autoPad = node.getString("auto_pad");
    if (!autoPad.empty() && autoPad != "NOTSET" && autoPad != "VALID")
      return Error{"auto_pad SAME_* depends on the input size"};
    std::vector<int64_t> k = node.getInts("kernel_shape");
    std::vector<int64_t> st = node.getInts("strides"), dil = node.getInts("dilations");
    std::vector<int64_t> pads = node.getInts("pads");
    if (st.empty()) st.assign(spatial, 1);
    if (dil.empty()) dil.assign(spatial, 1);
    if (pads.empty() || autoPad == "VALID") pads.assign(2 * spatial, 0);
    if (static_cast<int>(k.size()) != spatial || static_cast<int>(st.size()) != spatial ||
        static_cast<int>(dil.size()) != spatial || static_cast<int>(pads.size()) != 2 * spatial)
      return Error{"pool attributes do not match the input rank"};
    kernels::PoolShape &w = s->window_;
    if (spatial == 1) {
      w.kernelW = k[0], w.strideW = st[0], w.dilationW = dil[0];
      w.padLeft = pads[0], w.padRight = pads[1];
    } else {
      w.kernelH = k[0], w.kernelW = k[1], w.strideH = st[0], w.strideW = st[1];
      w.dilationH = dil[0], w.dilationW = dil[1];
      w.padTop = pads[0], w.padLeft = pads[1], w.padBottom = pads[2], w.padRight = pads[3];
    }
    s->ceilMode_ = node.getInt("ceil_mode") != 0;
    if (s->op_ == OpKind::AveragePool) s->countIncludePad_ = node.getInt("count_include_pad") != 0;
  } else if (s->rank_ < 3) {
    return Error{"global pooling needs rank >= 3"};
  }
  s->label_ = "pool " + node.describe();
  s->in_ = inputSlot;
  s->out_ = outputSlot;
  s->reads = {inputSlot};
  s->writes = {outputSlot};
  return s;
}

Status PoolStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &xv = frame.slots[in_];
  if (!xv.isTensor() || xv.tensor.dtype() != DType::F32 || xv.tensor.rank() != rank_)
    return makeError(label_, ": input must be an f32 tensor of rank ", rank_, ", got ",
                     xv.describe());
  const Tensor &x = xv.tensor;
  const int64_t N = x.dim(0), C = x.dim(1);
  if (op_ == OpKind::GlobalAveragePool || op_ == OpKind::GlobalMaxPool) {
    int64_t spatial = 1;
    for (int64_t i = 2; i < x.rank(); ++i) spatial *= x.dim(i);
    Shape64 outShape(static_cast<size_t>(x.rank()), 1);
    outShape[0] = N;
    outShape[1] = C;
    Tensor y = frame.allocate(out_, DType::F32, outShape);
    if (op_ == OpKind::GlobalMaxPool && spatial == 0)
      return makeError(label_, ": global max pool of an empty plane");
    if (op_ == OpKind::GlobalAveragePool)
      kernels::globalAveragePool(N, C, spatial, x.data<float>(), y.data<float>(), ctx.pool);
    else
      kernels::globalMaxPool(N, C, spatial, x.data<float>(), y.data<float>(), ctx.pool);
    frame.slots[out_] = RtValue(std::move(y));
    return Status::success();
  }
  kernels::PoolShape s = window_;
  s.N = N;
  s.C = C;
  s.H = rank_ == 3 ? 1 : x.dim(2);
  s.W = x.dim(rank_ - 1);
  s.outH = rank_ == 3 ? 1
                      : outSize(s.H, s.kernelH, s.strideH, s.dilationH, s.padTop, s.padBottom,
                                ceilMode_);
  s.outW = outSize(s.W, s.kernelW, s.strideW, s.dilationW, s.padLeft, s.padRight, ceilMode_);
  if (s.outH <= 0 || s.outW <= 0 || !s.valid())
    return makeError(label_, ": input of shape ", shapeToString(x.shape()),
                     " is too small for the window");
  Shape64 outShape = rank_ == 3 ? Shape64{N, C, s.outW} : Shape64{N, C, s.outH, s.outW};
  Tensor y = frame.allocate(out_, DType::F32, outShape);
  if (op_ == OpKind::MaxPool)
    kernels::maxPool2d(s, x.data<float>(), y.data<float>(), ctx.pool);
  else
    kernels::averagePool2d(s, countIncludePad_, x.data<float>(), y.data<float>(), ctx.pool);
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
