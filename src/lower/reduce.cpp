#include "lower/reduce.h"

#include <algorithm>
#include <limits>

namespace kiln::lower {

namespace {

using kir::Affine;
using kir::Opcode;
using kir::Schedule;
using Kind = cpu::ReductionLaunch::Kind;

bool isReduceOp(OpKind op) {
  switch (op) {
  case OpKind::ReduceSum: case OpKind::ReduceMean: case OpKind::ReduceMax: case OpKind::ReduceMin:
  case OpKind::ReduceSumSquare: case OpKind::ReduceL1: case OpKind::ReduceL2:
    return true;
  default:
    return false;
  }
}

// The reduced axes [begin, end) of `node` for input rank `rank`; false when
// they are not a contiguous run or not known at compile time.
bool reducedAxes(const Node &n, int rank, int &begin, int &end) {
  std::vector<int64_t> axes;
  if (n.op() == OpKind::Softmax || n.op() == OpKind::LogSoftmax) {
    axes = {n.getInt("axis")};
  } else if (n.op() == OpKind::LayerNormalization) {
    int64_t a = n.getInt("axis");
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return false;
    begin = static_cast<int>(a);
    end = rank;
    return true;
  } else {
    if (n.input(1)) {
      const Tensor *t = constantOf(n.input(1));
      if (!t) return false;
      for (int64_t i = 0; i < t->numel(); ++i) axes.push_back(t->getInt(i));
    }
    if (axes.empty()) {
      if (n.getInt("noop_with_empty_axes")) return false;
      for (int i = 0; i < rank; ++i) axes.push_back(i);
    }
  }
  for (int64_t &a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return false;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty()) return false;
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1) return false;
  begin = static_cast<int>(axes.front());
  end = static_cast<int>(axes.back()) + 1;
  return true;
}

Kind kindOf(OpKind op) {
  switch (op) {
  case OpKind::Softmax: return Kind::Softmax;
  case OpKind::LogSoftmax: return Kind::LogSoftmax;
  case OpKind::LayerNormalization: return Kind::LayerNorm;
  default: return Kind::Reduce;
  }
}

// Emits the reduction kernel body. Loop variables and buffers follow the
// header's layout.
class Emitter {
public:
  Emitter(const Node &n, kir::KernelBuilder &b, int width, bool columns)
      : n_(n), b_(b), width_(width), columns_(columns) {}

  void emit();

  int in = 0, out = 1, scale = 2, scratchMax = -1, scratchSum = -1, gamma = -1, beta = -1;
  int pOuter = 0, pRed = 1, pInner = 2;

private:
  kir::Schedule vec() const { return {Schedule::Kind::Vector, width_}; }
  int c(double v) { return b_.constant(DType::F32, v); }
  int bin(Opcode op, int x, int y) { return b_.binary(op, DType::F32, x, y); }
  int un(Opcode op, int x) { return b_.unary(op, DType::F32, x); }
  // x[o, k, i] as an affine index: o*red*inner + k*inner + i. red*inner
  // needs two params in one term, so rows use o*red + k (inner = 1) and
  // columns carry the row stride red*inner as an extra param.
  Affine at(int o, int k, int i) const {
    Affine a;
    if (columns_) {
      a.add(1, pRowStride_, o);
      if (k >= 0) a.add(1, pInner, k);
      a.add(1, -1, i);
    } else {
      a.add(1, pRed, o);
      if (k >= 0) a.add(1, -1, k);
    }
    return a;
  }
  Affine rowOf(int o, int i) const { // index of (o, i) in an [outer, inner] array
    Affine a;
    a.add(1, pInner, o);
    a.add(1, -1, i);
    return a;
  }
  void emitReduceRows(int o);
  void emitReduceColumns(int o);
  void emitSoftmaxRows(int o);
  void emitSoftmaxColumns(int o);
  void emitLayerNorm(int o);
  // The per-element contribution and combine of a reduce op.
  int element(int x);
  Opcode combine() const;
  double init() const;
  int finish(int acc);

