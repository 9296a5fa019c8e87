// Interpreter kernels for sequences of tensors and optionals: construction,
// element access, insertion and removal, splitting a tensor into a sequence
// and concatenating one back, and the Optional wrappers. A sequence is an
// RtValue of Kind::Sequence (its tensors share one dtype); an optional is
// Kind::Optional, empty or holding a tensor or a sequence.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

namespace kiln {

namespace {

// Input i as a sequence; error naming the input otherwise.
Expected<const std::vector<Tensor> *> sequenceInput(const KernelContext &ctx, int i) {
  if (!ctx.has(i) || !ctx.value(i).isSequence())
    return ctx.error("input ", i, " must be a sequence, got ",
                     ctx.has(i) ? ctx.value(i).describe() : std::string("nothing"));
  return &ctx.value(i).sequence;
}

// Input i as a tensor; error naming the input otherwise.
Expected<const Tensor *> tensorInput(const KernelContext &ctx, int i) {
  if (!ctx.has(i) || !ctx.value(i).isTensor())
    return ctx.error("input ", i, " must be a tensor, got ",
                     ctx.has(i) ? ctx.value(i).describe() : std::string("nothing"));
  return &ctx.in(i);
}

// A position input (one-element int32/int64 tensor), resolved against a
// sequence of `size` elements: valid positions are [-size, size - 1], or
// [-size, size] when `allowEnd` (insertion may append).
Expected<int64_t> readPosition(const KernelContext &ctx, int i, size_t size, bool allowEnd) {
  KILN_ASSIGN_OR_RETURN(const Tensor *t, tensorInput(ctx, i));
  if (!isInt(t->dtype()) || t->numel() != 1)
    return ctx.error("position must be a one-element integer tensor, got ", RtValue(*t).describe());
  int64_t n = static_cast<int64_t>(size);
  int64_t pos = t->getInt(0);
  int64_t hi = allowEnd ? n : n - 1;
  if (pos < -n || pos > hi)
    return ctx.error("position ", pos, " is out of range for a sequence of ", n, " tensors");
  return pos < 0 ? pos + n : pos;
}

// Tensors of one sequence must share a dtype.
Status checkElementDType(const KernelContext &ctx, const std::vector<Tensor> &seq,
                         const Tensor &t) {
  if (!seq.empty() && seq[0].dtype() != t.dtype())
    return ctx.error("tensor of dtype ", dtypeName(t.dtype()), " does not fit a sequence of ",
                     dtypeName(seq[0].dtype()));
  return Status::success();
}

Status sequenceConstructKernel(KernelContext &ctx) {
  std::vector<Tensor> seq;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor *t, tensorInput(ctx, i));
    KILN_RETURN_IF_ERROR(checkElementDType(ctx, seq, *t));
    seq.push_back(*t);
  }
  ctx.setOutput(0, RtValue::ofSequence(std::move(seq)));
  return Status::success();
}

// The element dtype (attribute dtype) only matters to the static type.
Status sequenceEmptyKernel(KernelContext &ctx) {
  ctx.setOutput(0, RtValue::ofSequence({}));
  return Status::success();
}

Status sequenceAtKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceInput(ctx, 0));
  KILN_ASSIGN_OR_RETURN(int64_t pos, readPosition(ctx, 1, seq->size(), false));
  ctx.setOutput(0, (*seq)[pos]);
  return Status::success();
}

Status sequenceInsertKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceInput(ctx, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor *t, tensorInput(ctx, 1));
  KILN_RETURN_IF_ERROR(checkElementDType(ctx, *seq, *t));
  int64_t pos = static_cast<int64_t>(seq->size());
  if (ctx.has(2)) {
    KILN_ASSIGN_OR_RETURN(pos, readPosition(ctx, 2, seq->size(), true));
  }
  std::vector<Tensor> out = *seq;
  out.insert(out.begin() + pos, *t);
  ctx.setOutput(0, RtValue::ofSequence(std::move(out)));
  return Status::success();
}

Status sequenceEraseKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceInput(ctx, 0));
  if (seq->empty()) return ctx.error("cannot erase from an empty sequence");
  int64_t pos = static_cast<int64_t>(seq->size()) - 1;
  if (ctx.has(1)) {
    KILN_ASSIGN_OR_RETURN(pos, readPosition(ctx, 1, seq->size(), false));
  }
  std::vector<Tensor> out = *seq;
  out.erase(out.begin() + pos);
  ctx.setOutput(0, RtValue::ofSequence(std::move(out)));
  return Status::success();
}

Status sequenceLengthKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceInput(ctx, 0));
  ctx.setOutput(0, Tensor::scalar<int64_t>(static_cast<int64_t>(seq->size())));
  return Status::success();
}

// ---- SplitToSequence and ConcatFromSequence -------------------------------------

