// Kernel IR lowerings of elementwise ops and fused elementwise groups with
// full numpy broadcasting (lower/ops.h). This is the lowering that fits
// every run: the compiler uses it for nodes the specialized lowering
// (lower/elementwise.h, which speculates on shapes) refuses, and as that
// kernel's general variant when shapes are symbolic.
//
// Algorithm, for one node or a Fused region (its nodes, inputs, outputs):
//  1. Shapes: every value's dims are shape values; each node's result is
//     the numpy broadcast of its operands, computed on every run with a
//     check per dim (a clear error when shapes do not broadcast). The
//     iteration space is the broadcast of the outputs.
//  2. Fit: for each buffer and iteration dim, the buffer either lacks the
//     dim or has it statically 1 (stride 0), provably has the iteration
//     dim (its contiguous stride), has the same symbol as the iteration dim
//     (a guess), or is unknown (stride computed on the run: 0 where its dim
//     is 1). An output smaller than the iteration space is stored once per
//     element, at the first index of its broadcast dims.
//  3. Plans: dims statically 1 are dropped; adjacent dims along which every
//     buffer fits the same known way merge, so a same-shape chain is one
//     flat loop and a per-channel bias is a two-dim nest. When some fits
//     are guesses, two plans are emitted: one trusting them, one not, and
//     the shape program enables exactly one (the other runs zero
//     iterations).
//  4. Loops: the outer loop is parallel, the inner one vectorized; a flat
//     space is split into parallel blocks and a tail. Body: load each used
//     input once, emit each node's scalar math (elementwise_ops.h), store
//     the outputs. Integer division by zero and the like set the status
//     word (the interpreter's errors).
#include "lower/elementwise_ops.h"
#include "lower/ops.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;
using Dims = std::vector<SVal>;

constexpr int kVectorWidth = 8;
// Inputs of a rank the graph does not know (an If whose branches give
// different ranks) are padded to this rank with leading 1s, as broadcasting
// pads shapes; outputs then take their rank from the run.
constexpr int kPaddedRank = 8;
constexpr int64_t kBlock = 1024; // elements per parallel iteration of a flat space

// The values and nodes one lowering computes: a single node, or a Fused
// node's region (whose inputs are the node's inputs in order).
struct Group {
  std::vector<const Value *> inputs;  // buffer in(i); null: absent optional input
  std::vector<const Node *> nodes;    // the nodes some output depends on, in order
  std::vector<const Value *> outputs; // buffer out(o)
};

// How a buffer meets one iteration dim (see the file comment, step 2).
enum class Fit { Bcast, Full, Guess, Unknown };

// One loop of a plan: its trip count, each buffer's stride along it, and
// for each output a flag that is non-zero where the output is broadcast
// along it (the output is then stored at index 0 only).
struct LoopDim {
  SVal extent;
  std::vector<SVal> stride; // per buffer: inputs, then outputs
  std::vector<SVal> flag;   // per output
};

// Operands of `n` read per element: Dropout reads its ratio and
// training_mode on the host, CastLike only the dtype of its second input.
int numOperands(const Node &n) {
  return n.op() == OpKind::Dropout || n.op() == OpKind::CastLike ? 1 : n.numInputs();
}

