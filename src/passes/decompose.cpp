// decompose: rewrites the ops that no backend compiles as such into ops
// they do compile (elementwise ops, reductions, Gather/GatherElements,
// MatMul, Transpose, Reshape, Squeeze/Unsqueeze, LogSoftmax,
// ConstantOfShape). It runs first at every level, -O0 included: the CPU
// backend relies on it.
//
// Before: a verified, topologically sorted model.
// After:  no Gemm over matrices; no Einsum whose equation the interpreter
//         accepts over operands of known rank; no NegativeLogLikelihoodLoss or
//         SoftmaxCrossEntropyLoss over inputs of known rank; no Dropout
//         whose constant training_mode and ratio make it a copy (training
//         with a non-zero ratio, the interpreter's error, stays). Results
//         keep their names; a new value is named after the result it helps
//         compute (`y.mm`, `y.diag0`), a new node after the node it stands
//         for. The model stays sorted and valid.
//
// Rewrites, one pattern per op:
//  1. Gemm: A and B transposed where transA/transB ask (a constant B that
//     nothing else reads is transposed here, so later passes see a
//     constant), MatMul, times alpha unless 1, plus beta * C (broadcast)
//     when C is given and beta is not 0. So fuse-epilogues can put the
//     bias into the matmul microkernel. 16-bit floats compute in f32 as
//     the interpreter does; integers scaled by alpha/beta in f64.
//  2. Einsum: per operand, diagonals of repeated labels (Transpose,
//     Reshape, Gather of every n+1-th element, the indices a Range when n
//     is symbolic) and sums over labels only
//     it has; then operands contract left to right: labels both have and a
//     later operand or the output needs are batch dims, labels only one has
//     are summed out of it first, the rest are the M, N and K of one
//     MatMul (Reshape when a group has several labels); when symbolic dims
//     make those reshapes inexpressible, Mul and ReduceSum instead. A last
//     Transpose orders the output labels.
//  3. Losses: log-probabilities (SCE: LogSoftmax over axis 1, also its
//     log_prob output), GatherElements of the target class, times the
//     Gather of the weights, zero where the target is ignore_index;
//     reduced by ReduceSum, and for mean divided by the weights' (or the
//     kept elements') sum. A negative target that is not ignored becomes
//     out of range, so the gather reports it, as the interpreter does.
//  4. Dropout that copies: Identity, and the mask ConstantOfShape(Shape(x))
//     of true.
#include "ir/infer/infer.h"
#include "passes/match.h"
#include "passes/rewrite.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <unordered_set>

