// Kernel IR lowerings of the recurrent layers RNN, GRU and LSTM (lower/ops.h)
// in every form the interpreter (interp/kernels/rnn.cpp) runs: forward,
// reverse and bidirectional, both layouts, every ONNX activation with its
// alpha / beta, clip, sequence_lens, optional initial states, peepholes,
// input_forget, GRU's linear_before_reset, absent optional outputs.
//
// Two kernels:
//   1. the input projection X W^T of every time step and direction, in
//      parallel over the rows of X, into scratch (it does not depend on the
//      state);
//   2. the recurrence, in parallel over (direction, batch row): each runs
//      its time loop serially, computing the gates from the projection and
//      the previous state h R^T in the order the interpreter's equations
//      (and the ONNX reference) write them, updating its state in scratch
//      and writing its rows of Y, then Y_h / Y_c. A row whose sequence ends
//      early gets zeros in Y and keeps its last valid state (zeros for an
//      empty sequence, as ONNX Runtime).
// Gates are computed in f32 (f64 for f64 inputs), like the interpreter.
#include "lower/kernel_expr.h"
#include "lower/ops.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;
constexpr DType I64 = DType::I64;

Status lowerRnn(DispatchBuilder &d);
Status lowerGru(DispatchBuilder &d);
Status lowerLstm(DispatchBuilder &d);

} // namespace

LowerFn recurrentLowering(OpKind op) {
  switch (op) {
  case OpKind::RNN:
    return lowerRnn;
  case OpKind::GRU:
    return lowerGru;
  case OpKind::LSTM:
    return lowerLstm;
  default:
    return nullptr;
  }
}