class ElementwiseLowering {
public:
  ElementwiseLowering(DispatchBuilder &d, Group g) : d_(d), g_(std::move(g)) {}
  Status run();

private:
  int numBuffers() const { return int(g_.inputs.size() + g_.outputs.size()); }
  const Value *bufferValue(int b) const {
    return b < int(g_.inputs.size()) ? g_.inputs[size_t(b)] : g_.outputs[b - g_.inputs.size()];
  }
  Status computeShapes();
  // `at`: where a message is about, as a prefix of it (at() below).
  Expected<Dims> broadcast(const std::vector<const Value *> &values, const std::string &at);
  // "node 'x' (Op): " for a node of a fused group, "" for the dispatch's own
  // node (the step's label already names it).
  std::string at(const Node &n) const { return &n == &d_.node() ? "" : n.describe() + ": "; }
  Status dropoutChecks(const Node &n);
  void computeFits();
  std::vector<LoopDim> plan(bool trustGuesses);
  SVal strideFor(int buffer, int k, Fit fit);
  Status emitPlan(const std::vector<LoopDim> &loops, SVal enabled);
  // Starts a kernel whose errors (integer division by zero...) collect in
  // one bool var per status code inside its vectorized loop.
  kir::KernelBuilder &beginKernel(SVal extent = {}, SVal work = {});
  // The innermost (vectorized) loop; closing it reports the errors it saw.
  int beginInnerLoop(SVal extent);
  void endInnerLoop();
  // Emits the body; `index(b)` is buffer b's element index at this point,
  // `flagged(o)` the guard term of output o (empty: none).
  Status emitBody(const std::function<kir::Affine(int)> &index,
                  const std::function<kir::Affine(int)> &flagged);

  DispatchBuilder &d_;
  Group g_;
  std::unordered_map<const Value *, Dims> shapes_;
  std::unordered_map<const Value *, SVal> ranks_; // each value's rank (a constant when known)
  bool padded_ = false;                           // some input's rank is unknown
  std::vector<bool> loaded_; // per input: read per element by some node
  Dims iter_;
  std::vector<Dim> iterIr_;                   // the iteration dims as the graph types know them
  std::vector<std::vector<Fit>> fits_;        // [buffer][iteration dim]
  std::vector<std::vector<SVal>> contiguous_; // [buffer][own axis]
  std::map<std::string, int> codes_;
  std::map<std::string, int> errorVars_; // per message: a var of the current kernel
  SVal guessesHold_;
};

Status ElementwiseLowering::run() {
  for (const Node *n : g_.nodes) KILN_RETURN_IF_ERROR(checkElementwiseForm(*n));
  KILN_RETURN_IF_ERROR(computeShapes());
  for (size_t o = 0; o < g_.outputs.size(); ++o) { // an absent output is computed, not stored
    const Value *v = g_.outputs[o];
    if (padded_ && v)
      d_.setOutputOfRank(int(o), shapes_.at(v), ranks_.at(v));
    else
      d_.setOutput(int(o), v ? shapes_.at(v) : iter_);
  }
  for (const Node *n : g_.nodes)
    for (const std::string &m : elementwiseErrors(*n))
      if (!codes_.count(m)) codes_[m] = d_.statusCode(m);
  computeFits();
  bool anyGuess = false;
  for (const auto &row : fits_)
    for (Fit f : row) anyGuess |= f == Fit::Guess;
  if (!anyGuess) return emitPlan(plan(false), d_.c(1));
  KILN_RETURN_IF_ERROR(emitPlan(plan(true), guessesHold_));
  return emitPlan(plan(false), d_.lnot(guessesHold_));
}

// ---- step 1: shapes ------------------------------------------------------------

