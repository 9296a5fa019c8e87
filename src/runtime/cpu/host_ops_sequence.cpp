// Host ops on sequences and optionals (host_ops.h), and the whole-tensor
// copies they share with the loop steps (concatenate, stack, take one slice
// along an axis). A sequence's tensors are shared, never copied, when it is
// built or edited.
#include "runtime/cpu/host_ops.h"

#include "runtime/cpu/host_ops_util.h"

#include <algorithm>

namespace kiln::runtime::host {

namespace {

using namespace detail;

Expected<const std::vector<Tensor> *> sequenceOf(const RtValue &v) {
  if (!v.isSequence()) return makeError("input must be a sequence, got ", v.describe());
  return &v.sequence;
}

// A position resolved against a sequence of `size` tensors: valid positions
// are [-size, size - 1], or [-size, size] when `allowEnd` (insertion).
Expected<int64_t> readPosition(const Tensor &t, size_t size, bool allowEnd) {
  KILN_ASSIGN_OR_RETURN(int64_t pos, readOneInt(t, "position"));
  const int64_t n = static_cast<int64_t>(size);
  if (pos < -n || pos > (allowEnd ? n : n - 1))
    return makeError("position ", pos, " is out of range for a sequence of ", n, " tensors");
  return pos < 0 ? pos + n : pos;
}

// The tensors of one sequence share a dtype.
Status checkElementDType(const std::vector<Tensor> &seq, const Tensor &t) {
  if (!seq.empty() && seq[0].dtype() != t.dtype())
    return makeError("tensor of dtype ", dtypeName(t.dtype()), " does not fit a sequence of ",
                     dtypeName(seq[0].dtype()));
  return Status::success();
}

// The chunk lengths SplitToSequence cuts `dim` elements into.
Expected<std::vector<int64_t>> splitLengths(const Tensor &split, int64_t dim) {
  if (!split.defined()) return std::vector<int64_t>(dim, 1);
  if (!isInt(split.dtype()) || split.rank() > 1)
    return makeError("split must be an integer scalar or 1-d tensor, got ",
                     dtypeName(split.dtype()), shapeToString(split.shape()));
  std::vector<int64_t> lengths(split.numel());
  for (int64_t i = 0; i < split.numel(); ++i) lengths[i] = split.getInt(i);
  if (split.rank() == 0) {
    const int64_t chunk = lengths[0];
    if (chunk <= 0) return makeError("split must be positive, got ", chunk);
    lengths.clear();
    for (int64_t start = 0; start < dim; start += chunk)
      lengths.push_back(std::min(chunk, dim - start));
    return lengths;
  }
  int64_t total = 0;
  for (int64_t l : lengths) {
    if (l < 0) return makeError("split lengths must not be negative, got ", l);
    total += l;
  }
  if (total != dim)
    return makeError("split lengths sum to ", total, ", but the axis has ", dim, " elements");
  return lengths;
}

// Elements [start, start + length) of `t` along `axis`, the axis kept.
Expected<Tensor> sliceAlong(const Tensor &t, int64_t axis, int64_t start, int64_t length) {
  const AxisSplit s = splitAt(t.shape(), axis);
  Shape64 shape = t.shape();
  shape[axis] = length;
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(t.dtype(), shape));
  for (int64_t o = 0; o < s.outer; ++o)
    copyElements(t, (o * s.dim + start) * s.inner, out, o * length * s.inner, length * s.inner);
  return out;
}

} // namespace

// ---- whole-tensor copies ---------------------------------------------------------------

Expected<Tensor> concatAlongAxis(const std::vector<Tensor> &parts, int64_t axis) {
  Shape64 shape = parts[0].shape(); // (parts is never empty)
  shape[axis] = 0;
  for (const Tensor &p : parts) shape[axis] += p.dim(axis);
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(parts[0].dtype(), shape));
  const AxisSplit total = splitAt(shape, axis);
  int64_t offset = 0; // along the axis
  for (const Tensor &p : parts) {
    const int64_t block = p.dim(axis) * total.inner;
    for (int64_t o = 0; o < total.outer; ++o)
      copyElements(p, o * block, out, (o * total.dim + offset) * total.inner, block);
    offset += p.dim(axis);
  }
  return out;
}

Expected<Tensor> stackAlongNewAxis(const std::vector<Tensor> &parts, int64_t axis) {
  std::vector<Tensor> expanded;
  expanded.reserve(parts.size());
  for (const Tensor &p : parts) {
    Shape64 s = p.shape();
    s.insert(s.begin() + axis, 1);
    expanded.push_back(p.reshaped(std::move(s)));
  }
  return concatAlongAxis(expanded, axis);
}

