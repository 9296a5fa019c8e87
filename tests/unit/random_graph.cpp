#include "random_graph.h"

#include "ir/infer/infer.h"
#include "ir/verifier.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>

namespace kiln::testing {

namespace {

constexpr int64_t kDims[] = {1, 2, 3, 5, 7, 8, 16, 17, 31, 64};

// Draws from std::mt19937_64 with our own mappings, so that a seed means the
// same graph with every standard library.
class Rng {
public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform in [lo, hi], both included.
  int64_t range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(engine_() % static_cast<uint64_t>(hi - lo + 1));
  }
  double unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  float uniform(float lo, float hi) { return lo + static_cast<float>(unit()) * (hi - lo); }
  bool chance(double p) { return unit() < p; }
  float normal() { // Box-Muller
    double u1 = std::max(unit(), 1e-12), u2 = unit();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(2.0 * std::numbers::pi * u2));
  }
  int64_t dim() { return kDims[range(0, std::size(kDims) - 1)]; }
  template <class T> const T &pick(const std::vector<T> &v) { return v[range(0, v.size() - 1)]; }
  template <class T> void shuffle(std::vector<T> &v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[range(0, i - 1)]);
  }

private:
  std::mt19937_64 engine_;
};

// Uniform in [-scale, scale] or normal with sd scale, never exactly zero.
Tensor randomF32(Rng &rng, const Shape64 &shape, float scale) {
  Tensor t(DType::F32, shape);
  const bool normal = rng.chance(0.3);
  for (float &v : t.span<float>()) {
    do v = scale * (normal ? rng.normal() : rng.uniform(-1, 1));
    while (v == 0);
  }
  return t;
}

Shape64 shapeOf(const Value *v) {
  return *v->type().shape().staticDims();
}
int64_t rankOf(const Value *v) {
  return v->type().shape().rank();
}

// Dims of a shape that broadcasts against `s`: some leading dims dropped,
// some dims set to 1 (numpy rules; the result never grows `s`).
Shape64 broadcastableShape(Rng &rng, const Shape64 &s) {
  Shape64 out(s.begin() + rng.range(0, s.size()), s.end());
  for (int64_t &d : out)
    if (rng.chance(0.35)) d = 1;
  return out;
}

// Whether `b` broadcasts to `a` without growing it (PRelu's slope rule).
bool broadcastsTo(const Shape64 &b, const Shape64 &a) {
  if (b.size() > a.size()) return false;
  for (size_t i = 0; i < b.size(); ++i) {
    int64_t bd = b[b.size() - 1 - i], ad = a[a.size() - 1 - i];
    if (bd != 1 && bd != ad) return false;
  }
  return true;
}

std::optional<Shape64> broadcast(const Shape64 &a, const Shape64 &b) {
  Shape64 out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t ad = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t bd = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (ad != bd && ad != 1 && bd != 1) return std::nullopt;
    out[out.size() - 1 - i] = std::max(ad, bd);
  }
  return out;
}

class Generator {
public:
  Generator(uint64_t seed, const RandomGraphOptions &options, RandomGraph &out)
      : seed_(seed), rng_(seed),
        noiseRng_(options.perturbationSeed ^ (seed * 0x9e3779b97f4a7c15ull)), options_(options),
        out_(out), g_(*out.model.graph) {}

  Status build();

private:
  using Attrs = std::map<std::string, Attribute>;
  using OpFn = Expected<Value *> (Generator::*)(Value *);

  // Adds a node, infers its output type and checks that it is static. f32
  // outputs join the pool that later ops read from.
  Expected<Value *> emit(OpKind op, std::vector<Value *> inputs, Attrs attrs = {});
  // v times a random 1+d (RandomGraphOptions::perturbation), or v itself.
  Expected<Value *> perturbed(Value *v);
  Value *constant(Tensor t);
  // Random f32 data, uniform in [-scale, scale] or normal with sd scale,
  // never exactly zero.
  Value *randomConstant(const Shape64 &shape, float scale = 1.0f);
  Value *scalar(float v) { return constant(Tensor::scalar(v)); }
  Value *ints(const std::vector<int64_t> &v) {
    return constant(Tensor::fromVector(v, {static_cast<int64_t>(v.size())}));
  }
  Tensor randomTensor(const Shape64 &shape, float scale);
  bool fits(const Shape64 &s) const { return numelOf(s) <= options_.maxValueElements; }
  // Pool values whose shapes satisfy `ok`.
  template <class F> std::vector<Value *> poolWhere(F &&ok) const {
    std::vector<Value *> out;
    for (Value *v : pool_)
      if (ok(shapeOf(v))) out.push_back(v);
    return out;
  }

