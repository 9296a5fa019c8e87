#include "runtime/cpu/host_op_step.h"

namespace kiln::cpu {

namespace host = runtime::host;

namespace {

using Op = HostOpStep::Op;
constexpr int kMany = 1 << 16; // SequenceConstruct's inputs

// Inputs (the first minIn must be present) and outputs of each op.
struct Arity {
  int minIn, maxIn, maxOut;
};

Arity arityOf(Op op) {
  switch (op) {
  case Op::Reshape: case Op::Gather: case Op::Compress: case Op::TopK: case Op::CastLike:
  case Op::SequenceAt:
    return {2, 2, op == Op::TopK ? 2 : 1};
  case Op::Squeeze: case Op::Unsqueeze: case Op::ReduceMean: case Op::SequenceErase:
  case Op::SplitToSequence:
    return {1, 2, 1};
  case Op::Pad: return {2, 4, 1};
  case Op::Unique: return {1, 1, 4};
  case Op::NonMaxSuppression: return {2, 5, 1};
  case Op::SequenceConstruct: return {1, kMany, 1};
  case Op::SequenceEmpty: return {0, 0, 1};
  case Op::SequenceInsert: return {2, 3, 1};
  case Op::Optional: case Op::OptionalHasElement: return {0, 1, 1};
  default: return {1, 1, 1};
  }
}

// Ops that take sequences or optionals (or pass any value on).
bool takesAnyValue(Op op) {
  return op == Op::Identity || op >= Op::SequenceConstruct;
}

Expected<const Tensor *> tensorOf(const RtValue *v, size_t i) {
  if (!v) return nullptr;
  if (!v->isTensor() || !v->tensor.defined())
    return makeError("input ", i, " is ", v->describe(), ", not a tensor");
  return &v->tensor;
}

std::vector<RtValue> one(Tensor t) {
  std::vector<RtValue> out;
  out.emplace_back(std::move(t));
  return out;
}

std::vector<RtValue> many(std::vector<Tensor> ts) {
  return std::vector<RtValue>(std::make_move_iterator(ts.begin()),
                              std::make_move_iterator(ts.end()));
}

} // namespace

Status HostOpStep::prepare() {
  const bool enumsValid =
      static_cast<int>(padMode_) >= 0 && padMode_ <= host::PadMode::Wrap &&
      normalizer_.caseChange <= host::CaseChange::Upper && tfIdf_.mode <= host::TfIdfMode::TFIDF &&
      random_.kind <= host::RandomKind::Bernoulli;
  if (op_ > Op::OptionalGetElement || !enumsValid)
    return makeError(label_, ": corrupt host op");
  const Arity arity = arityOf(op_);
  if (static_cast<int>(in_.size()) < arity.minIn || static_cast<int>(in_.size()) > arity.maxIn ||
      out_.empty() || static_cast<int>(out_.size()) > arity.maxOut)
    return makeError(label_, ": ", in_.size(), " inputs and ", out_.size(),
                     " outputs do not fit the op");
  for (int i = 0; i < arity.minIn; ++i)
    if (in_[i] < 0) return makeError(label_, ": missing input ", i);
  reads.clear();
  for (int s : in_)
    if (s >= 0) reads.push_back(s);
  writes.clear();
  for (int s : out_)
    if (s >= 0) writes.push_back(s);
  return Status::success();
}

bool HostOpStep::readsElementsOf(size_t i) const {
  switch (op_) {
  case Op::Reshape:
  case Op::Squeeze:
  case Op::Unsqueeze:
    return i != 0; // the shape or axes
  case Op::Flatten:
  case Op::Identity:
  case Op::Shape:
  case Op::Size:
    return false;
  default:
    return true;
  }
}

Status HostOpStep::run(Frame &frame, ExecContext &) const {
  std::vector<const RtValue *> x;
  for (int s : in_) x.push_back(s >= 0 ? &frame.slots[s] : nullptr);
  Expected<std::vector<RtValue>> y = takesAnyValue(op_) ? runOnValues(x) : runOnTensors(x);
  if (!y.ok()) return makeError(label_, ": ", y.error().message);
  for (size_t i = 0; i < out_.size() && i < y->size(); ++i)
    if (out_[i] >= 0) frame.slots[out_[i]] = std::move((*y)[i]);
  return Status::success();
}

Expected<std::vector<RtValue>>
HostOpStep::runOnTensors(const std::vector<const RtValue *> &v) const {
  Tensor none;
  std::vector<const Tensor *> x(5, &none);
  for (size_t i = 0; i < v.size() && i < x.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor *t, tensorOf(v[i], i));
    if (t) x[i] = t;
  }
  Expected<Tensor> y = Error{"unknown op"};
  switch (op_) {
  case Op::Reshape: y = host::reshape(*x[0], *x[1], {allowZero_}); break;
  case Op::Flatten: y = host::flatten(*x[0], {axis_}); break;
  case Op::Squeeze: y = host::squeeze(*x[0], *x[1], {axes_}); break;
  case Op::Unsqueeze: y = host::unsqueeze(*x[0], *x[1], {axes_}); break;
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
  case Op::NonZero: y = host::nonZero(*x[0]); break;
  case Op::Compress: y = host::compress(*x[0], *x[1], compress_); break;
  case Op::TopK: {
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> r, host::topK(*x[0], *x[1], topK_));
    return many(std::move(r));
  }
  case Op::Unique: {
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> r, host::unique(*x[0], unique_));
    return many(std::move(r));
  }
  case Op::NonMaxSuppression:
    y = host::nonMaxSuppression(*x[0], *x[1], *x[2], *x[3], *x[4], nms_);
    break;
  case Op::Cast: y = host::castStrings(*x[0], castTo_); break;
  case Op::CastLike: y = host::castStrings(*x[0], x[1]->dtype()); break;
  case Op::StringNormalizer: y = host::stringNormalizer(*x[0], normalizer_); break;
  case Op::TfIdfVectorizer: y = host::tfIdfVectorizer(*x[0], tfIdf_); break;
  case Op::Det: y = host::det(*x[0]); break;
  case Op::Random: y = host::randomLike(*x[0], random_); break;
  default: break;
  }
  if (!y.ok()) return y.error();
  return one(std::move(*y));
}