Status ElementwiseLowering::computeShapes() {
  for (size_t i = 0; i < g_.inputs.size(); ++i) {
    const Value *v = g_.inputs[i];
    if (!v) continue;
    if (!v->type().isTensor()) return makeError("input '", v->name(), "' is not a tensor");
    if (d_.inputRank(int(i)) >= 0) {
      shapes_[v] = d_.dims(int(i));
      ranks_[v] = d_.c(d_.inputRank(int(i)));
      continue;
    }
    padded_ = true;
    Dims dims;
    for (int k = kPaddedRank - 1; k >= 0; --k) dims.push_back(d_.dimFromEnd(int(i), k));
    shapes_[v] = std::move(dims);
    ranks_[v] = d_.rank(int(i));
    d_.check(d_.le(ranks_[v], d_.c(kPaddedRank)),
             "input '" + v->name() + "' has rank {}, above the " + std::to_string(kPaddedRank) +
                 " this kernel was compiled for",
             {ranks_[v]});
  }
  loaded_.assign(g_.inputs.size(), false);
  for (const Node *n : g_.nodes) {
    for (int i = 0; i < numOperands(*n); ++i)
      if (const Value *v = n->input(i)) {
        if (!shapes_.count(v))
          return makeError(n->describe(), ": input '", v->name(), "' is not computed here");
        for (size_t j = 0; j < g_.inputs.size(); ++j) loaded_[j] = loaded_[j] || g_.inputs[j] == v;
      }
    const Value *x = n->input(0);
    if (n->op() == OpKind::Dropout) {
      KILN_RETURN_IF_ERROR(dropoutChecks(*n));
      for (const Value *o : n->outputs())
        if (o) shapes_[o] = shapes_.at(x), ranks_[o] = ranks_.at(x);
      continue;
    }
    Dims out;
    SVal rank = ranks_.at(x);
    if (n->op() == OpKind::Clip) { // the bounds are one-element tensors, not broadcast
      out = shapes_.at(x);
      for (int i = 1; i <= 2; ++i)
        if (const Value *bound = n->input(i))
          d_.check(d_.eq(d_.product(shapes_.at(bound)), d_.c(1)),
                   at(*n) + (i == 1 ? "min" : "max") + " must have one element");
    } else {
      std::vector<const Value *> operands;
      for (int i = 0; i < numOperands(*n); ++i)
        if (n->input(i)) {
          operands.push_back(n->input(i));
          rank = d_.max(rank, ranks_.at(n->input(i)));
        }
      KILN_ASSIGN_OR_RETURN(out, broadcast(operands, at(*n)));
    }
    const Shape &declared = n->output(0)->type().shape();
    if (declared.rankKnown && !padded_ && declared.rank() != int64_t(out.size()))
      return makeError(at(*n), "output rank ", declared.rank(),
                       " is not the broadcast rank ", out.size());
    if (declared.rankKnown && padded_)
      d_.check(d_.eq(rank, d_.c(declared.rank())),
               at(*n) + "the inputs' ranks give rank {}, the graph says " +
                   std::to_string(declared.rank()),
               {rank});
    shapes_[n->output(0)] = std::move(out);
    ranks_[n->output(0)] = rank;
  }
  std::vector<const Value *> outputs;
  for (const Value *o : g_.outputs) {
    if (!o) continue;
    if (!shapes_.count(o)) return makeError("output '", o->name(), "' is not computed here");
    outputs.push_back(o);
    for (size_t j = 0; j < g_.inputs.size(); ++j) loaded_[j] = loaded_[j] || g_.inputs[j] == o;
  }
  if (outputs.empty()) return makeError("no output is computed");
  KILN_ASSIGN_OR_RETURN(iter_, broadcast(outputs, "the outputs"));
  const Shape &first = outputs[0]->type().shape();
  iterIr_.assign(iter_.size(), Dim());
  if (first.rankKnown && first.rank() == int64_t(iter_.size())) iterIr_ = first.dims;
  return Status::success();
}

// The numpy broadcast of the values' shapes: per dim, the dims that are not
// 1 must agree. A static dim other than 1 decides the result (the others are
// checked against it); a single symbolic one is the result itself, so that
// buffers of that dim provably fit it.
Expected<Dims> ElementwiseLowering::broadcast(const std::vector<const Value *> &values,
                                              const std::string &at) {
  size_t rank = 0;
  for (const Value *v : values) rank = std::max(rank, shapes_.at(v).size());
  Dims out(rank);
  for (size_t k = 0; k < rank; ++k) {
    std::vector<SVal> dims;
    for (const Value *v : values) {
      const Dims &s = shapes_.at(v);
      if (k + s.size() >= rank) dims.push_back(s[k + s.size() - rank]);
    }
    std::optional<SVal> decided;
    std::vector<SVal> open;
    for (SVal dim : dims) {
      auto value = d_.constant(dim);
      if (value && *value != 1 && !decided) decided = dim;
      if (!value && std::none_of(open.begin(), open.end(), [&](SVal o) { return o.id == dim.id; }))
        open.push_back(dim);
    }
    SVal r = d_.c(1);
    if (decided)
      r = *decided;
    else if (open.size() == 1)
      r = open[0];
    else
      for (SVal dim : open) r = d_.select(d_.eq(dim, d_.c(1)), r, dim);
    for (SVal dim : dims) {
      if (dim.id == r.id) continue;
      const SVal ok = d_.lor(d_.eq(dim, d_.c(1)), d_.eq(dim, r));
      if (auto k2 = d_.constant(ok); k2 && !*k2)
        return makeError(at, "shapes do not broadcast (dim ", *d_.constant(dim), " against ",
                         *d_.constant(r), " at axis ", k, " of ", rank, ")");
      d_.check(ok,
               at + "shapes do not broadcast (dim {} against {} at axis " + std::to_string(k) +
                   " of " + std::to_string(rank) + ")",
               {dim, r});
    }
    out[k] = r;
  }
  return out;
}