  Expected<Value *> unary(Value *x);
  Expected<Value *> binary(Value *x);
  Expected<Value *> reduce(Value *x);
  Expected<Value *> softmax(Value *x);
  Expected<Value *> layerNorm(Value *x);
  Expected<Value *> matmul(Value *x);
  Expected<Value *> gemm(Value *x);
  Expected<Value *> conv(Value *x);
  Expected<Value *> convEpilogue(Value *x, Value *y);
  Expected<Value *> pool(Value *x);
  Expected<Value *> reshape(Value *x);
  Expected<Value *> transpose(Value *x);
  Expected<Value *> slice(Value *x);
  Expected<Value *> concat(Value *x);
  Expected<Value *> flatten(Value *x);

  uint64_t seed_;
  Rng rng_;
  Rng noiseRng_; // perturbations only: rng_ draws the same with and without them
  const RandomGraphOptions &options_;
  RandomGraph &out_;
  Graph &g_;
  std::vector<Value *> pool_;        // f32 values ops may read, in creation order
  std::vector<std::string> emitted_; // ops of the random op being built
  int nextId_ = 0;
};

Expected<Value *> Generator::emit(OpKind op, std::vector<Value *> inputs, Attrs attrs) {
  const int id = nextId_++;
  Node *n = g_.addNode(op, std::move(inputs), 1, "n" + std::to_string(id));
  for (auto &[name, a] : attrs) n->setAttr(name, std::move(a));
  n->output(0)->setName("v" + std::to_string(id));
  KILN_RETURN_IF_ERROR(inferNode(*n));
  const Type &t = n->output(0)->type();
  if (!t.isTensor() || !t.shape().isStatic())
    return makeError(n->describe(), ": inferred type ", t.str(), " is not a static tensor");
  emitted_.emplace_back(opName(op));
  Value *v = n->output(0);
  if (t.dtype() != DType::F32) return v;
  KILN_ASSIGN_OR_RETURN(v, perturbed(v));
  pool_.push_back(v);
  return v;
}

// Every value, exact ones (inputs, Concat...) included: a backward-stable
// kernel computes the exact result of slightly perturbed inputs, so this
// models the rounding inside the ops that read the value too.
Expected<Value *> Generator::perturbed(Value *v) {
  if (options_.perturbation <= 0) return v;
  Tensor noise(DType::F32, shapeOf(v));
  const float amp = static_cast<float>(options_.perturbation);
  for (float &f : noise.span<float>()) f = 1.0f + amp * noiseRng_.uniform(-1, 1);
  Node *m = g_.addNode(OpKind::Mul, {v, constant(std::move(noise))}, 1, "perturb_" + v->name());
  m->output(0)->setName(v->name() + "_perturbed");
  KILN_RETURN_IF_ERROR(inferNode(*m));
  return m->output(0);
}

Value *Generator::constant(Tensor t) {
  const int id = nextId_++;
  Node *n = g_.addNode(OpKind::Constant, {}, 1, "c" + std::to_string(id));
  n->output(0)->setName("c" + std::to_string(id));
  n->output(0)->setType(Type::tensor(t.dtype(), Shape::fromStatic(t.shape())));
  n->setAttr("value", Attribute::ofTensor(std::move(t)));
  return n->output(0);
}

Tensor Generator::randomTensor(const Shape64 &shape, float scale) {
  return randomF32(rng_, shape, scale);
}

Value *Generator::randomConstant(const Shape64 &shape, float scale) {
  return constant(randomTensor(shape, scale));
}

// ---- elementwise --------------------------------------------------------------