namespace {

// ---- activations ---------------------------------------------------------------------

enum class Act {
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
// ONNX op of the same name (as the interpreter's table).
struct ActInfo {
  const char *name;
  Act kind;
  bool usesAlpha, usesBeta;
  double alpha, beta;
};
constexpr ActInfo kActivations[] = {
    {"relu", Act::Relu, false, false, 0, 0},
    {"tanh", Act::Tanh, false, false, 0, 0},
    {"sigmoid", Act::Sigmoid, false, false, 0, 0},
    {"affine", Act::Affine, true, true, 1.0, 0.0},
    {"leakyrelu", Act::LeakyRelu, true, false, 0.01, 0},
    {"thresholdedrelu", Act::ThresholdedRelu, true, false, 1.0, 0},
    {"scaledtanh", Act::ScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", Act::HardSigmoid, true, true, 0.2, 0.5},
    {"elu", Act::Elu, true, false, 1.0, 0},
    {"softsign", Act::Softsign, false, false, 0, 0},
    {"softplus", Act::Softplus, false, false, 0, 0},
};

struct Activation {
  Act kind = Act::Tanh;
  double alpha = 0, beta = 0;
};

// The activations of every direction, `perDir` each, forward first; a
// list of just `perDir` serves both directions (the interpreter's rules).
Expected<std::vector<Activation>>
readActivations(const Node &node, const std::vector<std::string> &defaults, int64_t dirs) {
  const size_t perDir = defaults.size();
  std::vector<std::string> names = node.getStrings("activations");
  if (names.empty())
    for (int64_t k = 0; k < dirs; ++k) names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() == perDir && dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != perDir * size_t(dirs))
    return makeError(opName(node.op()), " expects ", perDir * size_t(dirs), " activations, got ",
                     names.size());
  const std::vector<float> alphas = node.getFloats("activation_alpha");
  const std::vector<float> betas = node.getFloats("activation_beta");
  size_t nextAlpha = 0, nextBeta = 0;
  std::vector<Activation> acts;
  for (const std::string &name : names) {
    std::string lower = name;
    for (char &ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const ActInfo *info = nullptr;
    for (const ActInfo &a : kActivations)
      if (lower == a.name) info = &a;
    if (!info) return makeError(opName(node.op()), " activation '", name, "' is not supported");
    Activation act{info->kind, info->alpha, info->beta};
    if (info->usesAlpha && nextAlpha < alphas.size()) act.alpha = alphas[nextAlpha++];
    if (info->usesBeta && nextBeta < betas.size()) act.beta = betas[nextBeta++];
    acts.push_back(act);
  }
  return acts;
}

// log(1 + y) to full precision without a log1p instruction: log(u) * y /
// (u - 1) with u = 1 + y corrects the rounding of u (Goldberg's trick).
int log1p(KExpr &e, DType c, int y) {
  const int u = e.add(c, e.f(c, 1), y);
  const int ratio = e.div(c, y, e.sub(c, u, e.f(c, 1)));
  const int v = e.mul(c, e.un(Opcode::Log, c, u), ratio);
  return e.sel(c, e.eq(c, u, e.f(c, 1)), y, v);
}

// tanh. The Kernel IR's tanh is accurate to f32 only (its small-argument
// series), so f64 takes 1 - 2 / (e^2|x| + 1) with the sign restored, whose
// absolute error stays near an f64 ulp.
int tanhOf(KExpr &e, DType c, int x) {
  if (c != DType::F64) return e.un(Opcode::Tanh, c, x);
  const int ax = e.un(Opcode::Abs, c, x);
  const int ex = e.un(Opcode::Exp, c, e.mul(c, ax, e.f(c, 2)));
  const int t = e.sub(c, e.f(c, 1), e.div(c, e.f(c, 2), e.add(c, ex, e.f(c, 1))));
  return e.sel(c, e.lt(c, x, e.f(c, 0)), e.neg(c, t), t);
}

int activate(KExpr &e, DType c, const Activation &act, int x) {
  const int a = e.f(c, act.alpha), b = e.f(c, act.beta);
  const int zero = e.f(c, 0), one = e.f(c, 1);
  switch (act.kind) {
  case Act::Relu:
    return e.max(c, x, zero);
  case Act::Tanh:
    return tanhOf(e, c, x);
  case Act::Sigmoid:
    return e.un(Opcode::Sigmoid, c, x);
  case Act::Affine:
    return e.add(c, e.mul(c, a, x), b);
  case Act::LeakyRelu:
    return e.sel(c, e.ge(c, x, zero), x, e.mul(c, a, x));
  case Act::ThresholdedRelu:
    return e.sel(c, e.gt(c, x, a), x, zero);
  case Act::ScaledTanh:
    return e.mul(c, a, tanhOf(e, c, e.mul(c, b, x)));
  case Act::HardSigmoid:
    return e.clamp(c, e.add(c, e.mul(c, a, x), b), zero, one);
  case Act::Elu:
    return e.sel(c, e.ge(c, x, zero), x, e.mul(c, a, e.sub(c, e.un(Opcode::Exp, c, x), one)));
  case Act::Softsign:
    return e.div(c, x, e.add(c, one, e.un(Opcode::Abs, c, x)));
  case Act::Softplus: { // log(1 + e^x) without overflow for large x
    const int pos = e.add(c, x, log1p(e, c, e.un(Opcode::Exp, c, e.neg(c, x))));
    const int neg = log1p(e, c, e.un(Opcode::Exp, c, x));
    return e.sel(c, e.gt(c, x, zero), pos, neg);
  }
  }
  return x;
}

// ---- the layer -----------------------------------------------------------------------

// Input slots shared by the three ops (LSTM adds initial_c and P).
enum Slot { kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kP = 7 };

enum class Cell { Rnn, Gru, Lstm };

struct Layer {
  Cell cell = Cell::Rnn;
  int64_t gates = 1, dirs = 1;
  bool batchFirst = false, reverseOnly = false;
  bool linearBeforeReset = false, inputForget = false;
  double clip = 0; // 0: no clipping
  std::vector<Activation> acts;
  DType x = DType::F32, c = DType::F32;       // X's dtype and the compute type
  SVal seq, batch, input, hidden, gh;         // gh = gates * hidden
  int xw = -1, h = -1, state = -1, work = -1; // scratch
  int64_t workPerRow = 0;                     // in units of hidden
};

bool present(DispatchBuilder &d, int slot) {
  return d.input(slot) != nullptr;
}

Status checkShape(DispatchBuilder &d, int slot, const char *name, const std::vector<SVal> &want,
                  bool floatOnly = true) {
  if (!present(d, slot)) return Status::success();
  if (d.inputRank(slot) != int(want.size()))
    return makeError(name, " must have rank ", want.size());
  if (floatOnly && !isFloat(d.inputType(slot))) return makeError(name, " must be a float tensor");
  for (size_t a = 0; a < want.size(); ++a)
    d.check(d.eq(d.dim(slot, int(a)), want[a]), std::string(name) + " dim {} is {}, expected {}",
            {d.c(int64_t(a)), d.dim(slot, int(a)), want[a]});
  return Status::success();
}

std::vector<SVal> stateShape(DispatchBuilder &d, const Layer &l) {
  const SVal dirs = d.c(l.dirs);
  return l.batchFirst ? std::vector<SVal>{l.batch, dirs, l.hidden}
                      : std::vector<SVal>{dirs, l.batch, l.hidden};
}

Expected<Layer> readLayer(DispatchBuilder &d, Cell cell) {
  const Node &node = d.node();
  Layer l;
  l.cell = cell;
  l.gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  const int64_t layout = node.getInt("layout");
  if (layout != 0 && layout != 1) return makeError("layout must be 0 or 1, got ", layout);
  l.batchFirst = layout == 1;
  const std::string direction = node.getString("direction");
  if (direction == "bidirectional")
    l.dirs = 2;
  else if (direction == "reverse")
    l.reverseOnly = true;
  else if (direction != "forward")
    return makeError("direction '", direction, "' is unknown");
  const std::vector<std::string> defaults =
      cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
      : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                          : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  KILN_ASSIGN_OR_RETURN(l.acts, readActivations(node, defaults, l.dirs));
  if (node.hasAttr("clip")) {
    const float clip = node.getFloat("clip");
    if (!(clip > 0)) return makeError("clip must be positive, got ", clip);
    l.clip = clip;
  }
  l.linearBeforeReset = cell == Cell::Gru && node.getInt("linear_before_reset") != 0;
  l.inputForget = cell == Cell::Lstm && node.getInt("input_forget") != 0;

  l.x = d.inputType(kX);
  if (!isFloat(l.x)) return makeError("X must be a float tensor");
  l.c = l.x == DType::F64 ? DType::F64 : DType::F32;
  if (d.inputRank(kX) != 3 || d.inputRank(kW) != 3 || d.inputRank(kR) != 3)
    return makeError("X, W and R must have rank 3");
  l.seq = d.dim(kX, l.batchFirst ? 1 : 0);
  l.batch = d.dim(kX, l.batchFirst ? 0 : 1);
  l.input = d.dim(kX, 2);
  if (node.hasAttr("hidden_size")) {
    if (node.getInt("hidden_size") <= 0) return makeError("hidden_size must be positive");
    l.hidden = d.c(node.getInt("hidden_size"));
  } else {
    l.hidden = d.dim(kR, 2);
    d.check(d.lt(d.c(0), l.hidden), "hidden size must be positive, got {}", {l.hidden});
  }
  l.gh = d.mul(d.c(l.gates), l.hidden);
  const SVal dirs = d.c(l.dirs);
  KILN_RETURN_IF_ERROR(checkShape(d, kW, "W", {dirs, l.gh, l.input}));
  KILN_RETURN_IF_ERROR(checkShape(d, kR, "R", {dirs, l.gh, l.hidden}));
  KILN_RETURN_IF_ERROR(checkShape(d, kB, "B", {dirs, d.mul(d.c(2), l.gh)}));
  KILN_RETURN_IF_ERROR(checkShape(d, kSeqLens, "sequence_lens", {l.batch}, false));
  if (present(d, kSeqLens) && !isInt(d.inputType(kSeqLens)))
    return makeError("sequence_lens must be an integer tensor");
  KILN_RETURN_IF_ERROR(checkShape(d, kInitialH, "initial_h", stateShape(d, l)));
  if (cell == Cell::Lstm) {
    KILN_RETURN_IF_ERROR(checkShape(d, kInitialC, "initial_c", stateShape(d, l)));
    KILN_RETURN_IF_ERROR(checkShape(d, kP, "P", {dirs, d.mul(d.c(3), l.hidden)}));
  }
  return l;
}

// An element of input `slot` widened to the compute type (16-bit floats
// through f32, as the interpreter reads them through double).
int loadC(DispatchBuilder &d, KExpr &e, const Layer &l, int slot, kir::Affine at, int dyn = -1) {
  const DType t = d.inputType(slot);
  int v = e.b.load(d.in(slot), std::move(at), dyn);
  if (t == DType::F16 || t == DType::BF16) return e.cast(l.c, DType::F32, e.cast(DType::F32, t, v));
  return e.cast(l.c, t, v);
}

// Kernel 1: xw[dir, row, g] = X[row, :] . W[dir, g, :] for every row of X
// (in X's own order) and direction.
void projectionKernel(DispatchBuilder &d, const Layer &l) {
  const SVal rows = d.mul(l.seq, l.batch);
  kir::KernelBuilder &b = d.beginKernel(rows, d.mul(d.c(l.dirs), d.mul(l.gh, l.input)));
  KExpr e{b};
  const int acc = b.addVar("acc", l.c);
  const int r = d.loop(rows, {Schedule::Kind::Parallel, 1});
  const int dir = b.beginLoop(kir::Affine::constant(l.dirs));
  const int g = d.loop(l.gh);
  b.varWrite(acc, e.f(l.c, 0));
  const int k = d.loop(l.input, {Schedule::Kind::Vector, 8});
  kir::Affine xAt = d.term(l.input, r);
  xAt.add(1, -1, k);
  kir::Affine wAt = d.term(d.mul(l.gh, l.input), dir);
  d.addTerm(wAt, l.input, g).add(1, -1, k);
  b.varWrite(acc, e.add(l.c, b.varRead(acc),
                        e.mul(l.c, loadC(d, e, l, kX, xAt), loadC(d, e, l, kW, wAt))));
  b.endLoop();
  kir::Affine at = d.term(d.mul(rows, l.gh), dir);
  d.addTerm(at, l.gh, r).add(1, -1, g);
  b.store(d.scratch(l.xw), at, b.varRead(acc));
  b.endLoop();
  b.endLoop();
  b.endLoop();
  d.endKernel();
}

// Per-(direction, batch row) values of the recurrence kernel.
struct RowK {
  int dir, bi; // i64
  int state;   // offset of this row's [hidden] state in h / c scratch
  int work;    // offset of this row's work area
  int xw;      // offset of the current step's projection row (set per step)
  const Activation *acts;
  int hiddenV, ghV;
};

// The dot product of this row's state h with row `row` (i64) of R[dir].
int stateDot(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int row, int hBuf,
             int hOffset, int acc) {
  kir::KernelBuilder &b = e.b;
  b.varWrite(acc, e.f(l.c, 0));
  const int j = d.loop(l.hidden, {Schedule::Kind::Vector, 8});
  const kir::Affine at = kir::Affine{}.add(1, -1, j);
  const int rRow = e.mul(I64, e.add(I64, e.mul(I64, k.dir, k.ghV), row), k.hiddenV);
  const int hv = b.load(hBuf, at, hOffset);
  b.varWrite(acc, e.add(l.c, b.varRead(acc), e.mul(l.c, hv, loadC(d, e, l, kR, at, rRow))));
  b.endLoop();
  return b.varRead(acc);
}

// Wb[row] + Rb[row] of this direction (0 without B).
int biasSum(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int row) {
  if (!present(d, kB)) return e.f(l.c, 0);
  const int base = e.add(I64, e.mul(I64, k.dir, e.mul(I64, k.ghV, e.i64(2))), row);
  return e.add(l.c, loadC(d, e, l, kB, {}, base), loadC(d, e, l, kB, {}, e.add(I64, base, k.ghV)));
}
int biasPart(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int row, bool recurrent) {
  if (!present(d, kB)) return e.f(l.c, 0);
  int at = e.add(I64, e.mul(I64, k.dir, e.mul(I64, k.ghV, e.i64(2))), row);
  if (recurrent) at = e.add(I64, at, k.ghV);
  return loadC(d, e, l, kB, {}, at);
}

int clipped(KExpr &e, const Layer &l, int v) {
  if (l.clip <= 0) return v;
  return e.clamp(l.c, v, e.f(l.c, -l.clip), e.f(l.c, l.clip));
}

// (xw[row] + h . R[row]) + (Wb[row] + Rb[row]): a gate's pre-activation.
int gatePre(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int row, int acc) {
  const int xw = e.b.load(d.scratch(l.xw), {}, e.add(I64, k.xw, row));
  const int hr = stateDot(d, e, l, k, row, d.scratch(l.h), k.state, acc);
  return e.add(l.c, e.add(l.c, xw, hr), biasSum(d, e, l, k, row));
}

// Copies work[next .. next + hidden) into h.
void commitState(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int64_t next) {
  const int j = d.loop(l.hidden, {Schedule::Kind::Vector, 8});
  const kir::Affine at = kir::Affine{}.add(1, -1, j);
  const int v = e.b.load(d.scratch(l.work), d.term(l.hidden, -1, next).add(1, -1, j), k.work);
  e.b.store(d.scratch(l.h), at, v, k.state);
  e.b.endLoop();
}

// Element j (a loop variable) of hidden-sized slot `slot` of a row's work
// area, and of a row's state.
kir::Affine workAt(DispatchBuilder &d, const Layer &l, int64_t slot, int j) {
  return d.term(l.hidden, -1, slot).add(1, -1, j);
}
kir::Affine stateAt(int j) {
  return kir::Affine{}.add(1, -1, j);
}

// H = f(X Wi^T + H Ri^T + Wbi + Rbi); work slot 0 holds the next H.
void rnnStep(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int acc) {
  kir::KernelBuilder &b = e.b;
  const DType c = l.c;
  const int j = d.loop(l.hidden);
  const int v = activate(e, c, k.acts[0], clipped(e, l, gatePre(d, e, l, k, e.var(j), acc)));
  b.store(d.scratch(l.work), workAt(d, l, 0, j), v, k.work);
  b.endLoop();
  commitState(d, e, l, k, 0);
}

// The GRU equations of the interpreter's GruCell (z, r, then the
// candidate from r * H or, with linear_before_reset, r * (H Rh^T + Rbh));
// work slots: 0 z, 1 r, 2 r * H, 3 the next H.
void gruStep(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int acc) {
  kir::KernelBuilder &b = e.b;
  const DType c = l.c;
  int j = d.loop(l.hidden);
  const int z = activate(e, c, k.acts[0], clipped(e, l, gatePre(d, e, l, k, e.var(j), acc)));
  const int r = activate(e, c, k.acts[0],
                         clipped(e, l, gatePre(d, e, l, k, e.add(I64, k.hiddenV, e.var(j)), acc)));
  b.store(d.scratch(l.work), workAt(d, l, 0, j), z, k.work);
  b.store(d.scratch(l.work), workAt(d, l, 1, j), r, k.work);
  b.store(d.scratch(l.work), workAt(d, l, 2, j),
          e.mul(c, r, b.load(d.scratch(l.h), stateAt(j), k.state)), k.work);
  b.endLoop();
  j = d.loop(l.hidden);
  const int row = e.add(I64, e.mul(I64, e.i64(2), k.hiddenV), e.var(j));
  const int xw = b.load(d.scratch(l.xw), {}, e.add(I64, k.xw, row));
  const int wb = biasPart(d, e, l, k, row, false), rb = biasPart(d, e, l, k, row, true);
  const int zv = b.load(d.scratch(l.work), workAt(d, l, 0, j), k.work);
  const int rv = b.load(d.scratch(l.work), workAt(d, l, 1, j), k.work);
  int pre;
  if (l.linearBeforeReset) { // xw + r * (H Rh^T + Rbh) + Wbh
    const int hr = stateDot(d, e, l, k, row, d.scratch(l.h), k.state, acc);
    pre = e.add(c, e.add(c, xw, e.mul(c, rv, e.add(c, hr, rb))), wb);
  } else { // xw + (r * H) Rh^T + Wbh + Rbh
    const int rhOffset = e.add(I64, k.work, e.mul(I64, e.i64(2), k.hiddenV));
    const int rhr = stateDot(d, e, l, k, row, d.scratch(l.work), rhOffset, acc);
    pre = e.add(c, e.add(c, e.add(c, xw, rhr), wb), rb);
  }
  const int cand = activate(e, c, k.acts[1], clipped(e, l, pre));
  const int hv = b.load(d.scratch(l.h), stateAt(j), k.state);
  const int next = e.add(c, e.mul(c, e.sub(c, e.f(c, 1), zv), cand), e.mul(c, zv, hv));
  b.store(d.scratch(l.work), workAt(d, l, 3, j), next, k.work);
  b.endLoop();
  commitState(d, e, l, k, 3);
}

// The LSTM equations of the interpreter's LstmCell (peepholes, clip,
// input_forget); work slots 0..3 the gate pre-activations i, o, f, c, 4
// the next H.
void lstmStep(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int acc) {
  kir::KernelBuilder &b = e.b;
  const DType c = l.c;
  const int g = d.loop(l.gh);
  b.store(d.scratch(l.work), stateAt(g), gatePre(d, e, l, k, e.var(g), acc), k.work);
  b.endLoop();
  const int j = d.loop(l.hidden);
  auto pre = [&](int64_t slot) { return b.load(d.scratch(l.work), workAt(d, l, slot, j), k.work); };
  auto peephole = [&](int64_t which) { // P is i, o, f
    if (!present(d, kP)) return e.f(c, 0);
    const int base = e.mul(I64, k.dir, e.mul(I64, e.i64(3), k.hiddenV));
    return loadC(d, e, l, kP, d.term(l.hidden, -1, which).add(1, -1, j), base);
  };
  const int cOld = b.load(d.scratch(l.state), stateAt(j), k.state);
  const Activation &f = k.acts[0], &gAct = k.acts[1], &hAct = k.acts[2];
  const int ig = activate(e, c, f, clipped(e, l, e.add(c, pre(0), e.mul(c, peephole(0), cOld))));
  const int fg =
      l.inputForget
          ? e.sub(c, e.f(c, 1), ig)
          : activate(e, c, f, clipped(e, l, e.add(c, pre(2), e.mul(c, peephole(2), cOld))));
  const int cand = activate(e, c, gAct, clipped(e, l, pre(3)));
  const int cell = e.add(c, e.mul(c, fg, cOld), e.mul(c, ig, cand));
  const int og = activate(e, c, f, clipped(e, l, e.add(c, pre(1), e.mul(c, peephole(1), cell))));
  b.store(d.scratch(l.state), stateAt(j), cell, k.state);
  b.store(d.scratch(l.work), workAt(d, l, 4, j), e.mul(c, og, activate(e, c, hAct, cell)), k.work);
  b.endLoop();
  commitState(d, e, l, k, 4);
}

// One step of the layer's cell for this row.
void cellStep(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int acc) {
  switch (l.cell) {
  case Cell::Rnn:
    return rnnStep(d, e, l, k, acc);
  case Cell::Gru:
    return gruStep(d, e, l, k, acc);
  case Cell::Lstm:
    return lstmStep(d, e, l, k, acc);
  }
}

// Offsets of Y's row (t, dir, b) and of the state (dir, b) as laid out in
// initial_h / Y_h, by layout.
int yOffset(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k, int t) {
  const int dirs = e.i64(l.dirs), hidden = k.hiddenV;
  const int row =
      l.batchFirst
          ? e.add(I64, e.mul(I64, e.add(I64, e.mul(I64, k.bi, d.value(l.seq)), t), dirs), k.dir)
          : e.add(I64, e.mul(I64, e.add(I64, e.mul(I64, t, dirs), k.dir), d.value(l.batch)), k.bi);
  return e.mul(I64, row, hidden);
}
int stateIoOffset(DispatchBuilder &d, KExpr &e, const Layer &l, const RowK &k) {
  const int row = l.batchFirst ? e.add(I64, e.mul(I64, k.bi, e.i64(l.dirs)), k.dir)
                               : e.add(I64, e.mul(I64, k.dir, d.value(l.batch)), k.bi);
  return e.mul(I64, row, k.hiddenV);
}

bool outputWanted(const DispatchBuilder &d, int i) {
  return i < d.node().numOutputs() && d.node().output(i) != nullptr;
}

// Kernel 2: the recurrence, one (direction, batch row) per parallel
// iteration.
void recurrenceKernel(DispatchBuilder &d, const Layer &l, int badLength) {
  const SVal rows = d.mul(d.c(l.dirs), l.batch);
  kir::KernelBuilder &b = d.beginKernel(rows, d.mul(l.seq, d.mul(l.gh, l.hidden)));
  KExpr e{b};
  const DType c = l.c;
  const int acc = b.addVar("acc", c);
  const int p = d.loop(rows, {Schedule::Kind::Parallel, 1});
  RowK k{};
  k.hiddenV = d.value(l.hidden);
  k.ghV = d.value(l.gh);
  const int batchV = d.value(l.batch), seqV = d.value(l.seq);
  k.dir = l.dirs == 1 ? e.i64(0) : e.div(I64, e.var(p), batchV);
  k.bi = e.sub(I64, e.var(p), e.mul(I64, k.dir, batchV));
  k.state = e.mul(I64, e.var(p), k.hiddenV);
  k.work = e.mul(I64, e.var(p), e.mul(I64, e.i64(l.workPerRow), k.hiddenV));
  const int ioAt = stateIoOffset(d, e, l, k);
  const bool lstm = l.cell == Cell::Lstm;

  // The initial state.
  int j = d.loop(l.hidden, {Schedule::Kind::Vector, 8});
  kir::Affine at = kir::Affine{}.add(1, -1, j);
  b.store(d.scratch(l.h), at,
          present(d, kInitialH) ? loadC(d, e, l, kInitialH, at, ioAt) : e.f(c, 0), k.state);
  if (lstm)
    b.store(d.scratch(l.state), at,
            present(d, kInitialC) ? loadC(d, e, l, kInitialC, at, ioAt) : e.f(c, 0), k.state);
  b.endLoop();

  int len = seqV;
  if (present(d, kSeqLens)) {
    len = castToIndex(b, d.inputType(kSeqLens), b.load(d.in(kSeqLens), {}, k.bi));
    d.raise(e.lor(e.lt(I64, len, e.i64(0)), e.gt(I64, len, seqV)), badLength);
  }
  // The activations of this direction: both directions share the kernel,
  // so a bidirectional layer with different lists branches on it.
  const size_t perDir = l.acts.size() / size_t(l.dirs);
  const int reverse = l.reverseOnly ? e.boolean(true) : e.eq(I64, k.dir, e.i64(1));
  const int xRows = d.value(d.mul(l.seq, l.batch));

  const int step = d.loop(l.seq);
  const int t =
      e.sel(I64, reverse, e.sub(I64, e.sub(I64, seqV, e.i64(1)), e.var(step)), e.var(step));
  const int valid = e.lt(I64, t, len);
  const int xRow = l.batchFirst ? e.add(I64, e.mul(I64, k.bi, seqV), t)
                                : e.add(I64, e.mul(I64, t, batchV), k.bi);
  k.xw = e.mul(I64, e.add(I64, e.mul(I64, k.dir, xRows), xRow), k.ghV);
  const bool sameActs =
      std::equal(l.acts.begin(), l.acts.begin() + long(perDir), l.acts.end() - long(perDir),
                 [](const Activation &x, const Activation &y) {
                   return x.kind == y.kind && x.alpha == y.alpha && x.beta == y.beta;
                 });
  for (int64_t dir = 0; dir < (sameActs ? 1 : l.dirs); ++dir) {
    k.acts = l.acts.data() + size_t(dir) * perDir;
    b.beginIf(sameActs ? valid : e.land(valid, e.eq(I64, k.dir, e.i64(dir))));
    cellStep(d, e, l, k, acc);
    b.endIf();
  }
  if (outputWanted(d, 0)) {
    const int yAt = yOffset(d, e, l, k, t);
    j = d.loop(l.hidden, {Schedule::Kind::Vector, 8});
    at = kir::Affine{}.add(1, -1, j);
    const int v = e.sel(c, valid, b.load(d.scratch(l.h), at, k.state), e.f(c, 0));
    b.store(d.out(0), at, e.cast(l.x, c, v), yAt);
    b.endLoop();
  }
  b.endLoop(); // step

  // Y_h / Y_c: the last valid state, zeros for an empty sequence.
  const int empty = e.eq(I64, len, e.i64(0));
  for (int o = 1; o <= (lstm ? 2 : 1); ++o) {
    if (!outputWanted(d, o)) continue;
    j = d.loop(l.hidden, {Schedule::Kind::Vector, 8});
    at = kir::Affine{}.add(1, -1, j);
    const int v = b.load(d.scratch(o == 1 ? l.h : l.state), at, k.state);
    b.store(d.out(o), at, e.cast(l.x, c, e.sel(c, empty, e.f(c, 0), v)), ioAt);
    b.endLoop();
  }
  b.endLoop(); // p
  d.endKernel();
}

Status lowerLayer(DispatchBuilder &d, Cell cell) {
  KILN_ASSIGN_OR_RETURN(Layer l, readLayer(d, cell));
  const int outs = d.node().numOutputs();
  const std::vector<SVal> state = stateShape(d, l);
  const SVal dirs = d.c(l.dirs);
  if (outs > 0)
    d.setOutput(0,
                l.batchFirst ? std::vector<SVal>{l.batch, l.seq, dirs, l.hidden}
                             : std::vector<SVal>{l.seq, dirs, l.batch, l.hidden},
                l.x);
  for (int o = 1; o < outs; ++o) d.setOutput(o, state, l.x);

  const SVal stateSize = d.mul(d.mul(dirs, l.batch), l.hidden);
  l.xw = d.addScratch(l.c, d.mul(d.mul(dirs, d.mul(l.seq, l.batch)), l.gh));
  l.h = d.addScratch(l.c, stateSize);
  if (cell == Cell::Lstm) l.state = d.addScratch(l.c, stateSize);
  l.workPerRow = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 4 : 5;
  l.work = d.addScratch(l.c, d.mul(stateSize, d.c(l.workPerRow)));
  const int badLength = d.statusCode("a sequence_lens value is outside [0, seq_length]");
  projectionKernel(d, l);
  recurrenceKernel(d, l, badLength);
  return Status::success();
}

Status lowerRnn(DispatchBuilder &d) {
  return lowerLayer(d, Cell::Rnn);
}
Status lowerGru(DispatchBuilder &d) {
  return lowerLayer(d, Cell::Gru);
}
Status lowerLstm(DispatchBuilder &d) {
  return lowerLayer(d, Cell::Lstm);
}

} // namespace
} // namespace kiln::lower