// Inference dropout copies; training mode with a non-zero ratio would draw a
// random mask, which the interpreter refuses, and so does this.
Status ElementwiseLowering::dropoutChecks(const Node &n) {
  const Value *ratio = n.input(1), *training = n.input(2);
  if (ratio && (!ratio->type().isTensor() || !isFloat(ratio->type().dtype())))
    return makeError(n.describe(), ": ratio must be a one-element float tensor");
  if (!training) return Status::success();
  auto indexOf = [&](const Value *v) {
    for (int i = 0; i < d_.node().numInputs(); ++i)
      if (d_.input(i) == v) return i;
    return -1;
  };
  const int ti = indexOf(training), ri = ratio ? indexOf(ratio) : -1;
  if (ti < 0 || (ratio && ri < 0))
    return makeError(n.describe(), ": ratio and training_mode must be inputs of the dispatch");
  d_.check(d_.eq(d_.numel(ti), d_.c(1)), at(n) + "training_mode must have one element");
  if (ratio) d_.check(d_.eq(d_.numel(ri), d_.c(1)), at(n) + "ratio must have one element");
  const SVal on = d_.ne(d_.elem(ti, 0), d_.c(0));
  const SVal r = ratio ? d_.elemF(ri, d_.c(0)) : d_.cf(0.5);
  const SVal dropping = d_.lor(d_.flt(r, d_.cf(0)), d_.flt(d_.cf(0), r));
  d_.check(d_.lnot(d_.land(on, dropping)),
           at(n) + "training-mode dropout is not supported");
  return Status::success();
}

// ---- step 2: fits ---------------------------------------------------------------

void ElementwiseLowering::computeFits() {
  const size_t rank = iter_.size();
  fits_.assign(size_t(numBuffers()), std::vector<Fit>(rank, Fit::Bcast));
  contiguous_.assign(size_t(numBuffers()), {});
  guessesHold_ = d_.c(1);
  for (int b = 0; b < numBuffers(); ++b) {
    const Value *v = bufferValue(b);
    if (!v || (b < int(g_.inputs.size()) && !loaded_[size_t(b)])) continue;
    const Dims &s = shapes_.at(v);
    std::vector<SVal> &st = contiguous_[size_t(b)];
    st.assign(s.size(), d_.c(1));
    for (size_t a = s.size(); a-- > 1;) st[a - 1] = d_.mul(st[a], s[a]);
    // A rank above the iteration space's (Clip's bounds over a scalar):
    // one element, checked, read at index 0.
    if (s.size() > rank) continue;
    const Shape &type = v->type().shape();
    for (size_t k = rank - s.size(); k < rank; ++k) {
      const size_t a = k - (rank - s.size());
      const auto value = d_.constant(s[a]), it = d_.constant(iter_[k]);
      Fit &f = fits_[size_t(b)][k];
      if (value && *value == 1)
        f = Fit::Bcast;
      else if (s[a].id == iter_[k].id || (value && it && *value == *it))
        f = Fit::Full;
      else if (type.rankKnown && size_t(type.rank()) == s.size() && type.dims[a].isSymbol() &&
               type.dims[a] == iterIr_[k]) {
        f = Fit::Guess;
        guessesHold_ = d_.land(guessesHold_, d_.eq(s[a], iter_[k]));
      } else {
        f = Fit::Unknown;
      }
    }
  }
}

