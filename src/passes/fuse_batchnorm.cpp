// fuse-batchnorm: removes inference BatchNormalization by folding it into the
// weights before it, or into a per-channel multiply-add.
//
// Before: a verified, topologically sorted model.
// After:  no BatchNormalization that is in inference form (training_mode 0,
//         running-statistics outputs unused), has f32 data and constant
//         scale, bias, mean and variance of one value per channel. With
//         s = scale / sqrt(var + eps) and t = bias - mean * s per channel c:
//           - after a Conv whose result only the BN reads and whose weight
//             [C, K/g, k...] is a constant only it reads: weight[c] *= s[c],
//             bias[c] = bias[c] * s[c] + t[c] (a zero bias when it had none);
//           - after a ConvTranspose (weight [Cin, C/g, k...], output channel
//             c = group * C/g + column): the same per output channel;
//           - after an Add of a per-channel constant c ([C,1,...,1]) to such
//             a Conv or ConvTranspose (Paddle's way of exporting the bias),
//             or of c ([N]) to a 2-D MatMul (a Gemm after decompose): the
//             same with t' = t + s * c, and the Add goes too;
//           - after a Gemm (the BN's channels are its columns N): B's columns
//             scaled, C' = beta * C * s + t, beta = 1;
//           - after a 2-D MatMul by a constant [K, N]: B's columns scaled and
//             an Add of t (the bias epilogue the fusion passes absorb);
//           - otherwise x * s + t, as Mul and Add by constants shaped
//             [C, 1, ..., 1] so they broadcast along axis 1 and elementwise
//             fusion can take them.
//         A weight that other nodes also read is not rewritten (that would
//         duplicate it): the BN becomes Mul + Add. Values keep their names
//         where they are graph outputs; the model stays sorted and valid.
//
// Algorithm: two patterns on BatchNormalization, run by the pattern driver:
//  1. fold-into-producer: check the BN, compute s and t in double, look
//     through a per-channel bias Add, match the producer and its constant
//     weights, rewrite the producer's weight (and bias) inputs with new
//     constants, move the BN's uses to its result.
//  2. as-mul-add: the same s and t as constants of a Mul and an Add.
#include "passes/match.h"
#include "passes/rewrite.h"

#include <cmath>