Expected<std::vector<RtValue>>
HostOpStep::runOnValues(const std::vector<const RtValue *> &x) const {
  static const Tensor none;
  // An optional tensor input (a position, a split): undefined when absent.
  auto tensorAt = [&](size_t i) -> Expected<const Tensor *> {
    if (i >= x.size() || !x[i]) return &none;
    return tensorOf(x[i], i);
  };
  Expected<RtValue> y = Error{"unknown op"};
  switch (op_) {
  case Op::Identity: y = *x[0]; break; // any value, sequences and optionals too
  case Op::SequenceConstruct: {
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < x.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(const Tensor *t, tensorAt(i));
      tensors.push_back(*t);
    }
    y = host::sequenceConstruct(tensors);
    break;
  }
  case Op::SequenceEmpty: y = RtValue::ofSequence({}); break;
  case Op::SequenceAt:
  case Op::SequenceErase: {
    KILN_ASSIGN_OR_RETURN(const Tensor *position, tensorAt(1));
    y = op_ == Op::SequenceAt ? host::sequenceAt(*x[0], *position)
                              : host::sequenceErase(*x[0], *position);
    break;
  }
  case Op::SequenceInsert: {
    KILN_ASSIGN_OR_RETURN(const Tensor *t, tensorAt(1));
    KILN_ASSIGN_OR_RETURN(const Tensor *position, tensorAt(2));
    y = host::sequenceInsert(*x[0], *t, *position);
    break;
  }
  case Op::SequenceLength: y = host::sequenceLength(*x[0]); break;
  case Op::SplitToSequence: {
    KILN_ASSIGN_OR_RETURN(const Tensor *input, tensorAt(0));
    KILN_ASSIGN_OR_RETURN(const Tensor *split, tensorAt(1));
    y = host::splitToSequence(*input, *split, split_);
    break;
  }
  case Op::ConcatFromSequence: y = host::concatFromSequence(*x[0], concat_); break;
  case Op::Optional: y = host::makeOptional(x.empty() ? nullptr : x[0]); break;
  case Op::OptionalHasElement: y = host::optionalHasElement(x.empty() ? nullptr : x[0]); break;
  case Op::OptionalGetElement: y = host::optionalGetElement(*x[0]); break;
  default: break;
  }
  if (!y.ok()) return y.error();
  std::vector<RtValue> out;
  out.push_back(std::move(*y));
  return out;
}

} // namespace kiln::cpu