namespace kiln {
namespace {

DType dtypeOf(const Value *v) {
  return v->type().dtype();
}
bool isHalf(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

// A ranked tensor's rank, else -1.
int knownRank(const Value *v) {
  if (!v || !v->type().isTensor() || !v->type().shape().rankKnown) return -1;
  return int(v->type().shape().rank());
}
const Dim &dimOf(const Value *v, int axis) {
  return v->type().shape().dims[size_t(axis)];
}

// Creates the nodes of one decomposition next to its root, each typed by
// shape inference, each value named <root output>.<tag> (made unique),
// each node <root name>.<tag>.
class Builder {
public:
  Builder(Rewriter &rw, Node &root) : rw_(rw), g_(*root.owner()), root_(root) {
    base_ =
        root.output(0) && !root.output(0)->name().empty() ? root.output(0)->name() : root.name();
    // Names are unique across the model: a region sees its parents' values.
    Graph *top = &g_;
    while (top->parent()) top = top->parent();
    top->walk([&](Graph &g) {
      for (const Value *v : g.inputs()) names_.insert(v->name());
      for (const auto &n : g.nodes())
        for (const Value *v : n->outputs())
          if (v) names_.insert(v->name());
    });
  }

  Value *op(OpKind op, std::vector<Value *> inputs, const std::string &tag,
            std::vector<std::pair<std::string, Attribute>> attrs = {}) {
    Node *n = rw_.create(g_, op, std::move(inputs), suffixed(root_.name(), ("." + tag).c_str()));
    for (auto &[name, a] : attrs) n->setAttr(name, std::move(a));
    (void)inferNode(*n); // inputs are typed; the verifier reports any mismatch
    n->output(0)->setName(fresh(tag));
    return n->output(0);
  }
  Value *constant(Tensor t, const std::string &tag) {
    return rw_.constant(g_, std::move(t), fresh(tag));
  }
  Value *ints(const std::vector<int64_t> &v, const std::string &tag) {
    return constant(Tensor::fromVector(v, {int64_t(v.size())}), tag);
  }
  Value *scalar(DType t, double v, const std::string &tag) {
    Tensor s(t, {});
    s.setDouble(0, v);
    return constant(std::move(s), tag);
  }
  Value *cast(Value *v, DType to, const std::string &tag) {
    if (dtypeOf(v) == to) return v;
    return op(OpKind::Cast, {v}, tag, {{"to", Attribute::ofInt(onnxCodeOf(to))}});
  }
  Value *transpose(Value *v, std::vector<int64_t> perm, const std::string &tag) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == int64_t(i);
    if (identity) return v;
    return op(OpKind::Transpose, {v}, tag, {{"perm", Attribute::ofInts(std::move(perm))}});
  }
  Value *reduceSum(Value *v, const std::vector<int64_t> &axes, const std::string &tag) {
    std::vector<Value *> in{v};
    if (!axes.empty()) in.push_back(ints(axes, tag + ".axes"));
    return op(OpKind::ReduceSum, std::move(in), tag, {{"keepdims", Attribute::ofInt(0)}});
  }
  // Moves the uses of the root's output `from` to `to`, a value built here,
  // which takes from's name (and its node the root's).
  bool finish(Value *from, Value *to) {
    to->setName("");
    // The root's type may know more (a symbol where inference of the
    // pieces gives "?"); it is the same value.
    const Type &t = from->type();
    if (t.isTensor() && to->type().isTensor() && t.dtype() == to->type().dtype() &&
        t.shape().rankKnown && t.shape().rank() == to->type().shape().rank())
      to->setType(t);
    if (to->producer()) to->producer()->setName(root_.name());
    return rw_.replace(from, to);
  }

private:
  std::string fresh(const std::string &tag) {
    std::string name = base_ + "." + tag;
    for (int k = 2; names_.count(name); ++k) name = base_ + "." + tag + "." + std::to_string(k);
    names_.insert(name);
    return name;
  }

  Rewriter &rw_;
  Graph &g_;
  Node &root_;
  std::string base_;
  std::unordered_set<std::string> names_;
};

// ---- Gemm ---------------------------------------------------------------------

// A 2-d tensor transposed (any dtype: elements are copied as bytes).
Tensor transposed(const Tensor &t) {
  const int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out(t.dtype(), {cols, rows});
  const size_t size = dtypeSize(t.dtype());
  const char *src = static_cast<const char *>(t.raw());
  char *dst = static_cast<char *>(out.mutableRaw());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(dst + (c * rows + r) * size, src + (r * cols + c) * size, size);
  return out;
}

// Whether C (rank <= 2) broadcasts into Gemm's [M, N] output without
// growing it, as far as static dims tell.
bool broadcastsIntoOutput(const Value *c, const Value *y) {
  const int rc = knownRank(c), ry = knownRank(y);
  if (rc < 0 || rc > 2 || ry != 2) return false;
  for (int i = 0; i < rc; ++i) {
    const Dim &dc = dimOf(c, i), &dy = dimOf(y, ry - rc + i);
    if (dc.isStatic() && dc.value() != 1 && dy.isStatic() && dc.value() != dy.value()) return false;
  }
  return true;
}

bool decomposeGemm(Node &root, Rewriter &rw) {
  Value *a = root.input(0), *b = root.input(1), *c = root.input(2), *y = root.output(0);
  if (!y || knownRank(a) != 2 || knownRank(b) != 2 || !rw.canReplace(y)) return false;
  const DType t = dtypeOf(a);
  if (dtypeOf(b) != t || !isNumeric(t)) return false;
  const double alpha = root.getFloat("alpha"), beta = root.getFloat("beta");
  const bool useC = c && beta != 0;
  if (useC && (dtypeOf(c) != t || !broadcastsIntoOutput(c, y))) return false;
  // The compute type: f32 for 16-bit floats (as the interpreter), f64 for
  // integers scaled by float factors.
  const bool scaled = alpha != 1 || (useC && beta != 1);
  const DType ct = isHalf(t) ? DType::F32 : isInt(t) && scaled ? DType::F64 : t;
  Builder bd(rw, root);
  Value *A = isHalf(t) ? bd.cast(a, ct, "a") : a;
  if (root.getInt("transA")) A = bd.transpose(A, {1, 0}, "at");
  Value *B = b;
  const Tensor *constB = constantOf(b);
  if (isHalf(t)) B = bd.cast(B, ct, "b");
  if (root.getInt("transB")) {
    if (constB && !isHalf(t) && rw.numUses(b) == 1)
      B = bd.constant(transposed(*constB), "bt");
    else
      B = bd.transpose(B, {1, 0}, "bt");
  }
  Value *p = bd.op(OpKind::MatMul, {A, B}, "mm");
  p = bd.cast(p, ct, "mm64");
  if (alpha != 1) p = bd.op(OpKind::Mul, {p, bd.scalar(ct, alpha, "alpha")}, "scaled");
  if (useC) {
    Value *C = c;
    const Tensor *constC = constantOf(c);
    if (beta != 1 && constC) { // beta * C computed here, in the compute type
      Tensor s(ct, constC->shape());
      for (int64_t i = 0; i < s.numel(); ++i)
        s.setDouble(i, static_cast<double>(static_cast<float>(beta)) * constC->getDouble(i));
      C = bd.constant(std::move(s), "bias");
    } else {
      C = bd.cast(C, ct, "c");
      if (beta != 1) C = bd.op(OpKind::Mul, {C, bd.scalar(ct, beta, "beta")}, "bias");
    }
    p = bd.op(OpKind::Add, {p, C}, "sum");
  }
  p = bd.cast(p, t, "out");
  return bd.finish(y, p);
}

// ---- Einsum ---------------------------------------------------------------------

constexpr int kEllipsis = 256; // labels of broadcast ellipsis dims: kEllipsis + j

// One operand (or partial result): its value and the label of each axis.
struct Term {
  Value *v;
  std::vector<int> labels;
};

// The labels of one term of the equation; -1 where "..." stands.
std::optional<std::vector<int>> splitTerm(std::string_view term) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char ch = term[i];
    if (std::isalpha(static_cast<unsigned char>(ch))) {
      labels.push_back(ch);
    } else if (term.substr(i, 3) == "..." && !ellipsis) {
      ellipsis = true;
      labels.push_back(-1);
      i += 2;
    } else {
      return std::nullopt;
    }
  }
  return labels;
}