Expected<Value *> Generator::unary(Value *x) {
  static const std::vector<OpKind> kinds = {
      OpKind::Relu,      OpKind::Sigmoid, OpKind::Tanh,     OpKind::Exp,         OpKind::Abs,
      OpKind::Neg,       OpKind::Sqrt,    OpKind::Erf,      OpKind::HardSigmoid, OpKind::HardSwish,
      OpKind::LeakyRelu, OpKind::Clip,    OpKind::Softplus, OpKind::Gelu};
  const OpKind op = rng_.pick(kinds);
  switch (op) {
  case OpKind::Exp: { // on bounded values only
    KILN_ASSIGN_OR_RETURN(Value * b, emit(rng_.chance(0.5) ? OpKind::Tanh : OpKind::Sigmoid, {x}));
    return emit(OpKind::Exp, {b});
  }
  case OpKind::Sqrt: { // sqrt(|x|), sometimes sqrt(|x| + c) as in a norm's epsilon
    KILN_ASSIGN_OR_RETURN(Value * a, emit(OpKind::Abs, {x}));
    const int64_t offset = rng_.range(0, 2);
    if (offset > 0) {
      KILN_ASSIGN_OR_RETURN(a, emit(OpKind::Add, {a, scalar(offset == 1 ? 0.01f : 1.0f)}));
    }
    return emit(OpKind::Sqrt, {a});
  }
  case OpKind::HardSigmoid: {
    Attrs attrs;
    if (rng_.chance(0.5)) {
      attrs["alpha"] = Attribute::ofFloat(rng_.uniform(0.1f, 0.5f));
      attrs["beta"] = Attribute::ofFloat(rng_.uniform(0.3f, 0.7f));
    }
    return emit(op, {x}, std::move(attrs));
  }
  case OpKind::LeakyRelu: {
    Attrs attrs;
    if (rng_.chance(0.7)) attrs["alpha"] = Attribute::ofFloat(rng_.uniform(0.01f, 0.5f));
    return emit(op, {x}, std::move(attrs));
  }
  case OpKind::Clip: {
    Value *lo = scalar(rng_.uniform(-1.0f, -0.05f)), *hi = scalar(rng_.uniform(0.05f, 1.0f));
    switch (rng_.range(0, 3)) {
    case 0:
      return emit(op, {x, lo});
    case 1:
      return emit(op, {x, nullptr, hi});
    case 2:
      return emit(op, {x, scalar(0.0f), scalar(6.0f)}); // Relu6
    default:
      return emit(op, {x, lo, hi});
    }
  }
  case OpKind::Gelu: {
    Attrs attrs;
    if (rng_.chance(0.4)) attrs["approximate"] = Attribute::ofString("tanh");
    return emit(op, {x}, std::move(attrs));
  }
  default:
    return emit(op, {x});
  }
}

Expected<Value *> Generator::binary(Value *x) {
  static const std::vector<OpKind> kinds = {OpKind::Add, OpKind::Sub, OpKind::Mul,   OpKind::Div,
                                            OpKind::Max, OpKind::Min, OpKind::Where, OpKind::PRelu};
  const OpKind op = rng_.pick(kinds);
  const Shape64 xs = shapeOf(x);
  if (op == OpKind::PRelu) { // the slope broadcasts to x, never the other way
    std::vector<Value *> slopes = poolWhere([&](const Shape64 &s) { return broadcastsTo(s, xs); });
    Value *slope = !slopes.empty() && rng_.chance(0.3)
                       ? rng_.pick(slopes)
                       : randomConstant(broadcastableShape(rng_, xs), 0.5f);
    return emit(op, {x, slope});
  }

  Value *y = nullptr;
  if (rng_.chance(0.4)) {
    std::vector<Value *> partners = poolWhere([&](const Shape64 &s) {
      auto b = broadcast(xs, s);
      return b && fits(*b);
    });
    if (!partners.empty()) y = rng_.pick(partners);
  }
  if (!y) {
    Shape64 cs = broadcastableShape(rng_, xs);
    // Sometimes the constant grows a dim of x that is 1.
    const size_t lead = xs.size() - cs.size();
    for (size_t i = 0; i < cs.size(); ++i)
      if (xs[lead + i] == 1 && rng_.chance(0.2)) cs[i] = rng_.dim();
    if (!fits(*broadcast(xs, cs))) cs = broadcastableShape(rng_, xs);
    y = randomConstant(cs);
  }
  Value *a = x, *b = y;
  if (rng_.chance(0.3)) std::swap(a, b);
  switch (op) {
  case OpKind::Div: { // by |b| + 1, never near 0
    KILN_ASSIGN_OR_RETURN(Value * abs, emit(OpKind::Abs, {b}));
    KILN_ASSIGN_OR_RETURN(Value * den, emit(OpKind::Add, {abs, scalar(1.0f)}));
    return emit(OpKind::Div, {a, den});
  }
  case OpKind::Where: { // max or min through a comparison
    KILN_ASSIGN_OR_RETURN(Value * cond, emit(OpKind::Greater, {a, b}));
    return rng_.chance(0.7) ? emit(OpKind::Where, {cond, a, b}) : emit(OpKind::Where, {cond, b, a});
  }
  case OpKind::Max:
  case OpKind::Min:
    if (rng_.chance(0.2)) return emit(op, {a, b, randomConstant(broadcastableShape(rng_, xs))});
    return emit(op, {a, b});
  default:
    return emit(op, {a, b});
  }
}

// ---- reductions and normalizations -------------------------------------------