Expected<Tensor> sliceAt(const Tensor &t, int64_t axis, int64_t index) {
  Shape64 shape = t.shape();
  shape.erase(shape.begin() + axis);
  if (axis == 0 && t.dtype() != DType::String) { // contiguous: a view that keeps t alive
    const auto *data = static_cast<const unsigned char *>(t.raw()) +
                       index * numelOf(shape) * dtypeSize(t.dtype());
    return Tensor::view(t.dtype(), std::move(shape), std::make_shared<Tensor>(t), data);
  }
  KILN_ASSIGN_OR_RETURN(Tensor s, sliceAlong(t, axis, index, 1));
  return s.reshaped(std::move(shape));
}

// ---- sequences ---------------------------------------------------------------------------

Expected<RtValue> sequenceConstruct(const std::vector<Tensor> &tensors) {
  std::vector<Tensor> seq;
  for (const Tensor &t : tensors) {
    KILN_RETURN_IF_ERROR(checkElementDType(seq, t));
    seq.push_back(t);
  }
  return RtValue::ofSequence(std::move(seq));
}

Expected<RtValue> sequenceAt(const RtValue &seqValue, const Tensor &position) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceOf(seqValue));
  KILN_ASSIGN_OR_RETURN(int64_t pos, readPosition(position, seq->size(), false));
  return RtValue((*seq)[pos]);
}

Expected<RtValue> sequenceInsert(const RtValue &seqValue, const Tensor &t, const Tensor &position) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceOf(seqValue));
  KILN_RETURN_IF_ERROR(checkElementDType(*seq, t));
  int64_t pos = static_cast<int64_t>(seq->size());
  if (position.defined()) {
    KILN_ASSIGN_OR_RETURN(pos, readPosition(position, seq->size(), true));
  }
  std::vector<Tensor> out = *seq;
  out.insert(out.begin() + pos, t);
  return RtValue::ofSequence(std::move(out));
}

Expected<RtValue> sequenceErase(const RtValue &seqValue, const Tensor &position) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceOf(seqValue));
  if (seq->empty()) return makeError("cannot erase from an empty sequence");
  int64_t pos = static_cast<int64_t>(seq->size()) - 1;
  if (position.defined()) {
    KILN_ASSIGN_OR_RETURN(pos, readPosition(position, seq->size(), false));
  }
  std::vector<Tensor> out = *seq;
  out.erase(out.begin() + pos);
  return RtValue::ofSequence(std::move(out));
}

Expected<RtValue> sequenceLength(const RtValue &seqValue) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceOf(seqValue));
  return RtValue(Tensor::scalar<int64_t>(static_cast<int64_t>(seq->size())));
}

Expected<RtValue> splitToSequence(const Tensor &x, const Tensor &split,
                                  const SplitToSequenceParams &params) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(params.axis, x.rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, splitLengths(split, x.dim(axis)));
  // keepdims=0 drops the axis, but only when no split was given (chunks of 1).
  const bool dropAxis = !split.defined() && !params.keepDims;
  std::vector<Tensor> seq;
  int64_t start = 0;
  for (int64_t len : lengths) {
    KILN_ASSIGN_OR_RETURN(Tensor part, sliceAlong(x, axis, start, len));
    if (dropAxis) {
      Shape64 s = part.shape();
      s.erase(s.begin() + axis);
      part = part.reshaped(std::move(s));
    }
    seq.push_back(std::move(part));
    start += len;
  }
  return RtValue::ofSequence(std::move(seq));
}

Expected<RtValue> concatFromSequence(const RtValue &seqValue,
                                     const ConcatFromSequenceParams &params) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceOf(seqValue));
  if (seq->empty()) return makeError("cannot concatenate an empty sequence");
  const Tensor &first = (*seq)[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        resolveAxis(params.axis, first.rank() + (params.newAxis ? 1 : 0)));
  for (size_t i = 0; i < seq->size(); ++i) {
    const Tensor &t = (*seq)[i];
    bool fits = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (int64_t d = 0; fits && d < t.rank(); ++d)
      fits = t.dim(d) == first.dim(d) || (!params.newAxis && d == axis);
    if (!fits)
      return makeError("sequence element ", i, " (", RtValue(t).describe(),
                       ") does not match element 0 (", RtValue(first).describe(), ")");
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, params.newAxis ? stackAlongNewAxis(*seq, axis)
                                                   : concatAlongAxis(*seq, axis));
  return RtValue(std::move(out));
}

// ---- optionals ------------------------------------------------------------------------------

RtValue makeOptional(const RtValue *value) {
  return RtValue::ofOptional(value ? std::make_shared<RtValue>(*value) : nullptr);
}

RtValue optionalHasElement(const RtValue *value) {
  const bool has = value && (!value->isOptional() || value->inner != nullptr);
  return RtValue(Tensor::scalar<bool>(has));
}

Expected<RtValue> optionalGetElement(const RtValue &value) {
  if (!value.isOptional()) return value;
  if (!value.inner) return makeError("the optional input is empty");
  return *value.inner;
}

} // namespace kiln::runtime::host