std::vector<int> expandEllipsis(const std::vector<int> &term, int count, int total) {
  std::vector<int> out;
  for (int l : term) {
    if (l != -1)
      out.push_back(l);
    else
      for (int j = 0; j < count; ++j) out.push_back(kEllipsis + total - count + j);
  }
  return out;
}

// The operands' axis labels and the output's, as the interpreter parses
// them (interp/kernels/matmul.cpp); nullopt for an equation it refuses.
std::optional<std::pair<std::vector<Term>, std::vector<int>>> parseEinsum(const Node &n) {
  std::string eq;
  for (char ch : n.getString("equation"))
    if (!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    auto term = splitTerm(std::string_view(lhs).substr(start, comma - start));
    if (!term) return std::nullopt;
    terms.push_back(std::move(*term));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != size_t(n.numInputs())) return std::nullopt;
  std::vector<int> ellRank(terms.size());
  int total = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const int rank = knownRank(n.input(int(i)));
    if (rank < 0) return std::nullopt;
    const int letters =
        int(std::count_if(terms[i].begin(), terms[i].end(), [](int l) { return l >= 0; }));
    ellRank[i] = rank - letters;
    if (ellRank[i] < 0 || (letters == int(terms[i].size()) && ellRank[i] != 0)) return std::nullopt;
    total = std::max(total, ellRank[i]);
  }
  std::vector<Term> operands;
  std::map<int, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    operands.push_back({n.input(int(i)), expandEllipsis(terms[i], ellRank[i], total)});
    for (int l : operands.back().labels) ++uses[l];
  }
  std::vector<int> output;
  if (arrow != std::string::npos) {
    auto out = splitTerm(std::string_view(eq).substr(arrow + 2));
    if (!out) return std::nullopt;
    output = expandEllipsis(*out, total, total);
    for (int l : output)
      if (!uses.count(l) || std::count(output.begin(), output.end(), l) > 1) return std::nullopt;
  } else {
    for (int j = 0; j < total; ++j) output.push_back(kEllipsis + j);
    for (auto [l, count] : uses)
      if (l < kEllipsis && count == 1) output.push_back(l);
  }
  return std::make_pair(std::move(operands), std::move(output));
}