// ---- step 3: plans --------------------------------------------------------------

SVal ElementwiseLowering::strideFor(int b, int k, Fit fit) {
  if (fit == Fit::Bcast) return d_.c(0); // also where the buffer lacks the dim
  const Dims &s = shapes_.at(bufferValue(b));
  const size_t a = k - (iter_.size() - s.size());
  const SVal full = contiguous_[size_t(b)][a];
  if (fit == Fit::Full) return full;
  return d_.select(d_.eq(s[a], d_.c(1)), d_.c(0), full);
}

std::vector<LoopDim> ElementwiseLowering::plan(bool trustGuesses) {
  const int nIn = int(g_.inputs.size());
  auto fitOf = [&](int b, size_t k) {
    const Fit f = fits_[size_t(b)][k];
    if (f != Fit::Guess) return f;
    return trustGuesses ? Fit::Full : Fit::Unknown;
  };
  auto used = [&](int b) { return bufferValue(b) && (b >= nIn || loaded_[size_t(b)]); };
  std::vector<LoopDim> loops;
  std::optional<size_t> last; // the previous kept dim
  for (size_t k = 0; k < iter_.size(); ++k) {
    if (auto e = d_.constant(iter_[k]); e && *e == 1) continue;
    bool merge = last.has_value();
    for (int b = 0; merge && b < numBuffers(); ++b) {
      if (!used(b)) continue;
      const Fit f = fitOf(b, k), g = fitOf(b, *last);
      merge = f == g && (f == Fit::Bcast || f == Fit::Full);
    }
    if (merge) {
      LoopDim &l = loops.back();
      l.extent = d_.mul(l.extent, iter_[k]);
      for (int b = 0; b < numBuffers(); ++b)
        if (used(b)) l.stride[size_t(b)] = strideFor(b, int(k), fitOf(b, k));
    } else {
      LoopDim l;
      l.extent = iter_[k];
      l.stride.assign(size_t(numBuffers()), d_.c(0));
      l.flag.assign(g_.outputs.size(), d_.c(0));
      for (int b = 0; b < numBuffers(); ++b)
        if (used(b)) l.stride[size_t(b)] = strideFor(b, int(k), fitOf(b, k));
      for (size_t o = 0; o < g_.outputs.size(); ++o) {
        const int b = nIn + int(o);
        if (!used(b)) continue;
        const Dims &s = shapes_.at(g_.outputs[o]);
        const Fit f = fitOf(b, k);
        if (f == Fit::Bcast)
          l.flag[o] = d_.c(1);
        else if (f != Fit::Full)
          l.flag[o] =
              d_.land(d_.eq(s[k - (iter_.size() - s.size())], d_.c(1)), d_.ne(iter_[k], d_.c(1)));
      }
      loops.push_back(std::move(l));
    }
    last = k;
  }
  return loops;
}

// ---- step 4: kernels ------------------------------------------------------------

kir::KernelBuilder &ElementwiseLowering::beginKernel(SVal extent, SVal work) {
  kir::KernelBuilder &b = d_.beginKernel(extent, work);
  errorVars_.clear();
  for (const auto &[message, code] : codes_)
    errorVars_[message] = b.addVar("error" + std::to_string(code), DType::Bool);
  return b;
}

// A store of the status word inside the loop would keep it from
// vectorizing: the loop ORs each element's error into a var instead.
int ElementwiseLowering::beginInnerLoop(SVal extent) {
  for (const auto &[message, var] : errorVars_)
    d_.kb().varWrite(var, d_.kb().intConstant(DType::Bool, 0));
  // A loop known to be shorter than a vector is not worth vectorizing
  // (and LLVM warns when asked to).
  if (auto n = d_.constant(extent); n && *n < kVectorWidth) return d_.loop(extent);
  return d_.loop(extent, {Schedule::Kind::Vector, kVectorWidth});
}

