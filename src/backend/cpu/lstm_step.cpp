#include "backend/cpu/lstm_step.h"

#include "interp/interpreter.h"
#include "interp/kernel.h"
#include "passes/fusion.h"
#include "passes/rewrite.h"

#include <algorithm>
#include <cctype>

namespace kiln::cpu {

namespace {

// ONNX LSTM inputs.
enum Input { kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kP = 7 };

// Nodes and bytes compileTimeValue may evaluate for one value: enough for a
// Slice/Concat/Reshape chain over a weight, not a whole subgraph.
constexpr int kEvalNodes = 32;
constexpr size_t kEvalBytes = size_t(64) << 20;

// The value of `v` when it depends on constants only, through at most
// `budget` deterministic, region-free nodes evaluated here with the
// interpreter's kernels; nothing otherwise.
std::optional<Tensor> compileTimeValue(const Value *v, int &budget) {
  if (!v) return std::nullopt;
  if (const Tensor *t = constantOf(v)) return *t;
  const Node *p = v->producer();
  if (!p || --budget < 0 || !p->regions().empty() || !isDeterministic(p->op())) return std::nullopt;
  KernelFn kernel = kernelTable().find(p->op());
  if (!kernel) return std::nullopt;
  std::vector<RtValue> held;
  held.reserve(size_t(p->numInputs())); // the pointers below stay valid
  std::vector<const RtValue *> inputs;
  for (const Value *in : p->inputs()) {
    if (!in) {
      inputs.push_back(nullptr);
      continue;
    }
    std::optional<Tensor> t = compileTimeValue(in, budget);
    if (!t || t->byteSize() > kEvalBytes) return std::nullopt;
    held.emplace_back(std::move(*t));
    inputs.push_back(&held.back());
  }
  Interpreter interp;
  InterpOptions options;
  Environment env;
  KernelContext ctx(*p, std::move(inputs), interp, options, env);
  try {
    if (!kernel(ctx).ok()) return std::nullopt;
  } catch (const std::exception &) {
    return std::nullopt;
  }
  std::vector<RtValue> outs = ctx.takeOutputs();
  RtValue &out = outs[size_t(v->producerIndex())];
  if (!out.isTensor() || !out.tensor.defined()) return std::nullopt;
  return std::move(out.tensor);
}

std::string lowerCase(std::string s) {
  for (char &ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

const Tensor *tensorIn(const Frame &frame, const std::vector<int> &slots, int i) {
  if (i >= static_cast<int>(slots.size()) || slots[i] < 0) return nullptr;
  const RtValue &v = frame.slots[slots[i]];
  return v.isTensor() ? &v.tensor : nullptr;
}

} // namespace

Expected<std::unique_ptr<LstmStep>> LstmStep::create(const Node &node, std::vector<int> inputSlots,
                                                     std::vector<int> outputSlots) {
  if (node.op() != OpKind::LSTM) return Error{"not an LSTM"};
  std::unique_ptr<LstmStep> s(new LstmStep());
  auto input = [&](int i) { return i < node.numInputs() ? node.input(i) : nullptr; };
  if (input(kSeqLens) || input(kP)) return Error{"sequence_lens and peepholes are not supported"};
  if (node.hasAttr("clip") || node.getInt("input_forget") != 0)
    return Error{"clip and input_forget are not supported"};
  for (int i : {kX, kW, kR, kB, kInitialH, kInitialC}) {
    const Value *v = input(i);
    if (i <= kR && !v) return Error{"X, W and R are required"};
    if (v && (!v->type().isTensor() || v->type().dtype() != DType::F32))
      return Error{"LSTM operands must be f32"};
  }
  const int64_t layout = node.getInt("layout");
  const std::string direction = node.getString("direction");
  if (layout != 0 && layout != 1) return Error{"unknown layout"};
  if (direction == "bidirectional")
    s->dirs_ = 2;
  else if (direction == "reverse")
    s->reverseOnly_ = true;
  else if (direction != "forward")
    return Error{"unknown direction"};
  s->batchFirst_ = layout == 1;
  // Only the default activations (sigmoid, tanh, tanh); a list of three
  // serves both directions, as in the interpreter.
  const std::vector<std::string> acts = node.getStrings("activations");
  if (!acts.empty()) {
    if (acts.size() != size_t(3 * s->dirs_) && acts.size() != 3)
      return Error{"wrong number of activations"};
    static const char *const kDefaults[3] = {"sigmoid", "tanh", "tanh"};
    for (size_t i = 0; i < acts.size(); ++i)
      if (lowerCase(acts[i]) != kDefaults[i % 3]) return Error{"only the default activations"};
  }
  s->hidden_ = node.hasAttr("hidden_size") ? node.getInt("hidden_size") : -1;
  s->label_ = "lstm " + node.describe();

  // Weights known at compile time are packed now.
  int budget = kEvalNodes;
  std::optional<Tensor> w = compileTimeValue(input(kW), budget);
  std::optional<Tensor> r = w ? compileTimeValue(input(kR), budget) : std::nullopt;
  std::optional<Tensor> b = input(kB) && r ? compileTimeValue(input(kB), budget) : std::nullopt;
  if (w && r && (b || !input(kB))) {
    KILN_ASSIGN_OR_RETURN(s->packed_, s->pack(*w, *r, b ? &*b : nullptr));
  }

  s->in_ = std::move(inputSlots);
  s->out_ = std::move(outputSlots);
  s->in_.resize(kP + 1, -1);
  s->out_.resize(3, -1);
  for (int i : {kX, kW, kR, kB, kInitialH, kInitialC}) {
    if (s->in_[i] < 0 || (!s->packed_.empty() && i >= kW && i <= kB)) continue;
    s->reads.push_back(s->in_[i]);
  }
  for (int slot : s->out_)
    if (slot >= 0) s->writes.push_back(slot);
  return s;
}

Expected<std::vector<kernels::PackedLstm>> LstmStep::pack(const Tensor &w, const Tensor &r,
                                                          const Tensor *b) const {
  for (const Tensor *t : {&w, &r, b})
    if (t && t->dtype() != DType::F32) return makeError(label_, ": weights must be f32");
  if (w.rank() != 3 || r.rank() != 3 || w.dim(0) != dirs_ || r.dim(0) != dirs_)
    return makeError(label_, ": W ", shapeToString(w.shape()), " and R ", shapeToString(r.shape()),
                     " do not match ", dirs_, " direction(s)");
  const int64_t H = r.dim(2), I = w.dim(2);
  if ((hidden_ >= 0 && H != hidden_) || H <= 0 || w.dim(1) != 4 * H || r.dim(1) != 4 * H)
    return makeError(label_, ": W ", shapeToString(w.shape()), " and R ", shapeToString(r.shape()),
                     " do not match hidden size ", H);
  if (b && b->shape() != Shape64{dirs_, 8 * H})
    return makeError(label_, ": B has shape ", shapeToString(b->shape()), ", expected [", dirs_,
                     ",", 8 * H, "]");
  std::vector<kernels::PackedLstm> out;
  for (int64_t d = 0; d < dirs_; ++d) {
    const float *bd = b ? b->data<float>() + d * 8 * H : nullptr;
    out.push_back(kernels::PackedLstm::pack(H, I, w.data<float>() + d * 4 * H * I,
                                            r.data<float>() + d * 4 * H * H, bd,
                                            bd ? bd + 4 * H : nullptr));
  }
  return out;
}

Status LstmStep::run(Frame &frame, ExecContext &ctx) const {
  const Tensor *xp = tensorIn(frame, in_, kX);
  if (!xp || xp->dtype() != DType::F32 || xp->rank() != 3)
    return makeError(label_, ": X must be a rank-3 f32 tensor");
  const Tensor &x = *xp;
  std::vector<kernels::PackedLstm> local;
  const std::vector<kernels::PackedLstm> *packs = &packed_;
  if (packed_.empty()) {
    const Tensor *w = tensorIn(frame, in_, kW), *r = tensorIn(frame, in_, kR);
    const Tensor *b = tensorIn(frame, in_, kB);
    if (!w || !r || (in_[kB] >= 0 && !b)) return makeError(label_, ": W, R and B must be tensors");
    KILN_ASSIGN_OR_RETURN(local, pack(*w, *r, b));
    packs = &local;
  }
  const int64_t T = batchFirst_ ? x.dim(1) : x.dim(0), B = batchFirst_ ? x.dim(0) : x.dim(1);
  const int64_t H = packs->front().hidden(), D = dirs_;
  if (x.dim(2) != packs->front().input())
    return makeError(label_, ": X has shape ", shapeToString(x.shape()), ", expected ",
                     packs->front().input(), " inputs");
  const Shape64 stateShape = batchFirst_ ? Shape64{B, D, H} : Shape64{D, B, H};
  // The state of (direction d, batch row b) in initial_h / Y_h.
  auto ioAt = [&](int64_t d, int64_t b) { return (batchFirst_ ? b * D + d : d * B + b) * H; };

  // h and c as [dirs][batch][hidden].
  std::vector<float> h(size_t(D * B * H), 0.0f), c(h.size(), 0.0f);
  for (auto [slot, state] : {std::pair{kInitialH, &h}, std::pair{kInitialC, &c}}) {
    if (in_[slot] < 0) continue;
    const Tensor *t = tensorIn(frame, in_, slot);
    if (!t || t->dtype() != DType::F32 || t->shape() != stateShape)
      return makeError(label_, ": initial state must be f32", shapeToString(stateShape));
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(t->data<float>() + ioAt(d, b), H, state->data() + (d * B + b) * H);
  }

  Tensor y;
  if (out_[0] >= 0) y = Tensor(DType::F32, batchFirst_ ? Shape64{B, T, D, H} : Shape64{T, D, B, H});
  if (T == 0) { // no step: the last state of an empty sequence is zeros
    std::fill(h.begin(), h.end(), 0.0f);
    std::fill(c.begin(), c.end(), 0.0f);
  }
  for (int64_t d = 0; d < D && T > 0; ++d) {
    float *yd = nullptr;
    int64_t strideT = 0, strideB = 0;
    if (y.defined()) {
      yd = y.data<float>() + (batchFirst_ ? d * H : d * B * H);
      strideT = D * H * (batchFirst_ ? 1 : B);
      strideB = batchFirst_ ? T * D * H : H;
    }
    (*packs)[size_t(d)].run(T, B, batchFirst_, reverseOnly_ || d == 1, x.data<float>(),
                            h.data() + d * B * H, c.data() + d * B * H, yd, strideT, strideB,
                            ctx.pool);
  }

  auto stateOut = [&](const std::vector<float> &state) {
    Tensor t(DType::F32, stateShape);
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(state.data() + (d * B + b) * H, H, t.data<float>() + ioAt(d, b));
    return t;
  };
  if (out_[0] >= 0) frame.slots[out_[0]] = RtValue(std::move(y));
  if (out_[1] >= 0) frame.slots[out_[1]] = RtValue(stateOut(h));
  if (out_[2] >= 0) frame.slots[out_[2]] = RtValue(stateOut(c));
  return Status::success();
}

} // namespace kiln::cpu
