// The compiler's side of the host ops (runtime/cpu/host_op_step.h): reads a
// node's attributes into the step's parameters. A form the host op does not
// cover (an unknown mode, a Cast between two number types) gives no step,
// so the node compiles another way or is reported as unsupported.
#include "ir/graph.h"
#include "runtime/cpu/host_op_step.h"

namespace kiln::cpu {

namespace {

namespace host = runtime::host;
using Op = HostOpStep::Op;

bool inputIsF32(const Node &node) {
  const Type &t = node.input(0)->type();
  return t.isTensor() && t.dtype() == DType::F32;
}

std::optional<DType> dtypeAttr(const Node &node, const char *name) {
  return dtypeFromOnnx(static_cast<int>(node.getInt(name)));
}

// Ops whose parameters come straight from attributes, one table entry each.
std::optional<Op> plainOp(OpKind op) {
  switch (op) {
  case OpKind::Identity: return Op::Identity;
  case OpKind::Size: return Op::Size;
  case OpKind::NonZero: return Op::NonZero;
  case OpKind::Det: return Op::Det;
  case OpKind::CastLike: return Op::CastLike;
  case OpKind::SequenceConstruct: return Op::SequenceConstruct;
  case OpKind::SequenceEmpty: return Op::SequenceEmpty;
  case OpKind::SequenceAt: return Op::SequenceAt;
  case OpKind::SequenceInsert: return Op::SequenceInsert;
  case OpKind::SequenceErase: return Op::SequenceErase;
  case OpKind::SequenceLength: return Op::SequenceLength;
  case OpKind::Optional: return Op::Optional;
  case OpKind::OptionalHasElement: return Op::OptionalHasElement;
  case OpKind::OptionalGetElement: return Op::OptionalGetElement;
  default: return std::nullopt;
  }
}

bool readTextParams(const Node &node, host::StringNormalizerParams &p) {
  const std::string action = node.getString("case_change_action");
  if (action == "LOWER") p.caseChange = host::CaseChange::Lower;
  else if (action == "UPPER") p.caseChange = host::CaseChange::Upper;
  else if (action != "NONE") return false;
  p.caseSensitive = node.getInt("is_case_sensitive") != 0;
  p.stopwords = node.getStrings("stopwords");
  return true;
}

bool readTfIdfParams(const Node &node, host::TfIdfParams &p) {
  const std::string mode = node.getString("mode");
  if (mode == "TF") p.mode = host::TfIdfMode::TF;
  else if (mode == "IDF") p.mode = host::TfIdfMode::IDF;
  else if (mode == "TFIDF") p.mode = host::TfIdfMode::TFIDF;
  else return false;
  p.minGramLength = node.getInt("min_gram_length");
  p.maxGramLength = node.getInt("max_gram_length");
  p.maxSkipCount = node.getInt("max_skip_count");
  p.ngramCounts = node.getInts("ngram_counts");
  p.ngramIndexes = node.getInts("ngram_indexes");
  p.poolInt64s = node.getInts("pool_int64s");
  p.poolStrings = node.getStrings("pool_strings");
  p.weights = node.getFloats("weights");
  return true;
}

bool readRandomParams(const Node &node, host::RandomParams &p) {
  p.kind = node.op() == OpKind::RandomUniformLike  ? host::RandomKind::Uniform
           : node.op() == OpKind::RandomNormalLike ? host::RandomKind::Normal
                                                   : host::RandomKind::Bernoulli;
  if ((p.hasDType = node.hasAttr("dtype"))) {
    std::optional<DType> d = dtypeAttr(node, "dtype");
    if (!d) return false;
    p.dtype = *d;
  }
  if (p.kind == host::RandomKind::Uniform) {
    p.low = node.getFloat("low");
    p.high = node.getFloat("high");
  } else if (p.kind == host::RandomKind::Normal) {
    p.mean = node.getFloat("mean");
    p.scale = node.getFloat("scale");
  }
  if ((p.hasSeed = node.hasAttr("seed"))) p.seed = node.getFloat("seed");
  return true;
}

} // namespace

bool HostOpStep::covers(OpKind op) {
  if (plainOp(op)) return true;
  switch (op) { // the cases of create() below
  case OpKind::Reshape: case OpKind::Flatten: case OpKind::Squeeze: case OpKind::Unsqueeze:
  case OpKind::Shape: case OpKind::Gather: case OpKind::ConstantOfShape: case OpKind::Pad:
  case OpKind::ReduceMean: case OpKind::Relu: case OpKind::Compress: case OpKind::TopK:
  case OpKind::Unique: case OpKind::NonMaxSuppression: case OpKind::Cast:
  case OpKind::StringNormalizer: case OpKind::TfIdfVectorizer: case OpKind::RandomUniformLike:
  case OpKind::RandomNormalLike: case OpKind::Bernoulli: case OpKind::SplitToSequence:
  case OpKind::ConcatFromSequence:
    return true;
  default:
    return false;
  }
}

std::unique_ptr<HostOpStep> HostOpStep::create(const Node &node, const std::vector<int> &in,
                                               const std::vector<int> &out) {
  using host::PadMode;
  auto s = std::make_unique<HostOpStep>();
  if (!node.regions().empty()) return nullptr;
  if (std::optional<Op> op = plainOp(node.op())) {
    s->op_ = *op;
  } else {
    switch (node.op()) {
    case OpKind::Reshape:
      s->op_ = Op::Reshape;
      s->allowZero_ = node.getInt("allowzero") != 0;
      break;
    case OpKind::Flatten:
      s->op_ = Op::Flatten;
      s->axis_ = node.getInt("axis");
      break;
    case OpKind::Squeeze:
    case OpKind::Unsqueeze:
      s->op_ = node.op() == OpKind::Squeeze ? Op::Squeeze : Op::Unsqueeze;
      s->axes_ = node.getInts("axes");
      break;
    case OpKind::Shape:
      s->op_ = Op::Shape;
      s->start_ = node.getInt("start");
      s->hasEnd_ = node.hasAttr("end");
      if (s->hasEnd_) s->end_ = node.getInt("end");
      break;
    case OpKind::Gather:
      s->op_ = Op::Gather;
      s->axis_ = node.getInt("axis");
      break;
    case OpKind::ConstantOfShape:
      s->op_ = Op::ConstantOfShape;
      if (node.hasAttr("value")) s->value_ = node.getTensor("value");
      break;
    case OpKind::Pad: {
      if (node.hasAttr("pads")) return nullptr; // the opset-2 form
      s->op_ = Op::Pad;
      const std::string mode = node.hasAttr("mode") ? node.getString("mode") : "constant";
      if (mode == "constant") s->padMode_ = PadMode::Constant;
      else if (mode == "reflect") s->padMode_ = PadMode::Reflect;
      else if (mode == "edge") s->padMode_ = PadMode::Edge;
      else if (mode == "wrap") s->padMode_ = PadMode::Wrap;
      else return nullptr;
      break;
    }
    case OpKind::ReduceMean:
      if (!inputIsF32(node)) return nullptr;
      s->op_ = Op::ReduceMean;
      s->axes_ = node.getInts("axes");
      s->keepDims_ = node.getInt("keepdims") != 0;
      s->noopWithEmptyAxes_ = node.getInt("noop_with_empty_axes") != 0;
      break;
    case OpKind::Relu:
      if (!inputIsF32(node)) return nullptr;
      s->op_ = Op::Relu;
      break;
    case OpKind::Compress:
      s->op_ = Op::Compress;
      if ((s->compress_.hasAxis = node.hasAttr("axis"))) s->compress_.axis = node.getInt("axis");
      break;
    case OpKind::TopK:
      s->op_ = Op::TopK;
      s->topK_ = {node.getInt("axis"), node.getInt("largest") != 0, node.getInt("sorted") != 0};
      break;
    case OpKind::Unique:
      s->op_ = Op::Unique;
      if ((s->unique_.hasAxis = node.hasAttr("axis"))) s->unique_.axis = node.getInt("axis");
      s->unique_.sorted = node.getInt("sorted") != 0;
      break;
    case OpKind::NonMaxSuppression: {
      const int64_t center = node.getInt("center_point_box");
      if (center != 0 && center != 1) return nullptr;
      s->op_ = Op::NonMaxSuppression;
      s->nms_.centerPointBox = center == 1;
      break;
    }
    case OpKind::Cast: {
      std::optional<DType> to = dtypeAttr(node, "to");
      if (!to) return nullptr;
      s->op_ = Op::Cast;
      s->castTo_ = *to;
      break;
    }
    case OpKind::StringNormalizer:
      s->op_ = Op::StringNormalizer;
      if (!readTextParams(node, s->normalizer_)) return nullptr;
      break;
    case OpKind::TfIdfVectorizer:
      s->op_ = Op::TfIdfVectorizer;
      if (!readTfIdfParams(node, s->tfIdf_)) return nullptr;
      break;
    case OpKind::RandomUniformLike:
    case OpKind::RandomNormalLike:
    case OpKind::Bernoulli:
      s->op_ = Op::Random;
      if (!readRandomParams(node, s->random_)) return nullptr;
      break;
    case OpKind::SplitToSequence:
      s->op_ = Op::SplitToSequence;
      s->split_ = {node.getInt("axis"), node.getInt("keepdims") != 0};
      break;
    case OpKind::ConcatFromSequence:
      s->op_ = Op::ConcatFromSequence;
      s->concat_ = {node.getInt("axis"), node.getInt("new_axis") != 0};
      break;
    default: return nullptr;
    }
  }
  // Cast and CastLike run here only with strings on one side (numbers
  // compile to generated kernels).
  if (s->op_ == Op::Cast || s->op_ == Op::CastLike) {
    const DType from = node.input(0)->type().dtype();
    const DType to = s->op_ == Op::Cast ? s->castTo_ : node.input(1)->type().dtype();
    if (from != DType::String && to != DType::String) return nullptr;
  }
  s->label_ = "host " + node.describe();
  s->in_ = in;
  s->out_ = out;
  while (!s->in_.empty() && s->in_.back() < 0) s->in_.pop_back(); // trailing absent inputs
  if (!s->prepare().ok()) return nullptr;
  return s;
}

} // namespace kiln::cpu