Expected<Value *> Generator::reduce(Value *x) {
  const int64_t r = rankOf(x);
  if (r == 0) return nullptr;
  static const std::vector<OpKind> kinds = {OpKind::ReduceSum, OpKind::ReduceMean,
                                            OpKind::ReduceMax};
  const OpKind op = rng_.pick(kinds);
  Attrs attrs;
  attrs["keepdims"] = Attribute::ofInt(rng_.range(0, 1));
  if (rng_.chance(0.1)) return emit(op, {x}, std::move(attrs)); // every axis
  std::vector<int64_t> axes(r);
  std::iota(axes.begin(), axes.end(), 0);
  rng_.shuffle(axes);
  axes.resize(rng_.range(1, r));
  for (int64_t &a : axes)
    if (rng_.chance(0.4)) a -= r;
  return emit(op, {x, ints(axes)}, std::move(attrs));
}

Expected<Value *> Generator::softmax(Value *x) {
  const int64_t r = rankOf(x);
  if (r == 0) return nullptr;
  Attrs attrs;
  attrs["axis"] = Attribute::ofInt(rng_.range(-r, r - 1));
  return emit(rng_.chance(0.7) ? OpKind::Softmax : OpKind::LogSoftmax, {x}, std::move(attrs));
}

Expected<Value *> Generator::layerNorm(Value *x) {
  const Shape64 xs = shapeOf(x);
  if (xs.empty()) return nullptr;
  const int64_t d = xs.back();
  std::vector<Value *> inputs = {x, randomConstant({d})};
  if (rng_.chance(0.7)) inputs.push_back(randomConstant({d}));
  Attrs attrs;
  if (rng_.chance(0.5))
    attrs["axis"] = Attribute::ofInt(rng_.chance(0.5) ? -1 : static_cast<int64_t>(xs.size()) - 1);
  if (rng_.chance(0.3)) attrs["epsilon"] = Attribute::ofFloat(1e-3f);
  return emit(OpKind::LayerNormalization, std::move(inputs), std::move(attrs));
}

// ---- matrix products --------------------------------------------------------