void ElementwiseLowering::endInnerLoop() {
  d_.kb().endLoop();
  for (const auto &[message, var] : errorVars_) d_.raise(d_.kb().varRead(var), codes_.at(message));
}

Status ElementwiseLowering::emitPlan(const std::vector<LoopDim> &loops, SVal enabled) {
  if (loops.empty()) { // a scalar: one element, no loop
    d_.beginKernel();
    errorVars_.clear(); // errors are reported where they occur
    KILN_RETURN_IF_ERROR(
        emitBody([](int) { return kir::Affine{}; }, [](int) { return kir::Affine{}; }));
    d_.endKernel();
    return Status::success();
  }
  if (loops.size() == 1) { // flat: parallel blocks of kBlock, then the tail
    const LoopDim &l = loops[0];
    const SVal blocks = d_.mul(d_.floorDiv(l.extent, d_.c(kBlock)), enabled);
    const SVal base = d_.mul(blocks, d_.c(kBlock));
    const SVal rest = d_.mul(d_.sub(l.extent, base), enabled);
    if (d_.constant(blocks).value_or(1) != 0) {
      beginKernel(blocks, d_.c(kBlock));
      const int blk = d_.loop(blocks, {Schedule::Kind::Parallel, 1});
      const int j = beginInnerLoop(d_.c(kBlock));
      auto at = [&](SVal stride) {
        kir::Affine a = d_.term(stride, blk, kBlock);
        return d_.addTerm(a, stride, j);
      };
      KILN_RETURN_IF_ERROR(emitBody([&](int b) { return at(l.stride[size_t(b)]); },
                                    [&](int o) { return at(l.flag[size_t(o)]); }));
      endInnerLoop();
      d_.kb().endLoop();
      d_.endKernel();
    }
    if (d_.constant(rest).value_or(1) != 0) {
      beginKernel();
      const int j = beginInnerLoop(rest);
      auto at = [&](SVal stride) {
        if (d_.constant(stride) == 0) return kir::Affine{}; // 0 * base would be a param
        kir::Affine a = d_.term(d_.mul(stride, base));
        return d_.addTerm(a, stride, j);
      };
      KILN_RETURN_IF_ERROR(emitBody([&](int b) { return at(l.stride[size_t(b)]); },
                                    [&](int o) { return at(l.flag[size_t(o)]); }));
      endInnerLoop();
      d_.endKernel();
    }
    return Status::success();
  }
  std::vector<SVal> inner;
  for (size_t k = 1; k < loops.size(); ++k) inner.push_back(loops[k].extent);
  const SVal outer = d_.mul(loops[0].extent, enabled);
  beginKernel(outer, d_.product(inner));
  std::vector<int> vars{d_.loop(outer, {Schedule::Kind::Parallel, 1})};
  for (size_t k = 1; k + 1 < loops.size(); ++k) vars.push_back(d_.loop(loops[k].extent));
  vars.push_back(beginInnerLoop(loops.back().extent));
  auto sum = [&](auto pick) {
    kir::Affine a;
    for (size_t k = 0; k < loops.size(); ++k) d_.addTerm(a, pick(loops[k]), vars[k]);
    return a;
  };
  KILN_RETURN_IF_ERROR(
      emitBody([&](int b) { return sum([&](const LoopDim &l) { return l.stride[size_t(b)]; }); },
               [&](int o) { return sum([&](const LoopDim &l) { return l.flag[size_t(o)]; }); }));
  endInnerLoop();
  for (size_t k = 0; k + 1 < loops.size(); ++k) d_.kb().endLoop();
  d_.endKernel();
  return Status::success();
}