  const Node &n_;
  kir::KernelBuilder &b_;
  int width_;
  bool columns_;

public:
  int pRowStride_ = -1;
};

Opcode Emitter::combine() const {
  switch (n_.op()) {
  case OpKind::ReduceMax: return Opcode::Max;
  case OpKind::ReduceMin: return Opcode::Min;
  default: return Opcode::Add;
  }
}

double Emitter::init() const {
  switch (n_.op()) {
  case OpKind::ReduceMax: return -std::numeric_limits<double>::infinity();
  case OpKind::ReduceMin: return std::numeric_limits<double>::infinity();
  default: return 0.0;
  }
}

int Emitter::element(int x) {
  switch (n_.op()) {
  case OpKind::ReduceSumSquare: case OpKind::ReduceL2: return bin(Opcode::Mul, x, x);
  case OpKind::ReduceL1: return un(Opcode::Abs, x);
  default: return x;
  }
}

int Emitter::finish(int acc) {
  if (n_.op() == OpKind::ReduceMean) return bin(Opcode::Mul, acc, b_.load(scale, Affine::constant(0)));
  if (n_.op() == OpKind::ReduceL2) return un(Opcode::Sqrt, acc);
  return acc;
}

void Emitter::emitReduceRows(int o) {
  int acc = b_.addVar("acc", DType::F32);
  b_.varWrite(acc, c(init()));
  int k = b_.beginLoop(Affine::param(pRed), vec());
  b_.varWrite(acc, bin(combine(), b_.varRead(acc), element(b_.load(in, at(o, k, -1)))));
  b_.endLoop();
  Affine dst;
  dst.add(1, -1, o);
  b_.store(out, dst, finish(b_.varRead(acc)));
}

void Emitter::emitReduceColumns(int o) {
  int i = b_.beginLoop(Affine::param(pInner), vec());
  b_.store(out, rowOf(o, i), c(init()));
  b_.endLoop();
  int k = b_.beginLoop(Affine::param(pRed));
  i = b_.beginLoop(Affine::param(pInner), vec());
  int x = element(b_.load(in, at(o, k, i)));
  b_.store(out, rowOf(o, i), bin(combine(), b_.load(out, rowOf(o, i)), x));
  b_.endLoop();
  b_.endLoop();
  i = b_.beginLoop(Affine::param(pInner), vec());
  b_.store(out, rowOf(o, i), finish(b_.load(out, rowOf(o, i))));
  b_.endLoop();
}

void Emitter::emitSoftmaxRows(int o) {
  const bool log = n_.op() == OpKind::LogSoftmax;
  int mx = b_.addVar("max", DType::F32), sum = b_.addVar("sum", DType::F32);
  b_.varWrite(mx, c(-std::numeric_limits<double>::infinity()));
  int k = b_.beginLoop(Affine::param(pRed), vec());
  b_.varWrite(mx, bin(Opcode::Max, b_.varRead(mx), b_.load(in, at(o, k, -1))));
  b_.endLoop();
  int m = b_.varRead(mx);
  b_.varWrite(sum, c(0));
  k = b_.beginLoop(Affine::param(pRed), vec());
  int d = bin(Opcode::Sub, b_.load(in, at(o, k, -1)), m);
  int e = un(Opcode::Exp, d);
  b_.store(out, at(o, k, -1), log ? d : e);
  b_.varWrite(sum, bin(Opcode::Add, b_.varRead(sum), e));
  b_.endLoop();
  int s = b_.varRead(sum);
  int f = log ? un(Opcode::Log, s) : un(Opcode::Recip, s);
  k = b_.beginLoop(Affine::param(pRed), vec());
  int y = b_.load(out, at(o, k, -1));
  b_.store(out, at(o, k, -1), bin(log ? Opcode::Sub : Opcode::Mul, y, f));
  b_.endLoop();
}

void Emitter::emitSoftmaxColumns(int o) {
  const bool log = n_.op() == OpKind::LogSoftmax;
  int i = b_.beginLoop(Affine::param(pInner), vec());
  b_.store(scratchMax, rowOf(o, i), c(-std::numeric_limits<double>::infinity()));
  b_.store(scratchSum, rowOf(o, i), c(0));
  b_.endLoop();
  int k = b_.beginLoop(Affine::param(pRed));
  i = b_.beginLoop(Affine::param(pInner), vec());
  b_.store(scratchMax, rowOf(o, i),
           bin(Opcode::Max, b_.load(scratchMax, rowOf(o, i)), b_.load(in, at(o, k, i))));
  b_.endLoop();
  b_.endLoop();
  k = b_.beginLoop(Affine::param(pRed));
  i = b_.beginLoop(Affine::param(pInner), vec());
  int d = bin(Opcode::Sub, b_.load(in, at(o, k, i)), b_.load(scratchMax, rowOf(o, i)));
  int e = un(Opcode::Exp, d);
  b_.store(out, at(o, k, i), log ? d : e);
  b_.store(scratchSum, rowOf(o, i), bin(Opcode::Add, b_.load(scratchSum, rowOf(o, i)), e));
  b_.endLoop();
  b_.endLoop();
  k = b_.beginLoop(Affine::param(pRed));
  i = b_.beginLoop(Affine::param(pInner), vec());
  int s = b_.load(scratchSum, rowOf(o, i));
  int y = b_.load(out, at(o, k, i));
  b_.store(out, at(o, k, i),
           log ? bin(Opcode::Sub, y, un(Opcode::Log, s)) : bin(Opcode::Div, y, s));
  b_.endLoop();
  b_.endLoop();
}

void Emitter::emitLayerNorm(int o) {
  int sum = b_.addVar("sum", DType::F32), var = b_.addVar("var", DType::F32);
  int sc = b_.load(scale, Affine::constant(0));
  b_.varWrite(sum, c(0));
  int k = b_.beginLoop(Affine::param(pRed), vec());
  b_.varWrite(sum, bin(Opcode::Add, b_.varRead(sum), b_.load(in, at(o, k, -1))));
  b_.endLoop();
  int mean = bin(Opcode::Mul, b_.varRead(sum), sc);
  b_.varWrite(var, c(0));
  k = b_.beginLoop(Affine::param(pRed), vec());
  int d = bin(Opcode::Sub, b_.load(in, at(o, k, -1)), mean);
  b_.varWrite(var, bin(Opcode::Add, b_.varRead(var), bin(Opcode::Mul, d, d)));
  b_.endLoop();
  int variance = bin(Opcode::Mul, b_.varRead(var), sc);
  int rstd = un(Opcode::Rsqrt, bin(Opcode::Add, variance, c(n_.getFloat("epsilon"))));
  k = b_.beginLoop(Affine::param(pRed), vec());
  Affine idx;
  idx.add(1, -1, k);
  int y = bin(Opcode::Mul, bin(Opcode::Sub, b_.load(in, at(o, k, -1)), mean), rstd);
  y = bin(Opcode::Mul, y, b_.load(gamma, idx));
  if (beta >= 0) y = bin(Opcode::Add, y, b_.load(beta, idx));
  b_.store(out, at(o, k, -1), y);
  b_.endLoop();
}

void Emitter::emit() {
  int o = b_.beginLoop(Affine::param(pOuter), {Schedule::Kind::Parallel, 1});
  switch (kindOf(n_.op())) {
  case Kind::Reduce: columns_ ? emitReduceColumns(o) : emitReduceRows(o); break;
  case Kind::Softmax:
  case Kind::LogSoftmax: columns_ ? emitSoftmaxColumns(o) : emitSoftmaxRows(o); break;
  case Kind::LayerNorm: emitLayerNorm(o); break;
  }
  b_.endLoop();
}

bool isF32Tensor(const Value *v) {
  return v && v->type().isTensor() && v->type().dtype() == DType::F32 &&
         v->type().shape().rankKnown;
}

} // namespace