Expected<Value *> Generator::matmul(Value *x) {
  const Shape64 xs = shapeOf(x);
  if (xs.empty()) return nullptr;
  const int64_t k = xs.back(), rows = numelOf(xs) / k;
  const float wscale = std::sqrt(3.0f / static_cast<float>(k));
  const int kind = static_cast<int>(rng_.range(0, 9));
  if (xs.size() >= 2 && kind == 0 && fits(Shape64{rows, xs[xs.size() - 2]})) {
    // x @ x^T: both operands computed.
    std::vector<int64_t> perm(xs.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    KILN_ASSIGN_OR_RETURN(Value * xt,
                          emit(OpKind::Transpose, {x}, {{"perm", Attribute::ofInts(perm)}}));
    return emit(OpKind::MatMul, {x, xt});
  }
  if (xs.size() >= 2 && kind == 1) { // W[M, K'] @ x[..., K', N]
    const int64_t kk = xs[xs.size() - 2], m = rng_.dim();
    if (!fits(Shape64{numelOf(xs) / kk * m})) return nullptr;
    Value *w = randomConstant({m, kk}, std::sqrt(3.0f / static_cast<float>(kk)));
    return emit(OpKind::MatMul, {w, x});
  }
  if (kind == 2) { // x[..., K] @ w[K]: a matrix-vector product
    return emit(OpKind::MatMul, {x, randomConstant({k}, wscale)});
  }
  const int64_t n = rng_.dim();
  if (!fits(Shape64{rows * n})) return nullptr;
  Shape64 ws = {k, n};
  if (xs.size() >= 3 && kind <= 5) { // batched weight: x's batch dims, some set to 1
    Shape64 batch(xs.begin(), xs.end() - 2);
    batch = Shape64(batch.begin() + rng_.range(0, batch.size() - 1), batch.end());
    for (int64_t &b : batch)
      if (rng_.chance(0.3)) b = 1;
    ws.insert(ws.begin(), batch.begin(), batch.end());
  } else if (xs.size() <= 2 && kind == 6) { // the weight's batch dims broadcast x
    const int64_t b = rng_.dim();
    if (!fits(Shape64{b * rows * n})) return nullptr;
    ws.insert(ws.begin(), b);
  }
  return emit(OpKind::MatMul, {x, randomConstant(ws, wscale)});
}

Expected<Value *> Generator::gemm(Value *x) {
  if (rankOf(x) < 2) return nullptr;
  if (rankOf(x) > 2) {
    KILN_ASSIGN_OR_RETURN(x, emit(OpKind::Flatten, {x}, {{"axis", Attribute::ofInt(1)}}));
  }
  const Shape64 xs = shapeOf(x);
  Attrs attrs;
  const bool transA = rng_.chance(0.2), transB = rng_.chance(0.5);
  const int64_t m = transA ? xs[1] : xs[0], k = transA ? xs[0] : xs[1], n = rng_.dim();
  if (!fits(Shape64{m, n})) return nullptr;
  if (transA) attrs["transA"] = Attribute::ofInt(1);
  if (transB) attrs["transB"] = Attribute::ofInt(1);
  if (rng_.chance(0.3)) attrs["alpha"] = Attribute::ofFloat(rng_.uniform(0.5f, 2.0f));
  if (rng_.chance(0.3)) attrs["beta"] = Attribute::ofFloat(rng_.uniform(0.5f, 2.0f));
  std::vector<Value *> inputs = {
      x, randomConstant(transB ? Shape64{n, k} : Shape64{k, n}, std::sqrt(3.0f / k))};
  if (rng_.chance(0.7)) {
    const std::vector<Shape64> cshapes = {{n}, {1, n}, {m, n}, {m, 1}, {}};
    inputs.push_back(randomConstant(rng_.pick(cshapes)));
  }
  return emit(OpKind::Gemm, std::move(inputs), std::move(attrs));
}

// ---- convolution and pooling ------------------------------------------------

Expected<Value *> Generator::conv(Value *x) {
  const Shape64 xs = shapeOf(x);
  if (xs.size() != 4) return nullptr;
  const int64_t c = xs[1];
  // Groups: plain, depthwise, or a divisor of C in between.
  std::vector<int64_t> divisors;
  for (int64_t g = 2; g < c; ++g)
    if (c % g == 0) divisors.push_back(g);
  int64_t group = 1, m;
  const int groupKind = static_cast<int>(rng_.range(0, 5));
  if (groupKind <= 1 && c > 1) {
    group = c;
    m = c * (rng_.chance(0.7) ? 1 : 2);
  } else if (groupKind == 2 && !divisors.empty()) {
    group = rng_.pick(divisors);
    m = group * rng_.range(1, 3);
  } else {
    m = rng_.pick(std::vector<int64_t>{1, 2, 3, 4, 5, 8, 16});
  }

  int64_t kernel[2], stride[2], dilation[2], pads[4], outHW[2];
  bool found = false;
  for (int attempt = 0; attempt < 20 && !found; ++attempt) {
    kernel[0] = rng_.pick(std::vector<int64_t>{1, 3, 5});
    kernel[1] = rng_.chance(0.7) ? kernel[0] : rng_.pick(std::vector<int64_t>{1, 3, 5});
    if (attempt > 15) kernel[0] = kernel[1] = 1;
    found = true;
    const bool same = rng_.chance(0.4);
    for (int i = 0; i < 2; ++i) {
      stride[i] = rng_.chance(0.35) ? 2 : 1;
      dilation[i] = rng_.chance(0.15) ? 2 : 1;
      const int64_t extent = dilation[i] * (kernel[i] - 1);
      pads[i] = same ? extent / 2 : rng_.range(0, extent);
      pads[i + 2] = same ? extent - extent / 2 : rng_.range(0, extent);
      const int64_t span = xs[2 + i] + pads[i] + pads[i + 2] - extent - 1;
      if (span < 0) found = false;
      outHW[i] = span / stride[i] + 1;
    }
    if (found && !fits(Shape64{xs[0], m, outHW[0], outHW[1]})) found = false;
  }
  if (!found) return nullptr;

  Attrs attrs;
  if (group != 1) attrs["group"] = Attribute::ofInt(group);
  if (rng_.chance(0.5)) attrs["kernel_shape"] = Attribute::ofInts({kernel[0], kernel[1]});
  if (stride[0] != 1 || stride[1] != 1 || rng_.chance(0.3))
    attrs["strides"] = Attribute::ofInts({stride[0], stride[1]});
  if (dilation[0] != 1 || dilation[1] != 1 || rng_.chance(0.2))
    attrs["dilations"] = Attribute::ofInts({dilation[0], dilation[1]});
  if (std::any_of(pads, pads + 4, [](int64_t p) { return p != 0; }) || rng_.chance(0.2))
    attrs["pads"] = Attribute::ofInts({pads[0], pads[1], pads[2], pads[3]});
  const int64_t fanIn = c / group * kernel[0] * kernel[1];
  std::vector<Value *> inputs = {x, randomConstant({m, c / group, kernel[0], kernel[1]},
                                                   std::sqrt(3.0f / static_cast<float>(fanIn)))};
  if (rng_.chance(0.8)) inputs.push_back(randomConstant({m}, 0.5f));
  KILN_ASSIGN_OR_RETURN(Value * y, emit(OpKind::Conv, std::move(inputs), std::move(attrs)));
  return convEpilogue(x, y);
}

// What follows a conv in real models: batch norm, an activation, a residual.
Expected<Value *> Generator::convEpilogue(Value *x, Value *y) {
  const Shape64 ys = shapeOf(y);
  const int64_t m = ys[1];
  if (rng_.chance(0.3)) {
    Tensor var = randomTensor({m}, 1.0f);
    for (float &v : var.span<float>()) v = 0.5f + std::fabs(v);
    KILN_ASSIGN_OR_RETURN(
        y, emit(OpKind::BatchNormalization, {y, randomConstant({m}), randomConstant({m}, 0.5f),
                                             randomConstant({m}, 0.5f), constant(std::move(var))}));
  }
  switch (rng_.range(0, 9)) {
  case 0:
  case 1:
  case 2:
  case 3: {
    KILN_ASSIGN_OR_RETURN(y, emit(OpKind::Relu, {y}));
    break;
  }
  case 4:
  case 5:
  case 6: { // SiLU
    KILN_ASSIGN_OR_RETURN(Value * s, emit(OpKind::Sigmoid, {y}));
    KILN_ASSIGN_OR_RETURN(y,
                          rng_.chance(0.5) ? emit(OpKind::Mul, {y, s}) : emit(OpKind::Mul, {s, y}));
    break;
  }
  case 7: {
    KILN_ASSIGN_OR_RETURN(y, emit(OpKind::Clip, {y, scalar(0.0f), scalar(6.0f)}));
    break;
  }
  default:
    break;
  }
  if (rng_.chance(0.35)) {
    std::vector<Value *> same = poolWhere([&](const Shape64 &s) { return s == ys; });
    same.erase(std::remove(same.begin(), same.end(), y), same.end());
    Value *r = shapeOf(x) == ys && rng_.chance(0.6) ? x : same.empty() ? nullptr : rng_.pick(same);
    if (r) {
      KILN_ASSIGN_OR_RETURN(y, rng_.chance(0.7) ? emit(OpKind::Add, {y, r})
                                                : emit(OpKind::Add, {r, y}));
    }
  }
  return y;
}

Expected<Value *> Generator::pool(Value *x) {
  const Shape64 xs = shapeOf(x);
  if (xs.size() != 4) return nullptr;
  const int kind = static_cast<int>(rng_.range(0, 19));
  if (kind < 3) return emit(OpKind::GlobalAveragePool, {x});
  if (kind < 5) return emit(OpKind::GlobalMaxPool, {x});
  const bool isMax = kind < 12;
  int64_t kernel[2], stride[2], dilation[2] = {1, 1}, pads[4];
  const bool ceil = rng_.chance(0.25);
  for (int attempt = 0;; ++attempt) {
    if (attempt == 20) return nullptr;
    bool ok = true;
    for (int i = 0; i < 2; ++i) {
      kernel[i] = rng_.range(1, 3);
      stride[i] = rng_.range(1, 2);
      if (isMax && rng_.chance(0.15)) dilation[i] = 2;
      // Pads smaller than the kernel: no window lies wholly in padding.
      pads[i] = rng_.range(0, kernel[i] - 1);
      pads[i + 2] = rng_.range(0, kernel[i] - 1);
      if (xs[2 + i] + pads[i] + pads[i + 2] < dilation[i] * (kernel[i] - 1) + 1) ok = false;
    }
    if (ok) break;
  }
  Attrs attrs;
  attrs["kernel_shape"] = Attribute::ofInts({kernel[0], kernel[1]});
  if (stride[0] != 1 || stride[1] != 1 || rng_.chance(0.3))
    attrs["strides"] = Attribute::ofInts({stride[0], stride[1]});
  if (dilation[0] != 1 || dilation[1] != 1)
    attrs["dilations"] = Attribute::ofInts({dilation[0], dilation[1]});
  if (std::any_of(pads, pads + 4, [](int64_t p) { return p != 0; }))
    attrs["pads"] = Attribute::ofInts({pads[0], pads[1], pads[2], pads[3]});
  if (ceil) attrs["ceil_mode"] = Attribute::ofInt(1);
  if (!isMax && rng_.chance(0.4)) attrs["count_include_pad"] = Attribute::ofInt(1);
  return emit(isMax ? OpKind::MaxPool : OpKind::AveragePool, {x}, std::move(attrs));
}

// ---- data movement -----------------------------------------------------------

Expected<Value *> Generator::reshape(Value *x) {
  const Shape64 xs = shapeOf(x);
  int64_t n = numelOf(xs);
  std::vector<int64_t> factors;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) factors.push_back(p), n /= p;
  if (n > 1) factors.push_back(n);
  Shape64 target(rng_.range(1, 4), 1);
  for (int64_t f : factors) target[rng_.range(0, target.size() - 1)] *= f;
  std::vector<int64_t> spec = target;
  // 0 copies the input dim at that index; one -1 is inferred.
  for (size_t i = 0; i < spec.size(); ++i)
    if (i < xs.size() && xs[i] == spec[i] && rng_.chance(0.3)) spec[i] = 0;
  if (rng_.chance(0.3)) spec[rng_.range(0, spec.size() - 1)] = -1;
  return emit(OpKind::Reshape, {x, ints(spec)});
}