namespace kiln {
namespace {

struct Affine {
  std::vector<double> scale, shift; // per channel: y = x * scale + shift
};

// s and t of an inference-form BatchNormalization, or nullopt.
std::optional<Affine> affineOf(const Node &bn, Rewriter &rw) {
  if (bn.getInt("training_mode") != 0) return std::nullopt;
  for (int i = 1; i < bn.numOutputs(); ++i)
    if (rw.numUses(bn.output(i)) > 0) return std::nullopt;
  const Type &x = bn.input(0)->type();
  if (!x.isTensor() || x.dtype() != DType::F32) return std::nullopt;
  const Tensor *p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = constantOf(bn.input(i + 1));
    if (!p[i] || !isFloat(p[i]->dtype()) || p[i]->numel() != p[0]->numel()) return std::nullopt;
  }
  const double eps = bn.getFloat("epsilon");
  Affine a;
  for (int64_t c = 0; c < p[0]->numel(); ++c) {
    double s = p[0]->getDouble(c) / std::sqrt(p[3]->getDouble(c) + eps);
    a.scale.push_back(s);
    a.shift.push_back(p[1]->getDouble(c) - p[2]->getDouble(c) * s);
  }
  return a;
}

int64_t channels(const Affine &a) {
  return static_cast<int64_t>(a.scale.size());
}

Tensor vectorOf(const std::vector<double> &v, Shape64 shape) {
  Tensor t(DType::F32, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.setDouble(static_cast<int64_t>(i), v[i]);
  return t;
}

// A constant f32 weight of the given rank range that only `user` reads.
const Tensor *ownWeight(const Value *w, Rewriter &rw, int64_t minRank) {
  const Tensor *t = constantOf(w);
  if (!t || t->dtype() != DType::F32 || t->rank() < minRank || !rw.hasOneUse(w)) return nullptr;
  return t;
}

// The bias after scaling: bias * s + t, a zero bias when absent.
std::optional<Tensor> foldedBias(const Value *bias, const Affine &a) {
  std::vector<double> out = a.shift;
  if (bias) {
    const Tensor *b = constantOf(bias);
    if (!b || b->numel() != channels(a)) return std::nullopt;
    for (int64_t c = 0; c < channels(a); ++c) out[c] += b->getDouble(c) * a.scale[c];
  }
  return vectorOf(out, {channels(a)});
}

// Weight with element i scaled by s[channelOf(i)].
template <class F> Tensor scaled(const Tensor &w, const Affine &a, F channelOf) {
  Tensor out = w.clone();
  float *d = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) d[i] = static_cast<float>(d[i] * a.scale[channelOf(i)]);
  return out;
}

// Replaces inputs of `n` by new constants named after the old ones.
void setConstantInput(Node &n, int i, Tensor t, Rewriter &rw) {
  std::string name = n.input(i) ? n.input(i)->name() + ".bn" : n.output(0)->name() + ".bias";
  rw.setInput(n, i, rw.constant(*n.owner(), std::move(t), std::move(name)));
}

bool foldIntoConv(Node &conv, const Affine &a, Rewriter &rw) {
  const Tensor *w = ownWeight(conv.input(1), rw, 3);
  if (!w) return false;
  const bool transposed = conv.op() == OpKind::ConvTranspose;
  const int64_t group = conv.getInt("group");
  const int64_t inner = numelOf(Shape64(w->shape().begin() + 2, w->shape().end()));
  if (group <= 0 || w->dim(0) % group != 0) return false;
  const int64_t outChannels = transposed ? w->dim(1) * group : w->dim(0);
  if (outChannels != channels(a)) return false;
  std::optional<Tensor> bias = foldedBias(conv.input(2), a);
  if (!bias) return false;
  const int64_t perGroupIn = w->dim(0) / group, perGroupOut = w->dim(1);
  Tensor weight = scaled(*w, a, [&](int64_t i) {
    if (!transposed) return i / (w->dim(1) * inner);
    int64_t c = i / (perGroupOut * inner), column = i / inner % perGroupOut;
    return c / perGroupIn * perGroupOut + column;
  });
  setConstantInput(conv, 1, std::move(weight), rw);
  setConstantInput(conv, 2, std::move(*bias), rw);
  return true;
}

bool foldIntoGemm(Node &gemm, const Affine &a, Rewriter &rw) {
  const Tensor *b = ownWeight(gemm.input(1), rw, 2);
  if (!b || b->rank() != 2) return false;
  const bool transB = gemm.getInt("transB") != 0;
  const int64_t n = channels(a), cols = b->dim(1);
  if ((transB ? b->dim(0) : cols) != n) return false;
  // C' = beta * C * s + t over C broadcast to [rows, N].
  int64_t rows = 1, cCols = 1;
  const Tensor *c = gemm.input(2) ? constantOf(gemm.input(2)) : nullptr;
  if (gemm.input(2)) {
    if (!c || c->rank() > 2) return false;
    if (c->rank() >= 1) cCols = c->dim(c->rank() - 1);
    if (c->rank() == 2) rows = c->dim(0);
    if (cCols != 1 && cCols != n) return false;
  }
  const double beta = gemm.getFloat("beta");
  std::vector<double> bias(rows * n);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double cv = c ? c->getDouble(i * cCols + (cCols == 1 ? 0 : j)) : 0.0;
      bias[i * n + j] = beta * cv * a.scale[j] + a.shift[j];
    }
  Tensor weight = scaled(*b, a, [&](int64_t i) { return transB ? i / cols : i % cols; });
  setConstantInput(gemm, 1, std::move(weight), rw);
  setConstantInput(gemm, 2, vectorOf(bias, rows == 1 ? Shape64{n} : Shape64{rows, n}), rw);
  gemm.removeAttr("beta");
  return true;
}

// MatMul keeps no bias: B's columns are scaled and t is added after it.
Value *foldIntoMatMul(Node &mm, const Affine &a, Rewriter &rw) {
  const Tensor *b = ownWeight(mm.input(1), rw, 2);
  if (!b || b->rank() != 2 || rankOf(mm.input(0)) != 2 || b->dim(1) != channels(a)) return nullptr;
  const int64_t cols = b->dim(1);
  setConstantInput(mm, 1, scaled(*b, a, [&](int64_t i) { return i % cols; }), rw);
  Value *t = rw.constant(*mm.owner(), vectorOf(a.shift, {cols}), mm.output(0)->name() + ".bn");
  Node *add = rw.create(*mm.owner(), OpKind::Add, {mm.output(0), t}, suffixed(mm.name(), ".bn"));
  add->output(0)->setType(mm.output(0)->type());
  return add->output(0);
}