int indexOf(const std::vector<int> &v, int x) {
  auto it = std::find(v.begin(), v.end(), x);
  return it == v.end() ? -1 : int(it - v.begin());
}

// The decomposition of one Einsum node, step by step (see the file comment).
class EinsumBuilder {
public:
  EinsumBuilder(Builder &bd, std::vector<int> output) : bd_(bd), output_(std::move(output)) {}

  // Removes repeated labels of one operand.
  void diagonals(Term &t);
  // Sums `t` over its labels that are not in `keep`.
  void sumLabelsExcept(Term &t, const std::set<int> &keep);
  Term contract(Term a, Term b, const std::set<int> &kept);
  Value *finish(Term t);

private:
  std::string tag(const std::string &what) { return what + std::to_string(step_++); }
  Value *reshape(Value *v, const std::vector<int64_t> &shape) {
    return bd_.op(OpKind::Reshape, {v, bd_.ints(shape, tag("shape"))}, tag("reshape"));
  }
  void squeeze(Term &t, int axis) {
    t.v = bd_.op(OpKind::Squeeze, {t.v, bd_.ints({axis}, tag("axes"))}, tag("squeeze"));
    t.labels.erase(t.labels.begin() + axis);
  }
  void permute(Term &t, const std::vector<int> &labels) {
    std::vector<int64_t> perm;
    for (int l : labels) perm.push_back(indexOf(t.labels, l));
    t.v = bd_.transpose(t.v, perm, tag("transpose"));
    t.labels = labels;
  }
  // The Reshape entry of a group of axes of `v` merged into one: their
  // static product, or -1 (once per shape) for a symbolic group.
  std::optional<int64_t> groupSize(const Value *v, const Term &t, const std::vector<int> &group,
                                   bool &usedInferred) {
    int64_t size = 1;
    for (int l : group) {
      const Dim &d = dimOf(v, indexOf(t.labels, l));
      if (!d.isStatic()) {
        if (usedInferred) return std::nullopt;
        usedInferred = true;
        return -1;
      }
      size *= d.value();
    }
    return size;
  }
  // The indices 0, n+1, 2(n+1).. of a diagonal of n = dim `axis` of `v`
  // (symbolic). Dims that differ at run time make the gather fail.
  Value *dynamicDiagonal(Value *v, int axis) {
    Value *dims = bd_.op(OpKind::Shape, {v}, tag("dims"));
    Value *n = bd_.op(OpKind::Gather, {dims, bd_.scalar(DType::I64, axis, tag("axis"))}, tag("n"),
                      {{"axis", Attribute::ofInt(0)}});
    Value *count = bd_.op(OpKind::Mul, {n, n}, tag("nn"));
    Value *step = bd_.op(OpKind::Add, {n, bd_.scalar(DType::I64, 1, tag("one"))}, tag("step"));
    return bd_.op(OpKind::Range, {bd_.scalar(DType::I64, 0, tag("zero")), count, step},
                  tag("diagidx"));
  }
  std::optional<Term> matmul(Term a, Term b, const std::vector<int> &batch,
                             const std::vector<int> &m, const std::vector<int> &k,
                             const std::vector<int> &n);
  Term mulSum(Term a, Term b, const std::vector<int> &batch, const std::vector<int> &m,
              const std::vector<int> &k, const std::vector<int> &n);