Expected<Value *> Generator::transpose(Value *x) {
  const int64_t r = rankOf(x);
  if (r < 2) return nullptr;
  if (rng_.chance(0.15)) return emit(OpKind::Transpose, {x}); // reverses the axes
  std::vector<int64_t> perm(r);
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = 0; i < 3 && std::is_sorted(perm.begin(), perm.end()); ++i) rng_.shuffle(perm);
  return emit(OpKind::Transpose, {x}, {{"perm", Attribute::ofInts(perm)}});
}

Expected<Value *> Generator::slice(Value *x) {
  const Shape64 xs = shapeOf(x);
  const int64_t r = static_cast<int64_t>(xs.size());
  if (r == 0) return nullptr;
  std::vector<int64_t> axes(r);
  std::iota(axes.begin(), axes.end(), 0);
  rng_.shuffle(axes);
  axes.resize(rng_.range(1, r));
  std::vector<int64_t> starts, ends, steps;
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
  for (int64_t a : axes) {
    const int64_t d = xs[a];
    const int64_t step = d == 1 ? 1 : rng_.pick(std::vector<int64_t>{1, 1, 2, 3, -1, -2});
    int64_t start, end;
    if (step > 0) {
      start = rng_.range(0, d - 1);
      end = rng_.range(start + 1, d);
      if (end == d && rng_.chance(0.4)) end = rng_.chance(0.5) ? kBig : d + 3;
    } else { // from start down to end (exclusive); end -1 means "past 0"
      start = rng_.range(1, d - 1);
      end = rng_.range(-1, start - 1);
      if (end == -1)
        end = rng_.chance(0.5) ? -d - 1 : std::numeric_limits<int64_t>::min();
      else if (rng_.chance(0.3))
        end -= d;
      if (start == d - 1 && rng_.chance(0.3)) start = kBig;
    }
    if (start >= 0 && start < d && rng_.chance(0.3)) start -= d;
    starts.push_back(start);
    ends.push_back(end);
    steps.push_back(step);
  }
  for (int64_t &a : axes)
    if (rng_.chance(0.3)) a -= r;
  std::vector<Value *> inputs = {x, ints(starts), ints(ends), ints(axes)};
  const bool unitSteps = std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
  if (!unitSteps || rng_.chance(0.3)) inputs.push_back(ints(steps));
  return emit(OpKind::Slice, std::move(inputs));
}

