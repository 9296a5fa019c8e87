#include "runtime/cpu/loop_steps.h"

#include "runtime/cpu/host_ops.h"

#include <algorithm>
#include <limits>

namespace kiln::cpu {

namespace host = runtime::host;

namespace {

// A condition held in a one-element tensor; any numeric element is read as
// "non-zero is true".
Expected<bool> readCondition(const RtValue &v, const char *what) {
  if (!v.isTensor() || !v.tensor.defined())
    return makeError(what, " must be a tensor, got ", v.describe());
  if (v.tensor.dtype() == DType::String) return makeError(what, " must be bool, got string");
  if (v.tensor.numel() != 1)
    return makeError(what, " must hold one element, got shape ", shapeToString(v.tensor.shape()));
  return v.tensor.getDouble(0) != 0;
}

// Collects the per-iteration values of one scan output: tensors of one
// dtype and shape, since they are stacked afterwards.
Status appendScanValue(std::vector<Tensor> &collected, RtValue v, size_t k) {
  if (!v.isTensor()) return makeError("scan output ", k, " must be a tensor, got ", v.describe());
  if (!collected.empty() &&
      (collected[0].shape() != v.tensor.shape() || collected[0].dtype() != v.tensor.dtype()))
    return makeError("scan output ", k, " changed from ", RtValue(collected[0]).describe(), " to ",
                     v.describe(), " between iterations");
  collected.push_back(std::move(v.tensor));
  return Status::success();
}

// The stacked scan output k along `axis` (against rank + 1; negative
// counts from the back), reversed when asked; zero iterations give an empty
// tensor shaped from the declared type.
Expected<Tensor> finishScanOutput(std::vector<Tensor> parts, const ScanOutputType &type,
                                  int64_t axis, bool reverse, size_t k) {
  const int64_t rank = parts.empty() ? std::max<int64_t>(type.rank, 0) : parts[0].rank();
  if (axis < -rank - 1 || axis > rank)
    return makeError("scan output ", k, ": axis ", axis, " is out of range for rank ", rank + 1);
  if (axis < 0) axis += rank + 1;
  if (parts.empty()) {
    Shape64 shape = type.staticDims ? type.dims : Shape64{};
    shape.insert(shape.begin() + std::min<int64_t>(axis, shape.size()), 0);
    return Tensor(type.dtype, shape);
  }
  if (reverse) std::reverse(parts.begin(), parts.end());
  return host::stackAlongNewAxis(parts, axis);
}

} // namespace

// ---- BodyStep ------------------------------------------------------------------------

Expected<std::vector<RtValue>> BodyStep::runBody(Frame &frame, std::vector<RtValue> inputs,
                                                 ExecContext &ctx) const {
  Frame sub;
  sub.slots.resize(body_->numSlots);
  for (const auto &[parentSlot, slot] : body_->captures) sub.slots[slot] = frame.slots[parentSlot];
  for (size_t i = 0; i < inputs.size(); ++i) sub.slots[body_->inputSlots[i]] = std::move(inputs[i]);
  auto outs = body_->run(sub, ctx);
  if (!outs.ok()) return makeError(label_, ": body: ", outs.error().message);
  return outs;
}

Status BodyStep::checkBody(size_t numInputs, size_t numOutputs) {
  if (!body_) return makeError(label_, ": no body");
  if (body_->inputSlots.size() != numInputs || body_->outputSlots.size() != numOutputs)
    return makeError(label_, ": the body takes ", body_->inputSlots.size(), " inputs and gives ",
                     body_->outputSlots.size(), " outputs, expected ", numInputs, " and ",
                     numOutputs);
  reads.clear();
  for (int s : in_)
    if (s >= 0) reads.push_back(s);
  for (const auto &c : body_->captures) reads.push_back(c.first);
  writes.clear();
  for (int s : out_)
    if (s >= 0) writes.push_back(s);
  return Status::success();
}

// ---- Loop ------------------------------------------------------------------------------

LoopStep::LoopStep(std::string label, std::vector<int> in, std::vector<int> out,
                   std::vector<ScanOutputType> scanTypes)
    : scanTypes_(std::move(scanTypes)) {
  label_ = std::move(label);
  in_ = std::move(in);
  out_ = std::move(out);
}

Status LoopStep::prepare() {
  if (in_.size() < 2 || out_.size() + 2 < in_.size() ||
      scanTypes_.size() != out_.size() + 2 - in_.size())
    return makeError(label_, ": ", in_.size(), " inputs and ", out_.size(),
                     " outputs do not fit a loop");
  return checkBody(in_.size(), out_.size() + 1);
}

Status LoopStep::run(Frame &frame, ExecContext &ctx) const {
  const size_t numCarried = in_.size() - 2, numScan = scanTypes_.size();
  int64_t maxTrips = std::numeric_limits<int64_t>::max();
  if (in_[0] >= 0) {
    const RtValue &m = frame.slots[in_[0]];
    if (!m.isTensor() || !isInt(m.tensor.dtype()) || m.tensor.numel() != 1)
      return makeError(label_, ": max trip count must be a one-element integer tensor, got ",
                       m.describe());
    maxTrips = m.tensor.getInt(0);
  }
  bool cond = true;
  if (in_[1] >= 0) {
    Expected<bool> c = readCondition(frame.slots[in_[1]], "condition");
    if (!c.ok()) return makeError(label_, ": ", c.error().message);
    cond = *c;
  }
  std::vector<RtValue> carried;
  for (size_t i = 0; i < numCarried; ++i) {
    if (in_[2 + i] < 0) return makeError(label_, ": loop-carried input ", i, " is missing");
    carried.push_back(frame.slots[in_[2 + i]]);
  }
  std::vector<std::vector<Tensor>> scans(numScan);
  for (int64_t iter = 0; iter < maxTrips && cond; ++iter) {
    std::vector<RtValue> in;
    in.emplace_back(Tensor::scalar<int64_t>(iter));
    in.emplace_back(Tensor::scalar<bool>(cond));
    for (RtValue &v : carried) in.push_back(std::move(v));
    KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs, runBody(frame, std::move(in), ctx));
    Expected<bool> c = readCondition(outs[0], "the body's condition output");
    if (!c.ok()) return makeError(label_, ": ", c.error().message);
    cond = *c;
    for (size_t i = 0; i < numCarried; ++i) carried[i] = std::move(outs[1 + i]);
    for (size_t k = 0; k < numScan; ++k)
      if (Status s = appendScanValue(scans[k], std::move(outs[1 + numCarried + k]), k); !s.ok())
        return makeError(label_, ": ", s.error().message);
  }
  for (size_t i = 0; i < numCarried; ++i)
    if (out_[i] >= 0) frame.slots[out_[i]] = std::move(carried[i]);
  for (size_t k = 0; k < numScan; ++k) {
    Expected<Tensor> t = finishScanOutput(std::move(scans[k]), scanTypes_[k], 0, false, k);
    if (!t.ok()) return makeError(label_, ": ", t.error().message);
    if (out_[numCarried + k] >= 0) frame.slots[out_[numCarried + k]] = std::move(*t);
  }
  return Status::success();
}