Status ElementwiseLowering::emitBody(const std::function<kir::Affine(int)> &index,
                                     const std::function<kir::Affine(int)> &flagged) {
  kir::KernelBuilder &b = d_.kb();
  std::unordered_map<const Value *, int> ssa;
  for (size_t i = 0; i < g_.inputs.size(); ++i)
    if (loaded_[i] && !ssa.count(g_.inputs[i]))
      ssa[g_.inputs[i]] = b.load(d_.in(int(i)), index(int(i)));
  const RaiseFn raise = [&](int cond, const std::string &message) {
    auto var = errorVars_.find(message);
    if (var == errorVars_.end()) return d_.raise(cond, codes_.at(message));
    b.varWrite(var->second, b.binary(Opcode::Or, DType::Bool, b.varRead(var->second), cond));
  };
  for (const Node *n : g_.nodes) {
    if (n->op() == OpKind::Dropout) {
      ssa[n->output(0)] = ssa.at(n->input(0));
      if (const Value *mask = n->output(1)) ssa[mask] = b.intConstant(DType::Bool, 1);
      continue;
    }
    std::vector<int> operands;
    for (int i = 0; i < n->numInputs(); ++i)
      operands.push_back(i < numOperands(*n) && n->input(i) ? ssa.at(n->input(i)) : -1);
    KILN_ASSIGN_OR_RETURN(ssa[n->output(0)], emitElementwise(b, *n, operands, raise));
  }
  for (size_t o = 0; o < g_.outputs.size(); ++o) {
    if (!g_.outputs[o]) continue;
    const int buffer = d_.out(int(o));
    const kir::Affine guard = flagged(int(o));
    const int value = ssa.at(g_.outputs[o]);
    if (guard.terms.empty()) {
      b.store(buffer, index(int(g_.inputs.size() + o)), value);
      continue;
    }
    b.beginIf(b.compare(Opcode::Eq, DType::I64, b.index(guard), b.intConstant(DType::I64, 0)));
    b.store(buffer, index(int(g_.inputs.size() + o)), value);
    b.endIf();
  }
  return Status::success();
}

// ---- the lowerings --------------------------------------------------------------

// The nodes of `body` that some output depends on, in order.
std::vector<const Node *> liveNodes(const std::vector<const Node *> &nodes,
                                    const std::vector<const Value *> &outputs) {
  std::set<const Value *> needed(outputs.begin(), outputs.end());
  std::vector<const Node *> live;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node *n = *it;
    bool used = false;
    for (const Value *v : n->outputs()) used = used || (v && needed.count(v));
    if (!used) continue;
    live.push_back(n);
    for (int i = 0; i < numOperands(*n); ++i)
      if (n->input(i)) needed.insert(n->input(i));
  }
  std::reverse(live.begin(), live.end());
  return live;
}

Status lowerNode(DispatchBuilder &d) {
  const Node &n = d.node();
  Group g;
  g.inputs.assign(n.inputs().begin(), n.inputs().end());
  g.nodes = {&n};
  g.outputs.assign(n.outputs().begin(), n.outputs().end());
  return ElementwiseLowering(d, std::move(g)).run();
}

Status lowerFused(DispatchBuilder &d) {
  const Node &n = d.node();
  if (n.getString("kind") != "elementwise")
    return makeError("a fused node of kind '", n.getString("kind"),
                     "' is not an elementwise group");
  const Graph *body = n.getGraph("body");
  if (!body || body->inputs().size() != size_t(n.numInputs()) ||
      body->outputs().size() != size_t(n.numOutputs()))
    return makeError("the fused region does not match the node's inputs and outputs");
  Group g;
  g.inputs.assign(body->inputs().begin(), body->inputs().end());
  g.outputs.assign(body->outputs().begin(), body->outputs().end());
  std::vector<const Node *> nodes;
  for (const auto &m : body->nodes()) nodes.push_back(m.get());
  g.nodes = liveNodes(nodes, g.outputs);
  if (g.outputs.empty()) return makeError("a fused group without outputs");
  return ElementwiseLowering(d, std::move(g)).run();
}

} // namespace

LowerFn elementwiseLowering(OpKind op) {
  if (op == OpKind::Fused) return lowerFused;
  return isElementwiseOp(op) ? lowerNode : nullptr;
}

} // namespace kiln::lower