Expected<Value *> Generator::concat(Value *x) {
  const Shape64 xs = shapeOf(x);
  const int64_t r = static_cast<int64_t>(xs.size());
  if (r == 0) return nullptr;
  const int64_t axis = rng_.range(0, r - 1);
  std::vector<Value *> inputs = {x};
  Shape64 outShape = xs;
  const int64_t extra = rng_.chance(0.75) ? 1 : 2;
  for (int64_t i = 0; i < extra; ++i) {
    std::vector<Value *> partners = poolWhere([&](const Shape64 &s) {
      if (static_cast<int64_t>(s.size()) != r) return false;
      for (int64_t j = 0; j < r; ++j)
        if (j != axis && s[j] != xs[j]) return false;
      return true;
    });
    Value *p;
    if (!partners.empty() && rng_.chance(0.6)) {
      p = rng_.pick(partners);
    } else {
      Shape64 cs = xs;
      cs[axis] = rng_.dim();
      p = randomConstant(cs);
    }
    outShape[axis] += shapeOf(p)[axis];
    inputs.push_back(p);
  }
  if (!fits(outShape)) return nullptr;
  rng_.shuffle(inputs);
  return emit(OpKind::Concat, std::move(inputs),
              {{"axis", Attribute::ofInt(rng_.chance(0.3) ? axis - r : axis)}});
}