  Builder &bd_;
  std::vector<int> output_;
  int step_ = 0;
};

void EinsumBuilder::diagonals(Term &t) {
  for (size_t p = 0; p < t.labels.size(); ++p)
    for (size_t q = p + 1; q < t.labels.size(); ++q) {
      if (t.labels[p] != t.labels[q]) continue;
      const Dim &dp = dimOf(t.v, int(p)), &dq = dimOf(t.v, int(q));
      if (dq.isStatic() && dq.value() == 1) { // broadcast against the other: drop it
        squeeze(t, int(q));
        return diagonals(t);
      }
      if (dp.isStatic() && dp.value() == 1) {
        squeeze(t, int(p));
        return diagonals(t);
      }
      // [..., n, n] -> [..., n*n] -> every (n+1)-th element.
      std::vector<int> labels;
      for (size_t i = 0; i < t.labels.size(); ++i)
        if (i != p && i != q) labels.push_back(t.labels[i]);
      const int label = t.labels[p];
      std::vector<int64_t> perm;
      for (size_t i = 0; i < t.labels.size(); ++i)
        if (i != p && i != q) perm.push_back(int64_t(i));
      perm.push_back(int64_t(p));
      perm.push_back(int64_t(q));
      Value *v = bd_.transpose(t.v, perm, tag("diagt"));
      std::vector<int64_t> shape(labels.size(), 0); // 0: keep the dim
      Value *picks;
      if (dp.isStatic() && dp == dq) {
        const int64_t n = dp.value();
        shape.push_back(n * n);
        std::vector<int64_t> at;
        for (int64_t i = 0; i < n; ++i) at.push_back(i * (n + 1));
        picks = bd_.ints(at, tag("diagidx"));
      } else { // Range(0, n*n, n+1) with n read on every run
        shape.push_back(-1);
        picks = dynamicDiagonal(t.v, int(p));
      }
      v = reshape(v, shape);
      v = bd_.op(OpKind::Gather, {v, picks}, tag("diag"),
                 {{"axis", Attribute::ofInt(int64_t(labels.size()))}});
      labels.push_back(label);
      t = {v, labels};
      return diagonals(t);
    }
}

void EinsumBuilder::sumLabelsExcept(Term &t, const std::set<int> &keep) {
  std::vector<int64_t> axes;
  std::vector<int> rest;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (keep.count(t.labels[i]))
      rest.push_back(t.labels[i]);
    else
      axes.push_back(int64_t(i));
  }
  if (axes.empty()) return;
  t.v = bd_.reduceSum(t.v, axes, tag("sum"));
  t.labels = rest;
}

Term EinsumBuilder::contract(Term a, Term b, const std::set<int> &kept) {
  // A contracted label that one side has with static dim 1 broadcasts:
  // that side drops it and the other sums over it.
  for (int pass = 0; pass < 2; ++pass) {
    Term &x = pass ? b : a;
    const Term &other = pass ? a : b;
    for (size_t i = x.labels.size(); i-- > 0;) {
      const int l = x.labels[i];
      const Dim &d = dimOf(x.v, int(i));
      if (!kept.count(l) && indexOf(other.labels, l) >= 0 && d.isStatic() && d.value() == 1)
        squeeze(x, int(i));
    }
  }
  std::set<int> keepA = kept, keepB = kept;
  keepA.insert(b.labels.begin(), b.labels.end());
  keepB.insert(a.labels.begin(), a.labels.end());
  sumLabelsExcept(a, keepA);
  sumLabelsExcept(b, keepB);
  std::vector<int> batch, m, k, n;
  for (int l : a.labels) {
    const bool both = indexOf(b.labels, l) >= 0;
    if (both && kept.count(l))
      batch.push_back(l);
    else if (both)
      k.push_back(l);
    else
      m.push_back(l);
  }
  for (int l : b.labels)
    if (indexOf(a.labels, l) < 0) n.push_back(l);
  if (auto r = matmul(a, b, batch, m, k, n)) return *r;
  return mulSum(a, b, batch, m, k, n);
}

