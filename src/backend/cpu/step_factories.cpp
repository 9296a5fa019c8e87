// The compiler's side of the microkernel and copy steps: each create()
// reads a node's attributes and constant inputs into the step's fields
// (runtime/cpu/*_step.h), and the step's prepare() does the rest, the same
// way as when a program is loaded from an artifact.
#include "interp/interpreter.h"
#include "interp/kernel.h"
#include "ir/graph.h"
#include "passes/fusion.h"
#include "passes/rewrite.h"
#include "runtime/cpu/conv_step.h"
#include "runtime/cpu/conv_transpose_step.h"
#include "runtime/cpu/copy_steps.h"
#include "runtime/cpu/int_conv_step.h"
#include "runtime/cpu/int_matmul_step.h"
#include "runtime/cpu/lstm_step.h"
#include "runtime/cpu/matmul_step.h"
#include "runtime/cpu/pool_step.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace kiln::cpu {

namespace {

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

} // namespace

namespace {

std::vector<int64_t> intsOr(const Node &n, const char *name, std::vector<int64_t> def) {
  std::vector<int64_t> v = n.getInts(name);
  return v.empty() ? def : v;
}

// The explicit pads ([begins..., ends...]) auto_pad SAME_UPPER/SAME_LOWER
// gives over x's spatial dims, as the interpreter's window.cpp works them
// out, when those dims are static; nothing otherwise (the padding then
// depends on each run's size, which the microkernels do not recompute).
std::optional<std::vector<int64_t>> samePads(const std::string &autoPad, const Value *x,
                                             const std::vector<int64_t> &kernel,
                                             const std::vector<int64_t> &strides,
                                             const std::vector<int64_t> &dilations) {
  const size_t n = kernel.size();
  if (!x || !x->type().isTensor() || !x->type().shape().rankKnown ||
      size_t(x->type().shape().rank()) != n + 2 || strides.size() != n || dilations.size() != n)
    return std::nullopt;
  std::vector<int64_t> pads(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const Dim &d = x->type().shape().dims[i + 2];
    if (!d.isStatic() || strides[i] <= 0 || dilations[i] <= 0 || kernel[i] <= 0)
      return std::nullopt;
    const int64_t in = d.value(), out = (in + strides[i] - 1) / strides[i];
    const int64_t span = (kernel[i] - 1) * dilations[i] + 1;
    const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + span - in);
    pads[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pads[i + n] = total - pads[i];
  }
  return pads;
}

} // namespace