Expected<Value *> Generator::flatten(Value *x) {
  const int64_t r = rankOf(x);
  if (r == 0) return nullptr;
  int64_t axis = rng_.range(0, r);
  if (axis > 0 && rng_.chance(0.3)) axis -= r;
  return emit(OpKind::Flatten, {x}, {{"axis", Attribute::ofInt(axis)}});
}

// ---- the whole graph ------------------------------------------------------------

Status Generator::build() {
  Shape64 shape(rng_.range(1, 4));
  for (int64_t &d : shape) d = rng_.dim();
  while (numelOf(shape) > options_.maxInputElements) {
    int64_t &d = shape[rng_.range(0, shape.size() - 1)];
    d = kDims[rng_.range(0, 5)]; // at most 7
  }
  std::vector<Value *> inputs = {
      g_.addInput("x", Type::tensor(DType::F32, Shape::fromStatic(shape)))};
  if (rng_.chance(0.3))
    inputs.push_back(g_.addInput(
        "y", Type::tensor(DType::F32, Shape::fromStatic(broadcastableShape(rng_, shape)))));
  for (Value *in : inputs) {
    KILN_ASSIGN_OR_RETURN(Value * v, perturbed(in));
    pool_.push_back(v);
  }
  const size_t numInputs = pool_.size();

  struct Choice {
    OpFn fn;
    int weight;
  };
  static const std::vector<Choice> choices = {
      {&Generator::unary, 20},  {&Generator::binary, 20},   {&Generator::reduce, 7},
      {&Generator::softmax, 5}, {&Generator::layerNorm, 4}, {&Generator::matmul, 7},
      {&Generator::gemm, 3},    {&Generator::conv, 12},     {&Generator::pool, 6},
      {&Generator::reshape, 6}, {&Generator::transpose, 5}, {&Generator::slice, 5},
      {&Generator::concat, 4},  {&Generator::flatten, 3}};
  int totalWeight = 0;
  for (const Choice &c : choices) totalWeight += c.weight;

  Value *last = pool_.front();
  const int64_t numOps = rng_.range(options_.minOps, options_.maxOps);
  for (int64_t i = 0; i < numOps; ++i) {
    Value *x = rng_.chance(0.7) ? last : rng_.pick(pool_);
    for (int attempt = 0;; ++attempt) {
      if (attempt == 50) return makeError("no op applies to ", x->name(), ": ", x->type().str());
      int w = static_cast<int>(rng_.range(0, totalWeight - 1));
      size_t c = 0;
      while (w >= choices[c].weight) w -= choices[c++].weight;
      emitted_.clear();
      KILN_ASSIGN_OR_RETURN(Value * y, (this->*choices[c].fn)(x));
      if (!y) continue;
      std::string tag;
      for (const std::string &op : emitted_) tag += (tag.empty() ? "" : "+") + op;
      out_.ops.push_back(tag);
      last = y;
      break;
    }
  }

  std::vector<Value *> outputs = {last};
  std::vector<Value *> others(pool_.begin() + numInputs, pool_.end());
  others.erase(std::remove(others.begin(), others.end(), last), others.end());
  rng_.shuffle(others);
  others.resize(std::min<size_t>(others.size(), rng_.range(0, 2)));
  outputs.insert(outputs.end(), others.begin(), others.end());
  if (rng_.chance(0.05)) outputs.push_back(pool_.front()); // an input, passed through
  g_.setOutputs(outputs);
  out_.model.opsets[""] = 21;
  KILN_RETURN_IF_ERROR(verifyModel(out_.model));

  out_.inputs = randomInputs(g_, seed_, 0);
  return Status::success();
}

} // namespace

std::vector<RtValue> randomInputs(const Graph &graph, uint64_t seed, uint64_t variant) {
  Rng rng(seed * 0xbf58476d1ce4e5b9ull + variant * 0x94d049bb133111ebull + 1);
  std::vector<RtValue> inputs;
  for (const Value *in : graph.inputs())
    inputs.emplace_back(randomF32(rng, shapeOf(in), rng.chance(0.3) ? 3.0f : 1.0f));
  return inputs;
}

Expected<RandomGraph> generateRandomGraph(uint64_t seed, const RandomGraphOptions &options) {
  RandomGraph out;
  Generator gen(seed, options, out);
  KILN_RETURN_IF_ERROR(gen.build());
  return out;
}

} // namespace kiln::testing