std::optional<Term> EinsumBuilder::matmul(Term a, Term b, const std::vector<int> &batch,
                                          const std::vector<int> &m, const std::vector<int> &k,
                                          const std::vector<int> &n) {
  auto cat = [](std::vector<int> x, const std::vector<int> &y, const std::vector<int> &z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  // Every reshape must be expressible before anything is built.
  const bool reshapeA = m.size() != 1 || k.size() != 1, reshapeB = k.size() != 1 || n.size() != 1;
  const bool reshapeOut = m.size() != 1 || n.size() != 1;
  bool inferredA = false, inferredB = false, inferredOut = false;
  std::optional<int64_t> sizeM = 1, sizeKa = 1, sizeKb = 1, sizeN = 1;
  if (reshapeA) sizeM = groupSize(a.v, a, m, inferredA), sizeKa = groupSize(a.v, a, k, inferredA);
  if (reshapeB) sizeKb = groupSize(b.v, b, k, inferredB), sizeN = groupSize(b.v, b, n, inferredB);
  std::vector<int64_t> outDims(batch.size(), 0);
  if (reshapeOut)
    for (const auto &[t, group] : {std::pair{&a, &m}, std::pair{&b, &n}})
      for (int l : *group) {
        const Dim &d = dimOf(t->v, indexOf(t->labels, l));
        if (d.isStatic())
          outDims.push_back(d.value());
        else if (!inferredOut)
          inferredOut = true, outDims.push_back(-1);
        else
          return std::nullopt;
      }
  if (!sizeM || !sizeKa || !sizeKb || !sizeN) return std::nullopt;
  permute(a, cat(batch, m, k));
  permute(b, cat(batch, k, n));
  if (reshapeA) {
    std::vector<int64_t> shape(batch.size(), 0);
    shape.push_back(*sizeM);
    shape.push_back(*sizeKa);
    a.v = reshape(a.v, shape);
  }
  if (reshapeB) {
    std::vector<int64_t> shape(batch.size(), 0);
    shape.push_back(*sizeKb);
    shape.push_back(*sizeN);
    b.v = reshape(b.v, shape);
  }
  Value *p = bd_.op(OpKind::MatMul, {a.v, b.v}, tag("mm"));
  if (reshapeOut) p = reshape(p, outDims);
  return Term{p, cat(batch, m, n)};
}

// [batch, m, 1.., k] * [batch, 1.., n, k] summed over k: no reshapes, for
// symbolic groups.
Term EinsumBuilder::mulSum(Term a, Term b, const std::vector<int> &batch, const std::vector<int> &m,
                           const std::vector<int> &k, const std::vector<int> &n) {
  auto join = [](std::initializer_list<const std::vector<int> *> parts) {
    std::vector<int> out;
    for (const auto *p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
  };
  permute(a, join({&batch, &m, &k}));
  permute(b, join({&batch, &n, &k}));
  auto unsqueeze = [&](Term &t, size_t at, size_t count) {
    if (count == 0) return;
    std::vector<int64_t> axes;
    for (size_t i = 0; i < count; ++i) axes.push_back(int64_t(at + i));
    t.v = bd_.op(OpKind::Unsqueeze, {t.v, bd_.ints(axes, tag("axes"))}, tag("unsqueeze"));
  };
  unsqueeze(a, batch.size() + m.size(), n.size());
  unsqueeze(b, batch.size(), m.size());
  Value *p = bd_.op(OpKind::Mul, {a.v, b.v}, tag("mul"));
  std::vector<int64_t> axes;
  for (size_t i = 0; i < k.size(); ++i)
    axes.push_back(int64_t(batch.size() + m.size() + n.size() + i));
  if (!axes.empty()) p = bd_.reduceSum(p, axes, tag("sum"));
  return Term{p, join({&batch, &m, &n})};
}

Value *EinsumBuilder::finish(Term t) {
  sumLabelsExcept(t, std::set<int>(output_.begin(), output_.end()));
  permute(t, output_);
  return t.v;
}

bool decomposeEinsum(Node &root, Rewriter &rw) {
  Value *y = root.output(0);
  if (!y || !rw.canReplace(y)) return false;
  auto parsed = parseEinsum(root);
  if (!parsed) return false;
  auto &[operands, output] = *parsed;
  const DType t = dtypeOf(root.input(0));
  for (const Term &op : operands)
    if (dtypeOf(op.v) != t || !isNumeric(t)) return false;
  Builder bd(rw, root);
  EinsumBuilder eb(bd, output);
  const DType ct = isHalf(t) ? DType::F32 : t; // the interpreter sums 16-bit floats in f32
  for (size_t i = 0; i < operands.size(); ++i) {
    operands[i].v = bd.cast(operands[i].v, ct, "in" + std::to_string(i));
    eb.diagonals(operands[i]);
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    std::set<int> keep(output.begin(), output.end());
    for (size_t j = 0; j < operands.size(); ++j)
      if (j != i) keep.insert(operands[j].labels.begin(), operands[j].labels.end());
    eb.sumLabelsExcept(operands[i], keep);
  }
  Term acc = operands[0];
  for (size_t i = 1; i < operands.size(); ++i) {
    std::set<int> kept(output.begin(), output.end());
    for (size_t j = i + 1; j < operands.size(); ++j)
      kept.insert(operands[j].labels.begin(), operands[j].labels.end());
    acc = eb.contract(acc, operands[i], kept);
  }
  Value *result = eb.finish(acc);
  if (result == root.input(0)) result = bd.op(OpKind::Identity, {result}, "copy");
  return bd.finish(y, bd.cast(result, t, "out"));
}

// ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ---------------------------

// The loss from log-probabilities `logp` [N, C, d...] (compute type ct) and
// the root's target and weights; the interpreter's nllFromLogProbs.
Value *nllLoss(Builder &bd, const Node &root, Value *logp, DType ct) {
  Value *target = root.input(1), *weight = root.input(2);
  const DType it = dtypeOf(target);
  Value *ignored = nullptr, *index = target;
  Value *zero = bd.scalar(it, 0, "zero");
  if (root.hasAttr("ignore_index")) {
    Tensor ii(it, {});
    ii.setInt(0, root.getInt("ignore_index"));
    ignored = bd.op(OpKind::Equal, {target, bd.constant(std::move(ii), "ignore")}, "ignored");
    index = bd.op(OpKind::Where, {ignored, zero, target}, "kept");
  }
  // A negative class that is not ignored is out of range (the gathers
  // would count it from the back).
  Tensor big(it, {});
  visitDType(it, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) big.setInt(0, int64_t(std::numeric_limits<T>::max()));
  });
  if (isSignedInt(it))
    index = bd.op(OpKind::Where,
                  {bd.op(OpKind::Less, {index, zero}, "negative"),
                   bd.constant(std::move(big), "outside"), index},
                  "index");
  Value *classAxis = bd.ints({1}, "axis1");
  Value *at = bd.op(OpKind::Unsqueeze, {index, classAxis}, "index1");
  Value *picked =
      bd.op(OpKind::GatherElements, {logp, at}, "picked", {{"axis", Attribute::ofInt(1)}});
  picked = bd.op(OpKind::Squeeze, {picked, classAxis}, "logp_t");
  Value *loss = bd.op(OpKind::Neg, {picked}, "neg");
  Value *w = nullptr;
  if (weight) {
    w = bd.op(OpKind::Gather, {bd.cast(weight, ct, "w32"), index}, "w_t",
              {{"axis", Attribute::ofInt(0)}});
    loss = bd.op(OpKind::Mul, {loss, w}, "weighted");
  }
  if (ignored) {
    Value *none = bd.scalar(ct, 0, "zerof");
    loss = bd.op(OpKind::Where, {ignored, none, loss}, "loss");
    if (w) w = bd.op(OpKind::Where, {ignored, none, w}, "w_kept");
  }
  const std::string reduction = root.getString("reduction");
  if (reduction == "none") return loss;
  Value *total = bd.reduceSum(loss, {}, "total");
  if (reduction == "sum") return total;
  if (!w && !ignored)
    return bd.op(OpKind::ReduceMean, {loss}, "mean", {{"keepdims", Attribute::ofInt(0)}});
  Value *count = w ? w : bd.cast(bd.op(OpKind::Not, {ignored}, "keep"), ct, "keepf");
  return bd.op(OpKind::Div, {total, bd.reduceSum(count, {}, "weight_sum")}, "mean");
}

