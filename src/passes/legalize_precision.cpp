// legalize-precision: lets f16 and bf16 models compile for a backend whose
// heavy kernels compute in f32 only. Elementwise ops and data movement
// handle 16-bit floats themselves (the Kernel IR computes each 16-bit op in
// f32 and rounds, as ONNX's per-op f16 arithmetic does); the microkernels
// (conv, matmul, pooling, recurrent layers) and the reduction, normalization
// and resampling lowerings take f32. This pass widens exactly those ops, the
// way ONNX Runtime's CPU provider runs f16 models: inputs cast to f32, the op
// in f32, results cast back, so tensors between ops keep their 16-bit type
// and each op rounds its result once.
//
// Before: a verified, topologically sorted model.
// After:  no op of the widened set (isWidened below) reads or produces an
//         f16/bf16 tensor. Each one that did reads f32 versions of its
//         16-bit inputs and produces f32 outputs, each followed by a Cast
//         back to its old type, which takes over the output's name and uses.
//         A 16-bit value read by several widened ops is widened once; a
//         16-bit constant is replaced by an f32 constant at compile time
//         (the cast folded), so weights cost no cast at run time. Other
//         inputs and outputs (indices, shapes, f32 scales) are untouched.
//         Regions are legalized too. The model stays sorted and valid.
//
// Algorithm:
//  1. Walk every graph; for each node of the widened set with a 16-bit
//     float input or output:
//  2. map each 16-bit input to its f32 version: a converted constant, or a
//     Cast node (one per value, reused by later readers in that graph);
//  3. retype each 16-bit output to f32 (renamed NAME_f32) and move its uses
//     and name to a new Cast back to its type;
//  4. erase the 16-bit constants no one reads any more.
#include "passes/pass.h"
#include "passes/rewrite.h"

#include <map>

namespace kiln {
namespace {

bool is16BitFloat(const Value *v) {
  return v && v->type().isTensor() &&
         (v->type().dtype() == DType::F16 || v->type().dtype() == DType::BF16);
}

// The ops whose kernels compute in f32 only (microkernels and the
// non-elementwise lowerings), so a 16-bit model must widen them.
bool isWidened(OpKind op) {
  switch (op) {
  case OpKind::Conv:
  case OpKind::ConvTranspose:
  case OpKind::MatMul:
  case OpKind::Gemm:
  case OpKind::Einsum:
  case OpKind::Det:
  case OpKind::AveragePool:
  case OpKind::MaxPool:
  case OpKind::LpPool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
  case OpKind::GlobalLpPool:
  case OpKind::RNN:
  case OpKind::GRU:
  case OpKind::LSTM:
  case OpKind::BatchNormalization:
  case OpKind::InstanceNormalization:
  case OpKind::LayerNormalization:
  case OpKind::GroupNormalization:
  case OpKind::LRN:
  case OpKind::MeanVarianceNormalization:
  case OpKind::Resize:
  case OpKind::GridSample:
  case OpKind::RoiAlign:
  case OpKind::ReduceSum:
  case OpKind::ReduceMean:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::ReduceProd:
  case OpKind::ReduceL1:
  case OpKind::ReduceL2:
  case OpKind::ReduceLogSum:
  case OpKind::ReduceLogSumExp:
  case OpKind::ReduceSumSquare:
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::Hardmax:
  case OpKind::CumSum:
  case OpKind::DFT:
  case OpKind::STFT:
  case OpKind::NegativeLogLikelihoodLoss:
  case OpKind::SoftmaxCrossEntropyLoss:
    return true;
  default:
    return false;
  }
}

bool needsWidening(const Node &n) {
  if (!isWidened(n.op())) return false;
  for (const Value *v : n.inputs())
    if (is16BitFloat(v)) return true;
  for (const Value *v : n.outputs())
    if (is16BitFloat(v)) return true;
  return false;
}

Node *castNode(Rewriter &rw, Graph &g, Value *in, DType to, const std::string &name) {
  Node *c = rw.create(g, OpKind::Cast, {in}, name);
  c->setAttr("to", Attribute::ofInt(onnxCodeOf(to)));
  c->output(0)->setType(Type::tensor(to, in->type().shape()));
  return c;
}

class LegalizePrecision : public Pass {
public:
  std::string_view name() const override { return "legalize-precision"; }

  Expected<bool> run(Model &model) override {
    Rewriter rw(*model.graph);
    bool changed = false;
    std::vector<Graph *> graphs;
    model.graph->walk([&](Graph &g) { graphs.push_back(&g); });
    for (Graph *g : graphs) changed |= legalize(*g, rw);
    if (!changed) return false;
    rw.eraseDeadLeftovers();
    for (Graph *g : graphs) KILN_RETURN_IF_ERROR(g->sortTopologically());
    return true;
  }

private:
  bool legalize(Graph &g, Rewriter &rw) {
    std::vector<Node *> todo;
    for (auto &n : g.nodes())
      if (needsWidening(*n)) todo.push_back(n.get());
    std::map<Value *, Value *> widened; // 16-bit value -> its f32 version, in g
    for (Node *n : todo) widenNode(g, *n, rw, widened);
    return !todo.empty();
  }

  Value *widen(Graph &g, Value *v, Rewriter &rw, std::map<Value *, Value *> &widened) {
    auto it = widened.find(v);
    if (it != widened.end()) return it->second;
    Value *out;
    if (const Tensor *t = constantOf(v)) {
      Tensor f(DType::F32, t->shape());
      for (int64_t i = 0; i < t->numel(); ++i) f.setDouble(i, t->getDouble(i));
      out = rw.constant(g, std::move(f), suffixed(v->name()));
    } else {
      out = castNode(rw, g, v, DType::F32, "")->output(0);
      out->setName(suffixed(v->name()));
    }
    widened.emplace(v, out);
    return out;
  }

  static std::string suffixed(const std::string &name) {
    return name.empty() ? name : name + "_f32";
  }

  // Rewrites n in place: its 16-bit inputs read their f32 versions, its
  // 16-bit outputs become f32 and a Cast back takes over their uses and
  // names.
  void widenNode(Graph &g, Node &n, Rewriter &rw, std::map<Value *, Value *> &widened) {
    for (int i = 0; i < n.numInputs(); ++i)
      if (is16BitFloat(n.input(i))) rw.setInput(n, i, widen(g, n.input(i), rw, widened));
    for (Value *old : n.outputs()) {
      if (!is16BitFloat(old)) continue;
      if (rw.numUses(old) == 0) { // nothing to cast back for
        old->setType(Type::tensor(DType::F32, old->type().shape()));
        continue;
      }
      const std::string oldName = old->name();
      Node *back = castNode(rw, g, old, old->type().dtype(), "");
      // replace() moves the Cast's own input too; it reads `old` again after.
      const bool moved = rw.replace(old, back->output(0));
      rw.setInput(*back, 0, old);
      if (!moved) {
        rw.eraseIfDead(back);
        continue;
      }
      old->setName(suffixed(oldName));
      old->setType(Type::tensor(DType::F32, old->type().shape()));
    }
  }
};

} // namespace

std::unique_ptr<Pass> createLegalizePrecisionPass() {
  return std::make_unique<LegalizePrecision>();
}

} // namespace kiln