// The elements of a constant that holds one value per channel of a rank
// `rank` value, shaped to broadcast along axis 1 ([C,1,...,1] or [1,C,1,...]).
std::optional<std::vector<double>> perChannel(const Value *c, int64_t channels, int64_t rank) {
  const Tensor *t = constantOf(c);
  if (!t || !isFloat(t->dtype()) || t->numel() != channels || t->rank() > rank) return std::nullopt;
  const int64_t axis = 1 - (rank - t->rank()); // where axis 1 of the value falls in t
  for (int64_t i = 0; i < t->rank(); ++i)
    if (t->dim(i) != (i == axis ? channels : 1)) return std::nullopt;
  if (axis < 0 && channels != 1) return std::nullopt;
  std::vector<double> v(channels);
  for (int64_t i = 0; i < channels; ++i) v[i] = t->getDouble(i);
  return v;
}

// Paddle exports a ConvTranspose's bias as an Add of a [C,1,1] constant, and
// decompose turns a Gemm's into an Add after a MatMul: BN(y + c) =
// s*y + (s*c + t), so the Add goes into the affine map and the BN folds into
// the producer of y. Returns y, or x when there is no such Add.
Value *peelBiasAdd(Value *x, Affine &a, Rewriter &rw) {
  Node *add = producedBy(x, OpKind::Add);
  std::optional<int64_t> rank = rankOf(x);
  if (!add || !rank || !rw.hasOneUse(x)) return x;
  for (int k = 0; k < 2; ++k) {
    Value *y = add->input(1 - k);
    Node *p = y->producer();
    std::optional<std::vector<double>> c = perChannel(add->input(k), channels(a), *rank);
    const bool matmul = p && p->op() == OpKind::MatMul && *rank == 2;
    if (!c || !p || !rw.hasOneUse(y) || p->owner() != add->owner() || rankOf(y) != rank ||
        (p->op() != OpKind::Conv && p->op() != OpKind::ConvTranspose && !matmul))
      continue;
    for (int64_t i = 0; i < channels(a); ++i) a.shift[i] += a.scale[i] * (*c)[i];
    return y;
  }
  return x;
}

bool foldIntoProducer(Node &bn, Rewriter &rw) {
  Value *out = bn.output(0);
  std::optional<Affine> a = affineOf(bn, rw);
  if (!a) return false;
  Value *x = peelBiasAdd(bn.input(0), *a, rw);
  Node *p = x->producer();
  if (!p || !rw.hasOneUse(x) || p->owner() != bn.owner() || !rw.canReplace(out, x)) return false;
  Value *result = x;
  switch (p->op()) {
  case OpKind::Conv:
  case OpKind::ConvTranspose:
    if (!foldIntoConv(*p, *a, rw)) return false;
    break;
  case OpKind::Gemm:
    if (!foldIntoGemm(*p, *a, rw)) return false;
    break;
  case OpKind::MatMul:
    result = foldIntoMatMul(*p, *a, rw);
    if (!result) return false;
    break;
  default:
    return false;
  }
  // x now computes what the BN did: it takes the BN's name too, so values
  // still match the source model's by name (for layer-by-layer comparison).
  x->setType(out->type());
  result->setName(out->name());
  return rw.replace(out, result);
}

bool asMulAdd(Node &bn, Rewriter &rw) {
  Value *x = bn.input(0), *out = bn.output(0);
  std::optional<int64_t> rank = rankOf(x);
  std::optional<Affine> a = affineOf(bn, rw);
  if (!rank || *rank < 2 || !a || !rw.canReplace(out)) return false;
  // [C, 1, ..., 1]: aligned with axis 1 of x by broadcasting from the back.
  Shape64 shape(*rank - 1, 1);
  shape[0] = channels(*a);
  Graph &g = *bn.owner();
  const std::string &name = out->name();
  Value *s = rw.constant(g, vectorOf(a->scale, shape), name + ".scale");
  Value *t = rw.constant(g, vectorOf(a->shift, shape), name + ".shift");
  Node *mul = rw.create(g, OpKind::Mul, {x, s}, suffixed(bn.name(), ".scale"));
  mul->output(0)->setName(name + ".scaled");
  mul->output(0)->setType(out->type());
  Node *add = rw.create(g, OpKind::Add, {mul->output(0), t}, bn.name());
  add->output(0)->setType(out->type());
  return rw.replace(out, add->output(0));
}

const PatternSet &fuseBatchnormPatterns() {
  static const PatternSet set{
      "fuse-batchnorm",
      {
          {"fold-into-producer", OpKind::BatchNormalization, foldIntoProducer},
          {"as-mul-add", OpKind::BatchNormalization, asMulAdd},
      }};
  return set;
}

} // namespace

std::unique_ptr<Pass> createFuseBatchnormPass() {
  return makePatternPass(fuseBatchnormPatterns());
}

} // namespace kiln