// ---- Scan ------------------------------------------------------------------------------

ScanStep::ScanStep(std::string label, std::vector<int> in, std::vector<int> out, Axes axes,
                   std::vector<ScanOutputType> scanTypes)
    : axes_(std::move(axes)), scanTypes_(std::move(scanTypes)) {
  label_ = std::move(label);
  in_ = std::move(in);
  out_ = std::move(out);
}

Status ScanStep::prepare() {
  const int64_t numScanIn = axes_.numScanInputs;
  const int64_t numState = static_cast<int64_t>(in_.size()) - numScanIn;
  const int64_t numScanOut = static_cast<int64_t>(out_.size()) - numState;
  auto sized = [](const std::vector<int64_t> &v, int64_t n) {
    return static_cast<int64_t>(v.size()) == n;
  };
  auto flags = [](const std::vector<int64_t> &v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0 || x == 1; });
  };
  if (numScanIn < 1 || numState < 0 || numScanOut < 0 || !sized(axes_.inAxes, numScanIn) ||
      !sized(axes_.inReverse, numScanIn) || !sized(axes_.outAxes, numScanOut) ||
      !sized(axes_.outReverse, numScanOut) ||
      static_cast<int64_t>(scanTypes_.size()) != numScanOut || !flags(axes_.inReverse) ||
      !flags(axes_.outReverse))
    return makeError(label_, ": ", in_.size(), " inputs, ", out_.size(), " outputs and ",
                     numScanIn, " scan inputs do not fit a scan");
  return checkBody(in_.size(), out_.size());
}

