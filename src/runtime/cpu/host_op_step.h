// Ops run on the host by the runtime's own small kernels (host_ops.h): what
// is inherently dynamic or tiny (DESIGN.md "How an op gets compiled", way 3).
// Shape arithmetic (Shape, Size, Gather, ConstantOfShape), views (Reshape,
// Flatten, Squeeze, Unsqueeze, Identity), Pad, f32 ReduceMean/Relu where the
// generated kernels do not apply (unknown ranks inside If branches), outputs
// sized by values (NonZero, Compress, TopK, Unique, NonMaxSuppression),
// strings (Cast to/from strings, StringNormalizer, TfIdfVectorizer), Det,
// the random ops, and every sequence and optional op. They keep compiled
// programs free of the interpreter, so an artifact runs on the runtime
// library alone.
#pragma once

#include "runtime/cpu/host_ops.h"
#include "runtime/cpu/program.h"

namespace kiln {
class Node;
enum class OpKind : uint16_t;
}

namespace kiln::cpu {

class HostOpStep : public Step {
public:
  // Stored in artifacts: append only.
  enum class Op : uint16_t {
    Reshape, Flatten, Squeeze, Unsqueeze, Identity, Shape, Size, Gather, ConstantOfShape, Pad,
    ReduceMean, Relu,
    NonZero, Compress, TopK, Unique, NonMaxSuppression,
    Cast, CastLike, StringNormalizer, TfIdfVectorizer, Det, Random,
    SequenceConstruct, SequenceEmpty, SequenceAt, SequenceInsert, SequenceErase, SequenceLength,
    SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement,
  };

  // Whether create() takes some form of `op` (for `kiln ops`).
  static bool covers(OpKind op);
  // The step for `node` when its op and attributes are covered; null
  // otherwise (backend/cpu/host_op_factory.cpp). `in` and `out` are the
  // node's slots, -1 for an absent input or an output nobody reads.
  static std::unique_ptr<HostOpStep> create(const Node &node, const std::vector<int> &in,
                                            const std::vector<int> &out);

  Status run(Frame &frame, ExecContext &ctx) const override;
  std::string describe() const override { return label_; }
  StepKind kind() const override { return StepKind::HostOp; }
  const std::vector<int> &inputSlots() const { return in_; }
  // Whether run() reads input `i`'s elements, not only its shape: views
  // (Reshape's data, Flatten, Squeeze, Unsqueeze, Identity) and shape
  // queries (Shape, Size) do not, so a GPU target need not wait for the
  // kernel writing that input before running them.
  bool readsElementsOf(size_t i) const;
  template <class A> void io(A &a) {
    a(label_, op_, in_, out_, allowZero_, axis_, start_, hasEnd_, end_, axes_, keepDims_,
      noopWithEmptyAxes_, padMode_, value_);
    switch (op_) { // the parameters of the newer ops, only where they apply
    case Op::Compress: return a(compress_);
    case Op::TopK: return a(topK_);
    case Op::Unique: return a(unique_);
    case Op::NonMaxSuppression: return a(nms_);
    case Op::Cast: return a(castTo_);
    case Op::StringNormalizer: return a(normalizer_);
    case Op::TfIdfVectorizer: return a(tfIdf_);
    case Op::Random: return a(random_);
    case Op::SplitToSequence: return a(split_);
    case Op::ConcatFromSequence: return a(concat_);
    default: return;
    }
  }
  Status prepare(); // checks the fields, sets reads/writes

private:
  // Ops on tensors, and ops on any value (sequences, optionals, Identity).
  Expected<std::vector<RtValue>> runOnTensors(const std::vector<const RtValue *> &x) const;
  Expected<std::vector<RtValue>> runOnValues(const std::vector<const RtValue *> &x) const;

  std::string label_;
  Op op_ = Op::Identity;
  std::vector<int> in_;  // -1: absent optional input
  std::vector<int> out_; // -1: an output nobody reads
  bool allowZero_ = false;          // Reshape
  int64_t axis_ = 0;                // Flatten, Gather
  int64_t start_ = 0, end_ = 0;     // Shape
  bool hasEnd_ = false;             // Shape
  std::vector<int64_t> axes_;       // Squeeze, Unsqueeze, ReduceMean (attribute forms)
  bool keepDims_ = true, noopWithEmptyAxes_ = false; // ReduceMean
  runtime::host::PadMode padMode_ = runtime::host::PadMode::Constant;
  Tensor value_;                    // ConstantOfShape
  runtime::host::CompressParams compress_;
  runtime::host::TopKParams topK_;
  runtime::host::UniqueParams unique_;
  runtime::host::NonMaxSuppressionParams nms_;
  DType castTo_ = DType::F32; // Cast
  runtime::host::StringNormalizerParams normalizer_;
  runtime::host::TfIdfParams tfIdf_;
  runtime::host::RandomParams random_;
  runtime::host::SplitToSequenceParams split_;
  runtime::host::ConcatFromSequenceParams concat_;
};

} // namespace kiln::cpu
