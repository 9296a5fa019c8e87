#include "runtime/cpu/host_op_step.h"

namespace kiln::cpu {

namespace host = runtime::host;

Status HostOpStep::prepare() {
  if (static_cast<int>(op_) < 0 || op_ > Op::Relu || in_.empty() || in_[0] < 0 || out_ < 0 ||
      in_.size() > 8 || static_cast<int>(padMode_) < 0 || padMode_ > host::PadMode::Wrap)
    return makeError(label_, ": corrupt host op");
  const size_t required = op_ == Op::Reshape || op_ == Op::Gather || op_ == Op::Pad ? 2 : 1;
  for (size_t i = 0; i < required; ++i)
    if (i >= in_.size() || in_[i] < 0) return makeError(label_, ": missing input ", i);
  reads.clear();
  for (int s : in_)
    if (s >= 0) reads.push_back(s);
  writes = {out_};
  return Status::success();
}

Status HostOpStep::run(Frame &frame, ExecContext &) const {
  if (op_ == Op::Identity) { // any value, sequences and optionals too
    frame.slots[out_] = frame.slots[in_[0]];
    return Status::success();
  }
  Tensor none;
  std::vector<const Tensor *> x(4, &none);
  for (size_t i = 0; i < in_.size() && i < x.size(); ++i) {
    if (in_[i] < 0) continue;
    const RtValue &v = frame.slots[in_[i]];
    if (!v.isTensor() || !v.tensor.defined())
      return makeError(label_, ": input ", i, " is ", v.describe(), ", not a tensor");
    x[i] = &v.tensor;
  }
  Expected<Tensor> y = Error{"unknown op"};
  switch (op_) {
  case Op::Reshape: y = host::reshape(*x[0], *x[1], {allowZero_}); break;
  case Op::Flatten: y = host::flatten(*x[0], {axis_}); break;
  case Op::Squeeze: y = host::squeeze(*x[0], *x[1], {axes_}); break;
  case Op::Unsqueeze: y = host::unsqueeze(*x[0], *x[1], {axes_}); break;
  case Op::Identity: y = host::identity(*x[0]); break;
  case Op::Shape: {
    host::ShapeParams p{start_, std::nullopt};
    if (hasEnd_) p.end = end_;
    y = host::shapeOf(*x[0], p);
    break;
  }
  case Op::Size: y = host::sizeOf(*x[0]); break;
  case Op::Gather: y = host::gather(*x[0], *x[1], {axis_}); break;
  case Op::ConstantOfShape: y = host::constantOfShape(*x[0], {value_}); break;
  case Op::Pad: y = host::pad(*x[0], *x[1], *x[2], *x[3], {padMode_}); break;
  case Op::ReduceMean:
    y = host::reduceMean(*x[0], *x[1], {axes_, keepDims_, noopWithEmptyAxes_});
    break;
  case Op::Relu: y = host::relu(*x[0]); break;
  }
  if (!y.ok()) return makeError(label_, ": ", y.error().message);
  frame.slots[out_] = RtValue(std::move(*y));
  return Status::success();
}

} // namespace kiln::cpu