bool decomposeLoss(Node &root, Rewriter &rw) {
  Value *x = root.input(0), *target = root.input(1), *weight = root.input(2);
  Value *loss = root.output(0), *logProb = root.output(1);
  const int rank = knownRank(x);
  if (rank < 2 || knownRank(target) != rank - 1 || !isFloat(dtypeOf(x)) || !isInt(dtypeOf(target)))
    return false;
  const std::string reduction = root.getString("reduction");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") return false;
  if (weight && (knownRank(weight) != 1 || dtypeOf(weight) != dtypeOf(x))) return false;
  if ((loss && !rw.canReplace(loss)) || (logProb && !rw.canReplace(logProb))) return false;
  const DType t = dtypeOf(x), ct = isHalf(t) ? DType::F32 : t;
  Builder bd(rw, root);
  Value *logp = bd.cast(x, ct, "x32");
  if (root.op() == OpKind::SoftmaxCrossEntropyLoss)
    logp = bd.op(OpKind::LogSoftmax, {logp}, "log_prob", {{"axis", Attribute::ofInt(1)}});
  Value *result = bd.cast(nllLoss(bd, root, logp, ct), t, "out");
  if (logProb) {
    Value *lp = bd.cast(logp, t, "log_prob_out");
    if (lp == x) lp = bd.op(OpKind::Identity, {lp}, "log_prob_copy");
    if (!bd.finish(logProb, lp)) return false;
  }
  if (loss) return bd.finish(loss, result);
  return true;
}