Status ScanStep::run(Frame &frame, ExecContext &ctx) const {
  const size_t numScanIn = static_cast<size_t>(axes_.numScanInputs);
  const size_t numState = in_.size() - numScanIn, numScanOut = out_.size() - numState;
  std::vector<RtValue> states;
  for (size_t i = 0; i < numState; ++i) {
    if (in_[i] < 0) return makeError(label_, ": state input ", i, " is missing");
    states.push_back(frame.slots[in_[i]]);
  }
  // The scan inputs, their axes resolved, and the common length.
  std::vector<const Tensor *> xs;
  std::vector<int64_t> axes;
  int64_t length = 0;
  for (size_t j = 0; j < numScanIn; ++j) {
    const int slot = in_[numState + j];
    if (slot < 0 || !frame.slots[slot].isTensor() || !frame.slots[slot].tensor.defined())
      return makeError(label_, ": scan input ", j, " must be a tensor");
    const Tensor &x = frame.slots[slot].tensor;
    const int64_t a = axes_.inAxes[j];
    if (a < -x.rank() || a >= x.rank())
      return makeError(label_, ": axis ", a, " is out of range for rank ", x.rank());
    axes.push_back(a < 0 ? a + x.rank() : a);
    const int64_t len = x.dim(axes.back());
    if (j > 0 && len != length)
      return makeError(label_, ": scan input ", j, " has ", len, " steps along axis ", axes.back(),
                       ", scan input 0 has ", length);
    length = len;
    xs.push_back(&x);
  }
  std::vector<std::vector<Tensor>> scans(numScanOut);
  for (int64_t t = 0; t < length; ++t) {
    std::vector<RtValue> in;
    for (RtValue &v : states) in.push_back(std::move(v));
    for (size_t j = 0; j < numScanIn; ++j) {
      const int64_t index = axes_.inReverse[j] ? length - 1 - t : t;
      Expected<Tensor> slice = host::sliceAt(*xs[j], axes[j], index);
      if (!slice.ok()) return makeError(label_, ": ", slice.error().message);
      in.emplace_back(std::move(*slice));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs, runBody(frame, std::move(in), ctx));
    for (size_t i = 0; i < numState; ++i) states[i] = std::move(outs[i]);
    for (size_t k = 0; k < numScanOut; ++k)
      if (Status s = appendScanValue(scans[k], std::move(outs[numState + k]), k); !s.ok())
        return makeError(label_, ": ", s.error().message);
  }
  for (size_t i = 0; i < numState; ++i)
    if (out_[i] >= 0) frame.slots[out_[i]] = std::move(states[i]);
  for (size_t k = 0; k < numScanOut; ++k) {
    Expected<Tensor> t = finishScanOutput(std::move(scans[k]), scanTypes_[k], axes_.outAxes[k],
                                          axes_.outReverse[k] != 0, k);
    if (!t.ok()) return makeError(label_, ": ", t.error().message);
    if (out_[numState + k] >= 0) frame.slots[out_[numState + k]] = std::move(*t);
  }
  return Status::success();
}

// ---- SequenceMap ---------------------------------------------------------------------------

SequenceMapStep::SequenceMapStep(std::string label, std::vector<int> in, std::vector<int> out) {
  label_ = std::move(label);
  in_ = std::move(in);
  out_ = std::move(out);
}

Status SequenceMapStep::prepare() {
  if (in_.empty() || in_[0] < 0 || out_.empty())
    return makeError(label_, ": a sequence map needs a sequence input and an output");
  return checkBody(in_.size(), out_.size());
}

Status SequenceMapStep::run(Frame &frame, ExecContext &ctx) const {
  const RtValue &first = frame.slots[in_[0]];
  if (!first.isSequence())
    return makeError(label_, ": input 0 must be a sequence, got ", first.describe());
  const size_t length = first.sequence.size();
  for (size_t j = 1; j < in_.size(); ++j) {
    if (in_[j] < 0) return makeError(label_, ": input ", j, " is missing");
    const RtValue &v = frame.slots[in_[j]];
    if (v.isSequence() && v.sequence.size() != length)
      return makeError(label_, ": input ", j, " is a sequence of ", v.sequence.size(),
                       " tensors, input 0 has ", length);
  }
  std::vector<std::vector<Tensor>> results(out_.size());
  for (size_t it = 0; it < length; ++it) {
    std::vector<RtValue> in;
    for (int slot : in_) {
      const RtValue &v = frame.slots[slot];
      in.push_back(v.isSequence() ? RtValue(v.sequence[it]) : v);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs, runBody(frame, std::move(in), ctx));
    for (size_t k = 0; k < out_.size(); ++k) {
      if (!outs[k].isTensor())
        return makeError(label_, ": body output ", k, " must be a tensor, got ",
                         outs[k].describe());
      results[k].push_back(std::move(outs[k].tensor));
    }
  }
  for (size_t k = 0; k < out_.size(); ++k)
    if (out_[k] >= 0) frame.slots[out_[k]] = RtValue::ofSequence(std::move(results[k]));
  return Status::success();
}

} // namespace kiln::cpu