namespace {

// The geometry of a Conv, ConvInteger or QLinearConv node `conv` with data
// input x and weights of shape wShape ([K, C/groups, (R,) S]) into cs (the
// weight-side fields; N, H, W are a stand-in that fits the kernel, each run
// sets them); oneD for a Conv1d.
Status convGeometry(const Node &conv, const Value *x, const Shape64 &wShape,
                    kernels::ConvShape &cs, bool &oneD) {
  if (wShape.size() != 3 && wShape.size() != 4) return Error{"only 1-D and 2-D convs"};
  const std::string autoPad = conv.getString("auto_pad");
  oneD = wShape.size() == 3;
  const int spatial = oneD ? 1 : 2;
  std::optional<std::vector<int64_t>> same;
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    same = samePads(autoPad, x, std::vector<int64_t>(wShape.begin() + 2, wShape.end()),
                    intsOr(conv, "strides", std::vector<int64_t>(spatial, 1)),
                    intsOr(conv, "dilations", std::vector<int64_t>(spatial, 1)));
    if (!same) return Error{"auto_pad SAME_* over symbolic spatial dims"};
  } else if (autoPad != "NOTSET" && autoPad != "VALID") {
    return Error{"unknown auto_pad"};
  }
  cs.groups = conv.getInt("group");
  cs.K = wShape[0];
  cs.C = wShape[1] * cs.groups;
  cs.R = oneD ? 1 : wShape[2];
  cs.S = wShape.back();
  std::vector<int64_t> strides = intsOr(conv, "strides", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> dil = intsOr(conv, "dilations", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> noPads(2 * spatial, 0);
  std::vector<int64_t> pads =
      same ? *same : autoPad == "VALID" ? noPads : intsOr(conv, "pads", noPads);
  if (static_cast<int>(strides.size()) != spatial || static_cast<int>(dil.size()) != spatial ||
      static_cast<int>(pads.size()) != 2 * spatial)
    return Error{"conv attributes do not match its rank"};
  if (oneD) {
    cs.strideW = strides[0];
    cs.dilationW = dil[0];
    cs.padLeft = pads[0];
    cs.padRight = pads[1];
  } else {
    cs.strideH = strides[0];
    cs.strideW = strides[1];
    cs.dilationH = dil[0];
    cs.dilationW = dil[1];
    cs.padTop = pads[0];
    cs.padLeft = pads[1];
    cs.padBottom = pads[2];
    cs.padRight = pads[3];
  }
  // The input's spatial size when the graph fixes it: the kernel packs its
  // weights for the GEMM orientation that size prefers (kernels/conv.h).
  // Else a stand-in that fits the window with 255 outputs to spare, so the
  // shape is valid and the weights are packed for large maps, the usual
  // case of a symbolic size. Each run sets the real size.
  cs.H = oneD ? 1 : (cs.R - 1) * cs.dilationH + 1 + 255 * cs.strideH;
  cs.W = (cs.S - 1) * cs.dilationW + 1 + 255 * cs.strideW;
  if (!cs.valid()) return Error{"conv attributes are invalid"};
  const Shape &xs = x->type().shape();
  if (xs.rankKnown && xs.rank() == spatial + 2) {
    const Dim &h = xs.dims[xs.dims.size() - 2], &w = xs.dims.back();
    kernels::ConvShape known = cs;
    if (!oneD && h.isStatic()) known.H = h.value();
    if (w.isStatic()) known.W = w.value();
    if (known.valid()) cs = known;
  }
  return Status::success();
}

} // namespace

Expected<std::unique_ptr<ConvStep>> ConvStep::create(const Node &node, std::vector<int> inputSlots,
                                                     int outputSlot) {
  auto s = std::make_unique<ConvStep>();
  const Node *conv = &node;
  if (node.op() == OpKind::Fused) conv = node.getGraph("body")->nodes().front().get();
  if (conv->op() != OpKind::Conv) return Error{"not a conv"};
  // The weights and bias as the outer graph holds them.
  const Value *wv = node.op() == OpKind::Fused ? node.input(1) : conv->input(1);
  const Value *bv = conv->input(2) ? (node.op() == OpKind::Fused ? node.input(2) : conv->input(2))
                                   : nullptr;
  // Weights known at compile time: constants, or short chains over them
  // (a QDQ model's DequantizeLinear of int8 weights, which fold-constants
  // keeps since folding would grow the model 4x).
  int budget = kEvalNodes;
  const std::optional<Tensor> wt = compileTimeValue(wv, budget);
  const std::optional<Tensor> bt = bv ? compileTimeValue(bv, budget) : std::nullopt;
  const Tensor *w = wt ? &*wt : nullptr;
  const Tensor *b = bt ? &*bt : nullptr;
  if (!w || w->dtype() != DType::F32 || (bv && (!b || b->dtype() != DType::F32)))
    return Error{"conv needs constant f32 weights"};
  if (w->rank() != 3 && w->rank() != 4) return Error{"only 1-D and 2-D convs"};
  const Value *x = conv->input(0);
  if (!x->type().isTensor() || x->type().dtype() != DType::F32) return Error{"conv input not f32"};
  KILN_RETURN_IF_ERROR(convGeometry(*conv, x, w->shape(), s->shape_, s->oneD_));
  kernels::ConvShape &cs = s->shape_;
  if (node.op() == OpKind::Fused) {
    KILN_ASSIGN_OR_RETURN(s->plan_, planEpilogue(node, cs.K, /*rowChannels=*/true));
  }
  s->weights_ = *w;
  if (b) s->biasT_ = *b;
  s->label_ = "conv " + node.describe();
  s->in_ = std::move(inputSlots);
  s->out_ = outputSlot;
  KILN_RETURN_IF_ERROR(s->prepare());
  return s;
}

Expected<std::unique_ptr<MatMulStep>> MatMulStep::create(const Node &node,
                                                         std::vector<int> inputSlots,
                                                         int outputSlot) {
  auto s = std::make_unique<MatMulStep>();
  s->label_ = "matmul " + node.describe();
  s->in_ = std::move(inputSlots);
  s->out_ = outputSlot;
  // Weights known at compile time are packed at load: a constant, or a
  // short chain over one (torch's attention slices and transposes its
  // packed in_proj weight; fold-constants keeps those slices, since folding
  // one alone would duplicate the weight in the model).
  int budget = kEvalNodes;
  const std::optional<Tensor> w = compileTimeValue(node.input(1), budget);
  if (node.op() == OpKind::Fused) {
    if (!w || w->rank() != 2) return Error{"fused matmul needs constant 2-D weights"};
    KILN_ASSIGN_OR_RETURN(s->plan_, planEpilogue(node, w->dim(1), /*rowChannels=*/false));
  }
  for (const Value *v : {node.input(0), node.input(1)})
    if (!v || !v->type().isTensor() || v->type().dtype() != DType::F32)
      return Error{"matmul operands must be f32"};
  if (w && w->rank() == 2 && w->dtype() == DType::F32) s->weights_ = *w;
  KILN_RETURN_IF_ERROR(s->prepare());
  return s;
}

Expected<std::unique_ptr<IntMatMulStep>> IntMatMulStep::create(const Node &node,
                                                               std::vector<int> inputSlots,
                                                               int outputSlot) {
  auto s = std::make_unique<IntMatMulStep>();
  s->qlinear_ = node.op() == OpKind::QLinearMatMul;
  if (!s->qlinear_ && node.op() != OpKind::MatMulInteger) return Error{"not an integer matmul"};
  s->label_ = std::string(s->qlinear_ ? "qlinear-matmul " : "matmul-integer ") + node.describe();
  s->in_ = std::move(inputSlots);
  s->out_ = outputSlot;
  int budget = kEvalNodes;
  std::optional<Tensor> w = compileTimeValue(node.input(s->bInput()), budget);
  if (!w || w->rank() != 2 || (w->dtype() != DType::U8 && w->dtype() != DType::I8))
    return Error{"integer matmul needs constant 2-D u8/i8 weights"};
  const Value *a = node.input(0);
  if (!a || !a->type().isTensor() ||
      (a->type().dtype() != DType::U8 && a->type().dtype() != DType::I8))
    return Error{"integer matmul needs a u8/i8 A"};
  // Forms that are known now never to fit the kernel go to the lowering.
  auto staticCount = [&](int input) -> int64_t {
    const Value *v = node.input(input);
    if (!v || !v->type().isTensor() || !v->type().shape().isStatic()) return -1;
    int64_t n = 1;
    for (const Dim &d : v->type().shape().dims) n *= d.value();
    return n;
  };
  if (staticCount(2) > 1) return Error{"per-row zero points of A"};
  if (s->qlinear_ && w->dim(0) > 33025) return Error{"depth beyond exact i32 sums"};
  s->weights_ = std::move(*w);
  KILN_RETURN_IF_ERROR(s->prepare());
  return s;
}

Expected<std::unique_ptr<IntConvStep>> IntConvStep::create(const Node &node,
                                                           std::vector<int> inputSlots,
                                                           int outputSlot) {
  auto s = std::make_unique<IntConvStep>();
  s->qlinear_ = node.op() == OpKind::QLinearConv;
  if (!s->qlinear_ && node.op() != OpKind::ConvInteger) return Error{"not an integer conv"};
  s->label_ = std::string(s->qlinear_ ? "qlinear-conv " : "conv-integer ") + node.describe();
  int budget = kEvalNodes;
  std::optional<Tensor> w = compileTimeValue(node.input(s->wInput()), budget);
  if (!w || (w->dtype() != DType::U8 && w->dtype() != DType::I8))
    return Error{"integer conv needs constant u8/i8 weights"};
  const Value *x = node.input(0);
  if (!x || !x->type().isTensor() ||
      (x->type().dtype() != DType::U8 && x->type().dtype() != DType::I8))
    return Error{"integer conv needs a u8/i8 input"};
  KILN_RETURN_IF_ERROR(convGeometry(node, x, w->shape(), s->shape_, s->oneD_));
  s->weights_ = std::move(*w);
  s->in_ = std::move(inputSlots);
  s->out_ = outputSlot;
  KILN_RETURN_IF_ERROR(s->prepare());
  return s;
}

Expected<std::unique_ptr<PoolStep>> PoolStep::create(const Node &node, int inputSlot,
                                                     int outputSlot) {
  auto s = std::make_unique<PoolStep>();
  switch (node.op()) {
  case OpKind::MaxPool: s->kind_ = PoolKind::Max; break;
  case OpKind::AveragePool: s->kind_ = PoolKind::Average; break;
  case OpKind::GlobalAveragePool: s->kind_ = PoolKind::GlobalAverage; break;
  case OpKind::GlobalMaxPool: s->kind_ = PoolKind::GlobalMax; break;
  default: return Error{"not a pool"};
  }
  const Value *x = node.input(0);
  if (!x || !x->type().isTensor() || x->type().dtype() != DType::F32 ||
      !x->type().shape().rankKnown)
    return Error{"pool input must be f32 with a known rank"};
  if (node.numOutputs() > 1 && node.output(1)) return Error{"MaxPool indices are not supported"};
  s->rank_ = static_cast<int>(x->type().shape().rank());
  const bool global = s->kind_ == PoolKind::GlobalAverage || s->kind_ == PoolKind::GlobalMax;
  if (!global) {
    if (s->rank_ != 3 && s->rank_ != 4) return Error{"only 1-D and 2-D pooling"};
    const int spatial = s->rank_ - 2;
    const std::string autoPad = node.getString("auto_pad");
    std::vector<int64_t> k = node.getInts("kernel_shape");
    std::vector<int64_t> st = node.getInts("strides"), dil = node.getInts("dilations");
    std::vector<int64_t> pads = node.getInts("pads");
    if (st.empty()) st.assign(spatial, 1);
    if (dil.empty()) dil.assign(spatial, 1);
    if (pads.empty() || autoPad == "VALID") pads.assign(2 * spatial, 0);
    const bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
    if (same) {
      std::optional<std::vector<int64_t>> p = samePads(autoPad, x, k, st, dil);
      if (!p) return Error{"auto_pad SAME_* over symbolic spatial dims"};
      pads = *p;
    } else if (autoPad != "NOTSET" && autoPad != "VALID") {
      return Error{"unknown auto_pad"};
    }
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
    // As the interpreter: ceil_mode has no effect under VALID or SAME_*.
    s->ceilMode_ = node.getInt("ceil_mode") != 0 && autoPad == "NOTSET";
    if (s->kind_ == PoolKind::Average) s->countIncludePad_ = node.getInt("count_include_pad") != 0;
  } else if (s->rank_ < 3) {
    return Error{"global pooling needs rank >= 3"};
  }
  s->label_ = "pool " + node.describe();
  s->in_ = inputSlot;
  s->out_ = outputSlot;
  KILN_RETURN_IF_ERROR(s->prepare());
  return s;
}

Expected<std::unique_ptr<ConvTransposeStep>>
ConvTransposeStep::create(const Node &node, std::vector<int> inputSlots, int outputSlot) {
  if (node.op() != OpKind::ConvTranspose) return Error{"not a conv transpose"};
  auto s = std::make_unique<ConvTransposeStep>();
  int budget = kEvalNodes; // weights known at compile time, as for Conv
  const std::optional<Tensor> wt = compileTimeValue(node.input(1), budget);
  const Value *bv = node.input(2);
  const std::optional<Tensor> bt = bv ? compileTimeValue(bv, budget) : std::nullopt;
  const Tensor *w = wt ? &*wt : nullptr;
  const Tensor *b = bt ? &*bt : nullptr;
  if (!w || w->dtype() != DType::F32 || (bv && (!b || b->dtype() != DType::F32)))
    return Error{"conv transpose needs constant f32 weights"};
  if (w->rank() != 3 && w->rank() != 4) return Error{"only 1-D and 2-D conv transposes"};
  const Value *x = node.input(0);
  if (!x->type().isTensor() || x->type().dtype() != DType::F32)
    return Error{"conv transpose input not f32"};
  s->autoPad_ = node.getString("auto_pad");
  if (s->autoPad_ != "NOTSET" && s->autoPad_ != "VALID" && s->autoPad_ != "SAME_UPPER" &&
      s->autoPad_ != "SAME_LOWER")
    return Error{"unknown auto_pad"};

  s->oneD_ = w->rank() == 3;
  const size_t n = s->oneD_ ? 1 : 2;
  s->groups_ = node.getInt("group");
  s->C_ = w->dim(0);
  if (s->groups_ < 1 || s->C_ % s->groups_ != 0) return Error{"group does not divide C"};
  s->K_ = w->dim(1) * s->groups_;
  if (b && b->numel() != s->K_) return Error{"bias does not match the output channels"};
  const Shape64 kernel(w->shape().begin() + 2, w->shape().end());
  if (node.hasAttr("kernel_shape") && node.getInts("kernel_shape") != kernel)
    return Error{"kernel_shape does not match the weights"};
  std::vector<int64_t> strides = intsOr(node, "strides", std::vector<int64_t>(n, 1));
  std::vector<int64_t> dil = intsOr(node, "dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = intsOr(node, "pads", std::vector<int64_t>(2 * n, 0));
  std::vector<int64_t> outPad = intsOr(node, "output_padding", std::vector<int64_t>(n, 0));
  std::vector<int64_t> outShape = node.getInts("output_shape");
  if (outShape.size() == n + 2) outShape.erase(outShape.begin(), outShape.begin() + 2);
  if (strides.size() != n || dil.size() != n || pads.size() != 2 * n || outPad.size() != n ||
      (!outShape.empty() && outShape.size() != n))
    return Error{"conv transpose attributes do not match its rank"};
  for (size_t i = 0; i < n; ++i) {
    Axis a;
    a.kernel = kernel[i], a.stride = strides[i], a.dilation = dil[i];
    a.padBegin = pads[i], a.padEnd = pads[n + i], a.outputPadding = outPad[i];
    a.requestedOut = outShape.empty() ? -1 : outShape[i];
    if (a.kernel < 1 || a.stride < 1 || a.dilation < 1 || (!outShape.empty() && outShape[i] < 0))
      return Error{"conv transpose attributes are invalid"};
    s->axes_.push_back(a);
  }

  s->weights_ = *w;
  if (b) s->biasT_ = *b;
  s->label_ = "conv_transpose " + node.describe();
  s->in_ = inputSlots[0];
  s->out_ = outputSlot;
  KILN_RETURN_IF_ERROR(s->prepare());
  return s;
}

Expected<std::unique_ptr<LstmStep>> LstmStep::create(const Node &node, std::vector<int> inputSlots,
                                                     std::vector<int> outputSlots) {
  using enum LstmStep::Input;
  if (node.op() != OpKind::LSTM) return Error{"not an LSTM"};
  auto s = std::make_unique<LstmStep>();
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
    s->w_ = std::move(*w);
    s->r_ = std::move(*r);
    if (b) s->b_ = std::move(*b);
  }

  s->in_ = std::move(inputSlots);
  s->out_ = std::move(outputSlots);
  s->in_.resize(kP + 1, -1);
  s->out_.resize(3, -1);
  KILN_RETURN_IF_ERROR(s->prepare());
  return s;
}

std::unique_ptr<Step> makeCopyStep(const Node &node, const std::vector<int> &in,
                                   const std::vector<int> &out, std::unique_ptr<Step> fallback) {
  StepKind kind;
  switch (node.op()) {
  case OpKind::Slice: kind = StepKind::Slice; break;
  case OpKind::Concat: kind = StepKind::Concat; break;
  case OpKind::Split: kind = StepKind::Split; break;
  case OpKind::Transpose: kind = StepKind::Transpose; break;
  case OpKind::Resize:
    if (node.getString("mode") == "nearest" &&
        node.getString("coordinate_transformation_mode") == "asymmetric" &&
        node.getString("nearest_mode") == "floor" && node.getInts("axes").empty())
    {
      kind = StepKind::ResizeNearest;
      break;
    }
    return nullptr;
  default:
    return nullptr;
  }
  std::unique_ptr<CopyStep> step = newCopyStep(kind);
  step->init("copy " + node.describe(), in, out, node.hasAttr("axis") ? node.getInt("axis") : 0,
             node.op() == OpKind::Transpose ? node.getInts("perm") : std::vector<int64_t>{},
             std::move(fallback));
  return step;
}

} // namespace kiln::cpu