// ---- Dropout ------------------------------------------------------------------------

bool decomposeDropout(Node &root, Rewriter &rw) {
  Value *x = root.input(0), *y = root.output(0), *mask = root.output(1);
  // It copies unless training_mode holds and the ratio (0.5 by default) is
  // not 0; what is known only per run is left to the dispatch.
  const Tensor *training = constantOf(root.input(2)), *ratio = constantOf(root.input(1));
  bool copies = true;
  if (root.input(2)) {
    if (!training || training->numel() != 1) return false;
    if (training->getDouble(0) != 0)
      copies = ratio && ratio->numel() == 1 && ratio->getDouble(0) == 0;
  }
  if (!copies || (y && !rw.canReplace(y)) || (mask && !rw.canReplace(mask))) return false;
  Builder bd(rw, root);
  if (mask) {
    Tensor on(DType::Bool, {1});
    on.setInt(0, 1);
    Value *shape = bd.op(OpKind::Shape, {x}, "shape");
    Value *all = bd.op(OpKind::ConstantOfShape, {shape}, "mask",
                       {{"value", Attribute::ofTensor(std::move(on))}});
    if (!bd.finish(mask, all)) return false;
  }
  if (y) return bd.finish(y, bd.op(OpKind::Identity, {x}, "copy"));
  return true;
}

const PatternSet &decomposePatterns() {
  static const PatternSet set{"decompose",
                              {
                                  {"gemm", OpKind::Gemm, decomposeGemm},
                                  {"einsum", OpKind::Einsum, decomposeEinsum},
                                  {"nll-loss", OpKind::NegativeLogLikelihoodLoss, decomposeLoss},
                                  {"sce-loss", OpKind::SoftmaxCrossEntropyLoss, decomposeLoss},
                                  {"dropout", OpKind::Dropout, decomposeDropout},
                              },
                              /*rewriteUnusedNodes=*/true};
  return set;
}

} // namespace

bool decomposes(OpKind op) {
  for (const Pattern &p : decomposePatterns().patterns)
    if (p.root == op) return true;
  return false;
}

std::unique_ptr<Pass> createDecomposePass() {
  return makePatternPass(decomposePatterns());
}

} // namespace kiln