// The chunk lengths SplitToSequence cuts `dim` elements into: ones when the
// split input is absent, equal chunks (the last one shorter) for a scalar,
// the listed lengths for a 1-d split.
Expected<std::vector<int64_t>> splitLengths(const KernelContext &ctx, int64_t dim) {
  if (!ctx.has(1)) return std::vector<int64_t>(dim, 1);
  KILN_ASSIGN_OR_RETURN(const Tensor *split, tensorInput(ctx, 1));
  if (!isInt(split->dtype()) || split->rank() > 1)
    return ctx.error("split must be an integer scalar or 1-d tensor, got ",
                     RtValue(*split).describe());
  std::vector<int64_t> lengths = toInt64s(*split);
  if (split->rank() == 0) {
    int64_t chunk = lengths[0];
    if (chunk <= 0) return ctx.error("split must be positive, got ", chunk);
    lengths.clear();
    for (int64_t start = 0; start < dim; start += chunk)
      lengths.push_back(std::min(chunk, dim - start));
    return lengths;
  }
  int64_t total = 0;
  for (int64_t l : lengths) {
    if (l < 0) return ctx.error("split lengths must not be negative, got ", l);
    total += l;
  }
  if (total != dim)
    return ctx.error("split lengths sum to ", total, ", but the axis has ", dim, " elements");
  return lengths;
}

Status splitToSequenceKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor *x, tensorInput(ctx, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), x->rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, splitLengths(ctx, x->dim(axis)));
  // keepdims=0 drops the axis, but only when no split was given (chunks of 1).
  const bool dropAxis = !ctx.has(1) && ctx.node().getInt("keepdims") == 0;
  std::vector<Tensor> seq;
  int64_t start = 0;
  for (int64_t len : lengths) {
    Tensor part = sliceAlongAxis(*x, axis, start, len);
    if (dropAxis) {
      Shape64 s = part.shape();
      s.erase(s.begin() + axis);
      part = part.reshaped(std::move(s));
    }
    seq.push_back(std::move(part));
    start += len;
  }
  ctx.setOutput(0, RtValue::ofSequence(std::move(seq)));
  return Status::success();
}

// With new_axis=0 the tensors are concatenated along `axis`; with new_axis=1
// they are stacked along a new axis inserted at `axis` (range [-r-1, r]).
Status concatFromSequenceKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor> *seq, sequenceInput(ctx, 0));
  if (seq->empty()) return ctx.error("cannot concatenate an empty sequence");
  const bool newAxis = ctx.node().getInt("new_axis") != 0;
  const Tensor &first = (*seq)[0];
  KILN_ASSIGN_OR_RETURN(
      int64_t axis, resolveAxis(ctx, ctx.node().getInt("axis"), first.rank() + (newAxis ? 1 : 0)));
  std::vector<Tensor> parts;
  for (size_t i = 0; i < seq->size(); ++i) {
    const Tensor &t = (*seq)[i];
    bool fits = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (int64_t d = 0; fits && d < t.rank(); ++d)
      fits = t.dim(d) == first.dim(d) || (!newAxis && d == axis);
    if (!fits)
      return ctx.error("sequence element ", i, " (", RtValue(t).describe(),
                       ") does not match element 0 (", RtValue(first).describe(), ")");
    if (newAxis) {
      Shape64 s = t.shape();
      s.insert(s.begin() + axis, 1);
      parts.push_back(t.reshaped(std::move(s)));
    } else {
      parts.push_back(t);
    }
  }
  ctx.setOutput(0, concatAlongAxis(parts, axis));
  return Status::success();
}

// ---- Optional --------------------------------------------------------------------

Status optionalKernel(KernelContext &ctx) {
  if (!ctx.has(0)) {
    ctx.setOutput(0, RtValue::ofOptional(nullptr));
    return Status::success();
  }
  ctx.setOutput(0, RtValue::ofOptional(std::make_shared<RtValue>(ctx.value(0))));
  return Status::success();
}

// Opset 18 accepts a plain tensor or sequence (always "has an element") and
// an absent input (never has one), besides an optional.
Status optionalHasElementKernel(KernelContext &ctx) {
  bool has = ctx.has(0) && (!ctx.value(0).isOptional() || ctx.value(0).inner != nullptr);
  ctx.setOutput(0, Tensor::scalar<bool>(has));
  return Status::success();
}

// A plain tensor or sequence passes through unchanged (opset 18).
Status optionalGetElementKernel(KernelContext &ctx) {
  const RtValue &v = ctx.value(0);
  if (!v.isOptional()) {
    ctx.setOutput(0, v);
    return Status::success();
  }
  if (!v.inner) return ctx.error("the optional input is empty");
  ctx.setOutput(0, *v.inner);
  return Status::success();
}

} // namespace

void registerSequenceKernels(KernelTable &t) {
  t.add(OpKind::SequenceConstruct, sequenceConstructKernel);
  t.add(OpKind::SequenceEmpty, sequenceEmptyKernel);
  t.add(OpKind::SequenceAt, sequenceAtKernel);
  t.add(OpKind::SequenceInsert, sequenceInsertKernel);
  t.add(OpKind::SequenceErase, sequenceEraseKernel);
  t.add(OpKind::SequenceLength, sequenceLengthKernel);
  t.add(OpKind::SplitToSequence, splitToSequenceKernel);
  t.add(OpKind::ConcatFromSequence, concatFromSequenceKernel);
  t.add(OpKind::Optional, optionalKernel);
  t.add(OpKind::OptionalHasElement, optionalHasElementKernel);
  t.add(OpKind::OptionalGetElement, optionalGetElementKernel);
}

} // namespace kiln