bool canLowerReduction(const Node &n) {
  const OpKind op = n.op();
  if (!isReduceOp(op) && op != OpKind::Softmax && op != OpKind::LogSoftmax &&
      op != OpKind::LayerNormalization)
    return false;
  if (!isF32Tensor(n.input(0)) || !isF32Tensor(n.output(0))) return false;
  if (op == OpKind::LayerNormalization) {
    for (int i = 1; i < n.numOutputs(); ++i)
      if (n.output(i)) return false; // Mean / InvStdDev outputs: not lowered
    if (!isF32Tensor(n.input(1)) || (n.input(2) && !isF32Tensor(n.input(2)))) return false;
  }
  int begin = 0, end = 0;
  return reducedAxes(n, n.input(0)->type().shape().rank(), begin, end);
}

Expected<ReductionKernel> lowerReduction(const Node &n, const std::string &name, int vectorWidth) {
  if (!canLowerReduction(n)) return makeError(n.describe(), ": no reduction lowering");
  ReductionKernel rk;
  const Shape &shape = n.input(0)->type().shape();
  rk.launch.rank = shape.rank();
  reducedAxes(n, rk.launch.rank, rk.launch.axisBegin, rk.launch.axisEnd);
  rk.launch.kind = kindOf(n.op());
  rk.launch.keepdims = rk.launch.kind != Kind::Reduce || n.getInt("keepdims") != 0;
  // Rows when every dim after the reduced ones is statically 1.
  rk.launch.columns = false;
  for (int i = rk.launch.axisEnd; i < rk.launch.rank; ++i)
    if (!shape.dims[i].isStatic() || shape.dims[i].value() != 1) rk.launch.columns = true;
  if (rk.launch.kind == Kind::LayerNorm) rk.launch.columns = false; // reduces the trailing axes: inner = 1

  kir::KernelBuilder b(name);
  Emitter e(n, b, vectorWidth, rk.launch.columns);
  e.in = b.addBuffer("x", DType::F32, false);
  e.out = b.addBuffer("y", DType::F32, true);
  e.scale = b.addBuffer("scale", DType::F32, false);
  if (rk.launch.numScratch() == 2) {
    e.scratchMax = b.addBuffer("rowmax", DType::F32, true);
    e.scratchSum = b.addBuffer("rowsum", DType::F32, true);
  }
  if (rk.launch.kind == Kind::LayerNorm) {
    e.gamma = b.addBuffer("gamma", DType::F32, false);
    if (n.input(2)) e.beta = b.addBuffer("beta", DType::F32, false);
  }
  e.pOuter = b.addParam("outer");
  e.pRed = b.addParam("red");
  e.pInner = b.addParam("inner");
  e.pRowStride_ = b.addParam("rowstride"); // red * inner
  e.emit();
  rk.kernel = b.finish();
  rk.launch.symbol = rk.kernel.name;
  return rk;
}

} // namespace kiln::lower
