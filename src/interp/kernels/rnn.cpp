// Interpreter kernels: the recurrent layers RNN, GRU and LSTM.
//
// The three ops share one driver: it reads and checks the shapes (both
// layouts, one or two directions, every optional input), then for each
// direction walks the time steps (backwards for the reverse direction) and
// calls the op's cell once per batch row and step. A batch row whose
// sequence_lens entry ends before step t keeps its state and gets zeros in
// Y, so Y_h / Y_c hold each row's last valid state (zeros for an empty
// sequence). Gate pre-activations are dot products accumulated in the
// compute type (float for f32/f16/bf16, double for f64 or under
// InterpOptions::accumulateF64), in the order the ONNX equations (and the
// numpy scripts that made the test data) write them.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>
#include <cctype>

namespace kiln {

namespace {

// ---- activation functions ---------------------------------------------------

enum class ActKind {
  Relu,
  Tanh,
  Sigmoid,
  Affine,
  LeakyRelu,
  ThresholdedRelu,
  ScaledTanh,
  HardSigmoid,
  Elu,
  Softsign,
  Softplus
};

// Name (lower case), whether it reads alpha / beta, and the defaults of the
// ONNX op of the same name for when activation_alpha/beta run out.
struct ActInfo {
  const char *name;
  ActKind kind;
  bool usesAlpha, usesBeta;
  double alpha, beta;
};

constexpr ActInfo kActivations[] = {
    {"relu", ActKind::Relu, false, false, 0, 0},
    {"tanh", ActKind::Tanh, false, false, 0, 0},
    {"sigmoid", ActKind::Sigmoid, false, false, 0, 0},
    {"affine", ActKind::Affine, true, true, 1.0, 0.0},
    {"leakyrelu", ActKind::LeakyRelu, true, false, 0.01, 0},
    {"thresholdedrelu", ActKind::ThresholdedRelu, true, false, 1.0, 0},
    {"scaledtanh", ActKind::ScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", ActKind::HardSigmoid, true, true, 0.2, 0.5},
    {"elu", ActKind::Elu, true, false, 1.0, 0},
    {"softsign", ActKind::Softsign, false, false, 0, 0},
    {"softplus", ActKind::Softplus, false, false, 0, 0},
};

struct Activation {
  ActKind kind = ActKind::Tanh;
  double alpha = 0, beta = 0;

  template <class C> C operator()(C x) const {
    C a = static_cast<C>(alpha), b = static_cast<C>(beta);
    switch (kind) {
    case ActKind::Relu:
      return std::max(x, C(0));
    case ActKind::Tanh:
      return std::tanh(x);
    case ActKind::Sigmoid:
      return C(1) / (C(1) + std::exp(-x));
    case ActKind::Affine:
      return a * x + b;
    case ActKind::LeakyRelu:
      return x >= C(0) ? x : a * x;
    case ActKind::ThresholdedRelu:
      return x > a ? x : C(0);
    case ActKind::ScaledTanh:
      return a * std::tanh(b * x);
    case ActKind::HardSigmoid:
      return std::clamp(a * x + b, C(0), C(1));
    case ActKind::Elu:
      return x >= C(0) ? x : a * (std::exp(x) - C(1));
    case ActKind::Softsign:
      return x / (C(1) + std::abs(x));
    case ActKind::Softplus: // log(1 + e^x) without overflow for large x
      return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    }
    return x;
  }
};

std::string lowerCase(std::string s) {
  for (char &ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The activations of every direction, `perDir` each (f, g, h order),
// forward direction first. A list of just `perDir` names serves both
// directions of a bidirectional layer. activation_alpha / activation_beta are
// consumed in list order by the functions that take them.
Expected<std::vector<Activation>>
readActivations(const KernelContext &ctx, const std::vector<std::string> &defaults, int64_t dirs) {
  const Node &node = ctx.node();
  size_t perDir = defaults.size();
  std::vector<std::string> names = node.getStrings("activations");
  if (names.empty())
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() == perDir && dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != perDir * static_cast<size_t>(dirs))
    return ctx.error("expects ", perDir * dirs, " activations, got ", names.size());
  std::vector<float> alphas = node.getFloats("activation_alpha");
  std::vector<float> betas = node.getFloats("activation_beta");
  size_t nextAlpha = 0, nextBeta = 0;
  std::vector<Activation> acts;
  for (const std::string &name : names) {
    std::string lower = lowerCase(name);
    const ActInfo *info = nullptr;
    for (const ActInfo &a : kActivations)
      if (lower == a.name) info = &a;
    if (!info) return ctx.error("unsupported activation '", name, "'");
    Activation act{info->kind, info->alpha, info->beta};
    if (info->usesAlpha && nextAlpha < alphas.size()) act.alpha = alphas[nextAlpha++];
    if (info->usesBeta && nextBeta < betas.size()) act.beta = betas[nextBeta++];
    acts.push_back(act);
  }
  return acts;
}

// ---- shapes and inputs ------------------------------------------------------

// Input slots shared by the three ops (LSTM adds initial_c = 6 and P = 7).
enum Slot { kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kP = 7 };

struct RnnDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  bool batchFirst = false; // layout = 1
  bool reverseOnly = false;

  // Offsets of a row of X, of Y and of the [dirs, batch, hidden] state.
  int64_t xAt(int64_t t, int64_t b) const {
    return (batchFirst ? b * seq + t : t * batch + b) * input;
  }
  int64_t yAt(int64_t t, int64_t d, int64_t b) const {
    return (batchFirst ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  // The state as laid out in initial_h / Y_h (layout-dependent).
  int64_t stateIoAt(int64_t d, int64_t b) const {
    return (batchFirst ? b * dirs + d : d * batch + b) * hidden;
  }
  Shape64 stateShape() const {
    return batchFirst ? Shape64{batch, dirs, hidden} : Shape64{dirs, batch, hidden};
  }
  Shape64 yShape() const {
    return batchFirst ? Shape64{batch, seq, dirs, hidden} : Shape64{seq, dirs, batch, hidden};
  }
};

Status checkShape(const KernelContext &ctx, int slot, const char *name, const Shape64 &want) {
  if (!ctx.has(slot)) return Status::success();
  const Tensor &t = ctx.in(slot);
  if (t.shape() != want)
    return ctx.error(name, " has shape ", shapeToString(t.shape()), ", expected ",
                     shapeToString(want));
  if (slot != kSeqLens && !isFloat(t.dtype()))
    return ctx.error(name, " must be a float tensor, got ", dtypeName(t.dtype()));
  return Status::success();
}

Expected<RnnDims> readDims(const KernelContext &ctx, int64_t gates) {
  const Node &node = ctx.node();
  RnnDims d;
  d.gates = gates;
  int64_t layout = node.getInt("layout");
  if (layout != 0 && layout != 1) return ctx.error("layout must be 0 or 1, got ", layout);
  d.batchFirst = layout == 1;
  std::string direction = node.getString("direction");
  if (direction == "bidirectional")
    d.dirs = 2;
  else if (direction == "reverse")
    d.reverseOnly = true;
  else if (direction != "forward")
    return ctx.error("unknown direction '", direction, "'");

  const Tensor &x = ctx.in(kX), &w = ctx.in(kW), &r = ctx.in(kR);
  if (!isFloat(x.dtype())) return ctx.error("X must be a float tensor, got ", dtypeName(x.dtype()));
  if (x.rank() != 3) return ctx.error("X must have rank 3, got ", shapeToString(x.shape()));
  if (w.rank() != 3) return ctx.error("W must have rank 3, got ", shapeToString(w.shape()));
  if (r.rank() != 3) return ctx.error("R must have rank 3, got ", shapeToString(r.shape()));
  d.seq = d.batchFirst ? x.dim(1) : x.dim(0);
  d.batch = d.batchFirst ? x.dim(0) : x.dim(1);
  d.input = x.dim(2);
  d.hidden = node.hasAttr("hidden_size") ? node.getInt("hidden_size") : r.dim(2);
  if (d.hidden <= 0) return ctx.error("hidden_size must be positive, got ", d.hidden);
  int64_t gh = gates * d.hidden;
  KILN_RETURN_IF_ERROR(checkShape(ctx, kW, "W", {d.dirs, gh, d.input}));
  KILN_RETURN_IF_ERROR(checkShape(ctx, kR, "R", {d.dirs, gh, d.hidden}));
  KILN_RETURN_IF_ERROR(checkShape(ctx, kB, "B", {d.dirs, 2 * gh}));
  KILN_RETURN_IF_ERROR(checkShape(ctx, kSeqLens, "sequence_lens", {d.batch}));
  KILN_RETURN_IF_ERROR(checkShape(ctx, kInitialH, "initial_h", d.stateShape()));
  if (node.op() == OpKind::LSTM) {
    KILN_RETURN_IF_ERROR(checkShape(ctx, kInitialC, "initial_c", d.stateShape()));
    KILN_RETURN_IF_ERROR(checkShape(ctx, kP, "P", {d.dirs, 3 * d.hidden}));
  }
  return d;
}

// Per batch row, the number of valid steps (sequence_lens, or all of them).
Expected<std::vector<int64_t>> readSeqLens(const KernelContext &ctx, const RnnDims &d) {
  if (!ctx.has(kSeqLens)) return std::vector<int64_t>(d.batch, d.seq);
  const Tensor &t = ctx.in(kSeqLens);
  if (!isInt(t.dtype()))
    return ctx.error("sequence_lens must be an integer tensor, got ", dtypeName(t.dtype()));
  std::vector<int64_t> lens = toInt64s(t);
  for (int64_t len : lens)
    if (len < 0 || len > d.seq)
      return ctx.error("sequence_lens value ", len, " is outside [0, ", d.seq, "]");
  return lens;
}

// Input `slot` as a flat vector of C, or `zeros` zeros when it is absent.
template <class C> std::vector<C> readOr(const KernelContext &ctx, int slot, int64_t zeros) {
  if (!ctx.has(slot)) return std::vector<C>(zeros, C(0));
  std::vector<double> v = toDoubles(ctx.in(slot));
  return std::vector<C>(v.begin(), v.end());
}

// A [dirs, batch, hidden] state from initial_h / initial_c (any layout).
template <class C> std::vector<C> readState(const KernelContext &ctx, int slot, const RnnDims &d) {
  std::vector<C> state(d.dirs * d.batch * d.hidden, C(0));
  if (!ctx.has(slot)) return state;
  std::vector<C> io = readOr<C>(ctx, slot, 0);
  for (int64_t dir = 0; dir < d.dirs; ++dir)
    for (int64_t b = 0; b < d.batch; ++b)
      std::copy_n(&io[d.stateIoAt(dir, b)], d.hidden, &state[(dir * d.batch + b) * d.hidden]);
  return state;
}

// A tensor of dtype `dt` from values computed in C.
template <class C> Tensor makeTensor(const std::vector<C> &v, DType dt, Shape64 shape) {
  Tensor f64(DType::F64, std::move(shape));
  std::copy(v.begin(), v.end(), f64.data<double>());
  return convertTensor(f64, dt);
}

template <class C> C dot(const C *a, const C *b, int64_t n) {
  C s = 0;
  for (int64_t k = 0; k < n; ++k) s += a[k] * b[k];
  return s;
}

// ---- the shared driver ------------------------------------------------------

// One direction's weights: pointers into W, R, B (and P for LSTM).
template <class C> struct DirParams {
  const C *w = nullptr;  // [gates*hidden, input]
  const C *r = nullptr;  // [gates*hidden, hidden]
  const C *wb = nullptr; // [gates*hidden]
  const C *rb = nullptr; // [gates*hidden]
  const C *p = nullptr;  // [3*hidden] peepholes i, o, f (LSTM)
  const Activation *acts = nullptr;
  C clip = 0; // 0: no clipping
  int64_t input = 0, hidden = 0;

  C clipped(C v) const { return clip > C(0) ? std::clamp(v, -clip, clip) : v; }
  // x . W[row] + h . R[row] + (Wb[row] + Rb[row]): a gate's pre-activation.
  C gate(const C *x, const C *h, int64_t row) const {
    return dot(x, w + row * input, input) + dot(h, r + row * hidden, hidden) + (wb[row] + rb[row]);
  }
};

// The full inputs of one layer, converted to C.
template <class C> struct Layer {
  RnnDims dims;
  std::vector<C> x, w, r, b, peepholes;
  std::vector<Activation> acts;
  std::vector<int64_t> lens;
  C clip = 0;

  // data() + offset rather than &v[offset]: a zero-sized input leaves the
  // vectors empty.
  DirParams<C> params(int64_t dir) const {
    const RnnDims &d = dims;
    int64_t gh = d.gates * d.hidden;
    DirParams<C> out;
    out.w = w.data() + dir * gh * d.input;
    out.r = r.data() + dir * gh * d.hidden;
    out.wb = b.data() + dir * 2 * gh;
    out.rb = b.data() + dir * 2 * gh + gh;
    if (!peepholes.empty()) out.p = peepholes.data() + dir * 3 * d.hidden;
    out.acts = acts.data() + dir * (acts.size() / d.dirs);
    out.clip = clip;
    out.input = d.input;
    out.hidden = d.hidden;
    return out;
  }
};

template <class C>
Expected<Layer<C>> readLayer(const KernelContext &ctx, int64_t gates,
                             const std::vector<std::string> &defaultActs) {
  Layer<C> l;
  KILN_ASSIGN_OR_RETURN(l.dims, readDims(ctx, gates));
  const RnnDims &d = l.dims;
  KILN_ASSIGN_OR_RETURN(l.acts, readActivations(ctx, defaultActs, d.dirs));
  KILN_ASSIGN_OR_RETURN(l.lens, readSeqLens(ctx, d));
  if (ctx.node().hasAttr("clip")) {
    float clip = ctx.node().getFloat("clip");
    if (!(clip > 0)) return ctx.error("clip must be positive, got ", clip);
    l.clip = static_cast<C>(clip);
  }
  l.x = readOr<C>(ctx, kX, 0);
  l.w = readOr<C>(ctx, kW, 0);
  l.r = readOr<C>(ctx, kR, 0);
  l.b = readOr<C>(ctx, kB, d.dirs * 2 * gates * d.hidden);
  if (ctx.node().op() == OpKind::LSTM) l.peepholes = readOr<C>(ctx, kP, d.dirs * 3 * d.hidden);
  return l;
}

// Runs every direction of the layer. `makeCell(params)` returns the cell
// for one direction: cell(x, h, c) advances one batch row by one step,
// updating h (and c, which only LSTM uses) in place. h and c are the
// [dirs, batch, hidden] states, initialized by the caller; y receives Y
// (laid out as the output, zeros where a row's sequence has ended).
template <class C, class MakeCell>
void runLayer(const Layer<C> &l, std::vector<C> &h, std::vector<C> &c, std::vector<C> &y,
              MakeCell &&makeCell) {
  const RnnDims &d = l.dims;
  for (int64_t dir = 0; dir < d.dirs; ++dir) {
    bool reverse = d.reverseOnly || dir == 1;
    auto cell = makeCell(l.params(dir));
    for (int64_t step = 0; step < d.seq; ++step) {
      int64_t t = reverse ? d.seq - 1 - step : step;
      for (int64_t b = 0; b < d.batch; ++b) {
        if (t >= l.lens[b]) continue;
        int64_t s = (dir * d.batch + b) * d.hidden;
        cell(l.x.data() + d.xAt(t, b), &h[s], &c[s]);
        std::copy_n(&h[s], d.hidden, &y[d.yAt(t, dir, b)]);
      }
    }
  }
  // A row with an empty sequence has no last state: ONNX does not say what
  // Y_h / Y_c hold then; ONNX Runtime writes zeros, and so do we.
  for (int64_t dir = 0; dir < d.dirs; ++dir)
    for (int64_t b = 0; b < d.batch; ++b)
      if (l.lens[b] == 0) {
        int64_t s = (dir * d.batch + b) * d.hidden;
        std::fill_n(&h[s], d.hidden, C(0));
        std::fill_n(&c[s], d.hidden, C(0));
      }
}

// Sets outputs Y (0), Y_h (1) and, when given, Y_c (2).
template <class C>
void setOutputs(KernelContext &ctx, const RnnDims &d, DType dt, const std::vector<C> &y,
                const std::vector<C> &h, const std::vector<C> *c) {
  auto stateIo = [&](const std::vector<C> &state) {
    std::vector<C> io(state.size());
    for (int64_t dir = 0; dir < d.dirs; ++dir)
      for (int64_t b = 0; b < d.batch; ++b)
        std::copy_n(&state[(dir * d.batch + b) * d.hidden], d.hidden, &io[d.stateIoAt(dir, b)]);
    return makeTensor(io, dt, d.stateShape());
  };
  if (ctx.numOutputs() > 0) ctx.setOutput(0, makeTensor(y, dt, d.yShape()));
  if (ctx.numOutputs() > 1) ctx.setOutput(1, stateIo(h));
  if (c && ctx.numOutputs() > 2) ctx.setOutput(2, stateIo(*c));
}

// Calls f(C{}) with the compute type for the layer's dtype.
template <class F> Status dispatchCompute(KernelContext &ctx, F &&f) {
  DType dt = ctx.in(kX).dtype();
  if (!isFloat(dt)) return ctx.error("X must be a float tensor, got ", dtypeName(dt));
  if (ctx.options().accumulateF64 || dt == DType::F64) return f(double{});
  return f(float{});
}

// ---- RNN --------------------------------------------------------------------

// H = f(X Wi^T + H Ri^T + Wbi + Rbi)
template <class C> Status rnnLayer(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Layer<C> l, readLayer<C>(ctx, 1, {"Tanh"}));
  const RnnDims &d = l.dims;
  std::vector<C> h = readState<C>(ctx, kInitialH, d), c(h.size());
  std::vector<C> y(numelOf(d.yShape()), C(0));
  runLayer(l, h, c, y, [&](DirParams<C> p) {
    return [p, next = std::vector<C>(p.hidden)](const C *x, C *h, C *) mutable {
      for (int64_t j = 0; j < p.hidden; ++j) next[j] = p.acts[0](p.clipped(p.gate(x, h, j)));
      std::copy(next.begin(), next.end(), h);
    };
  });
  setOutputs<C>(ctx, d, ctx.in(kX).dtype(), y, h, nullptr);
  return Status::success();
}

Status rnnKernel(KernelContext &ctx) {
  return dispatchCompute(ctx, [&](auto tag) { return rnnLayer<decltype(tag)>(ctx); });
}

// ---- GRU --------------------------------------------------------------------

// Gates z, r, h (rows [0,H), [H,2H), [2H,3H) of W, R and the biases):
//   z = f(X Wz^T + H Rz^T + Wbz + Rbz),  r = f(X Wr^T + H Rr^T + Wbr + Rbr)
//   linear_before_reset = 0: h' = g(X Wh^T + (r * H) Rh^T + Rbh + Wbh)
//   linear_before_reset = 1: h' = g(X Wh^T + r * (H Rh^T + Rbh) + Wbh)
//   H = (1 - z) * h' + z * H
template <class C> struct GruCell {
  DirParams<C> p;
  bool linearBeforeReset;
  std::vector<C> z, r, rh, next;

  GruCell(DirParams<C> params, bool lbr)
      : p(params), linearBeforeReset(lbr), z(p.hidden), r(p.hidden), rh(p.hidden), next(p.hidden) {}

  void operator()(const C *x, C *h, C *) {
    int64_t H = p.hidden, I = p.input;
    const Activation &f = p.acts[0], &g = p.acts[1];
    for (int64_t j = 0; j < H; ++j) {
      z[j] = f(p.clipped(p.gate(x, h, j)));
      r[j] = f(p.clipped(p.gate(x, h, H + j)));
    }
    for (int64_t k = 0; k < H; ++k) rh[k] = r[k] * h[k];
    for (int64_t j = 0; j < H; ++j) {
      int64_t row = 2 * H + j;
      C xw = dot(x, p.w + row * I, I);
      C pre = linearBeforeReset ? xw + r[j] * (dot(h, p.r + row * H, H) + p.rb[row]) + p.wb[row]
                                : xw + dot(rh.data(), p.r + row * H, H) + p.wb[row] + p.rb[row];
      C cand = g(p.clipped(pre));
      next[j] = (C(1) - z[j]) * cand + z[j] * h[j];
    }
    std::copy(next.begin(), next.end(), h);
  }
};

template <class C> Status gruLayer(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Layer<C> l, readLayer<C>(ctx, 3, {"Sigmoid", "Tanh"}));
  const RnnDims &d = l.dims;
  bool lbr = ctx.node().getInt("linear_before_reset") != 0;
  std::vector<C> h = readState<C>(ctx, kInitialH, d), c(h.size());
  std::vector<C> y(numelOf(d.yShape()), C(0));
  runLayer(l, h, c, y, [&](DirParams<C> p) { return GruCell<C>(p, lbr); });
  setOutputs<C>(ctx, d, ctx.in(kX).dtype(), y, h, nullptr);
  return Status::success();
}

Status gruKernel(KernelContext &ctx) {
  return dispatchCompute(ctx, [&](auto tag) { return gruLayer<decltype(tag)>(ctx); });
}

// ---- LSTM -------------------------------------------------------------------

// Gates i, o, f, c (rows [0,H), [H,2H), [2H,3H), [3H,4H)); peepholes P are
// i, o, f. Clipping applies to the gate pre-activations, not to C.
//   i = f(X Wi^T + H Ri^T + Wbi + Rbi + Pi * C)
//   f = f(X Wf^T + H Rf^T + Wbf + Rbf + Pf * C)   (1 - i with input_forget)
//   c = g(X Wc^T + H Rc^T + Wbc + Rbc)
//   C = f * C + i * c
//   o = f(X Wo^T + H Ro^T + Wbo + Rbo + Po * C)   (the new C)
//   H = o * h(C)
template <class C> struct LstmCell {
  DirParams<C> p;
  bool inputForget;
  std::vector<C> pre, next;

  LstmCell(DirParams<C> params, bool coupled)
      : p(params), inputForget(coupled), pre(4 * p.hidden), next(p.hidden) {}

  void operator()(const C *x, C *h, C *c) {
    int64_t H = p.hidden;
    const Activation &f = p.acts[0], &g = p.acts[1], &hAct = p.acts[2];
    const C *pi = p.p, *po = p.p + H, *pf = p.p + 2 * H;
    for (int64_t row = 0; row < 4 * H; ++row) pre[row] = p.gate(x, h, row);
    for (int64_t j = 0; j < H; ++j) {
      C ig = f(p.clipped(pre[j] + pi[j] * c[j]));
      C fg = inputForget ? C(1) - ig : f(p.clipped(pre[2 * H + j] + pf[j] * c[j]));
      C cand = g(p.clipped(pre[3 * H + j]));
      C cell = fg * c[j] + ig * cand;
      C og = f(p.clipped(pre[H + j] + po[j] * cell));
      c[j] = cell;
      next[j] = og * hAct(cell);
    }
    std::copy(next.begin(), next.end(), h);
  }
};

template <class C> Status lstmLayer(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Layer<C> l, readLayer<C>(ctx, 4, {"Sigmoid", "Tanh", "Tanh"}));
  const RnnDims &d = l.dims;
  bool inputForget = ctx.node().getInt("input_forget") != 0;
  std::vector<C> h = readState<C>(ctx, kInitialH, d), c = readState<C>(ctx, kInitialC, d);
  std::vector<C> y(numelOf(d.yShape()), C(0));
  runLayer(l, h, c, y, [&](DirParams<C> p) { return LstmCell<C>(p, inputForget); });
  setOutputs<C>(ctx, d, ctx.in(kX).dtype(), y, h, &c);
  return Status::success();
}

Status lstmKernel(KernelContext &ctx) {
  return dispatchCompute(ctx, [&](auto tag) { return lstmLayer<decltype(tag)>(ctx); });
}

} // namespace

void registerRnnKernels(KernelTable &t) {
  t.add(OpKind::RNN, rnnKernel);
  t.add(OpKind::GRU, gruKernel);
  t.add(OpKind::LSTM, lstmKernel);
}

} // namespace kiln
