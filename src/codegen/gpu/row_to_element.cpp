#include "codegen/gpu/row_to_element.h"

#include "codegen/gpu/grid_plan.h"
#include "codegen/gpu/index_form.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace kiln::codegen::gpu {

namespace {

using kir::Affine;
using kir::Inst;
using kir::Opcode;

bool containsLoop(const std::vector<Inst> &body) {
  for (const Inst &i : body)
    if (i.op == Opcode::Loop || (i.op == Opcode::If && containsLoop(i.body))) return true;
  return false;
}

bool touches(const std::vector<Inst> &body, int buffer) {
  for (const Inst &i : body)
    if (((i.op == Opcode::Load || i.op == Opcode::Store) && i.buffer == buffer) ||
        touches(i.body, buffer))
      return true;
  return false;
}

Affine scaled(const Affine &a, int64_t c) {
  Affine out = a;
  for (kir::Term &t : out.terms) t.coeff *= c;
  return out;
}

Affine plus(Affine a, const Affine &b) {
  a.terms.insert(a.terms.end(), b.terms.begin(), b.terms.end());
  return normalized(a);
}

// Replaces loop variable `var` by (`row` - `offset`) in every affine
// expression of `body`; false where a term of `var` has a param (its
// product with the offset's params is not affine).
bool substitute(std::vector<Inst> &body, int var, int row, const Affine &offset) {
  for (Inst &i : body) {
    Affine out;
    for (const kir::Term &t : i.index.terms) {
      if (t.loopVar != var) {
        out.terms.push_back(t);
        continue;
      }
      if (t.param >= 0) return false;
      out.terms.push_back(kir::Term{t.coeff, -1, row});
      for (const kir::Term &o : offset.terms) out.terms.push_back({-t.coeff * o.coeff, o.param, -1});
    }
    i.index = normalized(out);
    if (!substitute(i.body, var, row, offset)) return false;
  }
  return true;
}

class Rewriter {
public:
  explicit Rewriter(const kir::Kernel &k) : k_(k), forms_(k), statusWord_(statusWordOf(k)) {}
  std::optional<RowShapedKernel> run();

private:
  // One access to a written buffer inside row loop `loop`: element
  // stride * var + offset + rest (rest: the base and the parallel loop's terms).
  struct Access {
    int buffer = -1, loop = -1;
    int64_t stride = 0;
    Affine offset; // params and constants
    Affine rest;   // terms in the parallel loop
    Affine others; // terms in other loops (reduction loops around the row loop)
    int base = -1;
    bool store = false;
  };
  bool classify(const std::vector<Inst> &body, const Inst *loop, int loopDepth);
  bool collectAccesses(const std::vector<Inst> &body, const Inst *loop);
  void rowOffsets();
  bool promotable(int buffer) const;
  bool inlineRows(const std::vector<Inst> &body, std::vector<Inst> &out, kir::Kernel &k) const;
  void promote(kir::Kernel &k, std::vector<Inst> &rowBody, int buffer) const;

  const kir::Kernel &k_;
  IndexForms forms_;
  int parallelVar_ = -1;
  int rowVar_ = -1;
  int statusWord_;                    // exempt (index_form.h)
  std::set<int> written_;             // buffers stored in the body, the status word aside
  std::vector<const Inst *> rows_;    // row loops, pre-order
  bool nestedRow_ = false;            // a row loop under another loop
  std::vector<Access> accesses_;
  std::map<int, Affine> rowOffset_; // row loop variable -> its offset in the row
};

bool isRow(const std::vector<const Inst *> &rows, int loopVar) {
  for (const Inst *r : rows)
    if (r->loopVar == loopVar) return true;
  return false;
}

// Finds the row loops: the innermost loops around stores.
bool Rewriter::classify(const std::vector<Inst> &body, const Inst *loop, int loopDepth) {
  for (const Inst &i : body) {
    if (i.op == Opcode::VarRead || i.op == Opcode::VarWrite) return false;
    if (i.op == Opcode::Store && i.buffer != statusWord_) {
      if (!loop || containsLoop(loop->body)) return false;
      written_.insert(i.buffer);
      if (!isRow(rows_, loop->loopVar)) rows_.push_back(loop);
      nestedRow_ |= loopDepth > 1;
    }
    if (i.op == Opcode::Loop && !classify(i.body, &i, loopDepth + 1)) return false;
    if (i.op == Opcode::If && !classify(i.body, loop, loopDepth)) return false;
  }
  return true;
}

// Every access to a written buffer is in a row loop, at an element affine
// in the loop's variable with a constant stride.
bool Rewriter::collectAccesses(const std::vector<Inst> &body, const Inst *loop) {
  for (const Inst &i : body) {
    if ((i.op == Opcode::Load || i.op == Opcode::Store) && written_.count(i.buffer)) {
      if (!loop || !isRow(rows_, loop->loopVar)) return false;
      std::optional<IndexForm> f = forms_.ofAccess(i, loop->loopVar);
      if (!f) return false;
      if (f->base >= 0) {
        const std::vector<int> &around = forms_.loopsAround(f->base);
        if (!(around.empty() || (around.size() == 1 && around[0] == parallelVar_))) return false;
      }
      Access a{i.buffer, loop->loopVar, 0, {}, {}, {}, f->base, i.op == Opcode::Store};
      for (const kir::Term &t : f->affine.terms) {
        if (t.loopVar == loop->loopVar) {
          if (t.param >= 0 || a.stride != 0) return false;
          a.stride = t.coeff;
        } else if (t.loopVar == parallelVar_) {
          a.rest.terms.push_back(t);
        } else if (t.loopVar >= 0) {
          a.others.terms.push_back(t);
        } else {
          a.offset.terms.push_back(t);
        }
      }
      if (a.stride == 0) return false;
      accesses_.push_back(std::move(a));
    }
    if (i.op == Opcode::Loop && !collectAccesses(i.body, &i)) return false;
    if (i.op == Opcode::If && !collectAccesses(i.body, loop)) return false;
  }
  return true;
}

// Places each row loop in the row: its offset from the first row loop,
// read off an access to a buffer that an earlier row loop accesses at the
// same element up to params and constants (a row of the CPU's conv
// lowering comes as a left border, an interior and a right border); 0
// where none tells. Any placement computes the same as long as no two
// elements touch one location, which the launch checks (row_to_element.h).
void Rewriter::rowOffsets() {
  auto simple = [](const Access &a) { return a.others.terms.empty(); };
  for (const Inst *row : rows_) {
    Affine offset;
    bool placed = false;
    // Stores say best which element an iteration produces: tried first.
    std::vector<const Access *> mine;
    for (const Access &a : accesses_)
      if (a.loop == row->loopVar && simple(a)) mine.push_back(&a);
    std::stable_partition(mine.begin(), mine.end(), [](const Access *a) { return a->store; });
    for (const Access *candidate : mine) {
      const Access &a = *candidate;
      if (placed) break;
      for (const Access &r : accesses_) {
        if (!rowOffset_.count(r.loop) || r.buffer != a.buffer || !simple(r) ||
            r.stride != a.stride || r.base != a.base || !sameAffine(r.rest, a.rest))
          continue;
        const Affine diff = plus(a.offset, scaled(r.offset, -1));
        if (!diff.terms.empty() && a.stride != 1 && a.stride != -1) continue;
        offset = plus(rowOffset_.at(r.loop), scaled(diff, a.stride)); // diff / stride
        placed = true;
        break;
      }
    }
    rowOffset_[row->loopVar] = offset;
  }
}

// Whether every access to `buffer` is one element per row element: no
// other loop in its index, and the same element once placed.
bool Rewriter::promotable(int buffer) const {
  const Access *first = nullptr;
  Affine element; // offset - stride * row offset: equal for all
  for (const Access &a : accesses_) {
    if (a.buffer != buffer) continue;
    if (!a.others.terms.empty()) return false;
    const Affine at = plus(a.offset, scaled(rowOffset_.at(a.loop), -a.stride));
    if (!first) {
      first = &a;
      element = at;
    } else if (a.stride != first->stride || a.base != first->base ||
               !sameAffine(a.rest, first->rest) || !sameAffine(at, element)) {
      return false;
    }
  }
  return first != nullptr;
}

bool Rewriter::inlineRows(const std::vector<Inst> &body, std::vector<Inst> &out,
                          kir::Kernel &k) const {
  const Inst &reference = *rows_.front();
  for (const Inst &i : body) {
    if (!(i.op == Opcode::Loop && isRow(rows_, i.loopVar))) {
      Inst copy = i;
      copy.body.clear();
      if (!inlineRows(i.body, copy.body, k)) return false;
      out.push_back(std::move(copy));
      continue;
    }
    const auto found = rowOffset_.find(i.loopVar);
    const Affine offset = found == rowOffset_.end() ? Affine{} : found->second;
    std::vector<Inst> inner = i.body;
    if (!substitute(inner, i.loopVar, rowVar_, offset)) return false;
    if (offset.terms.empty() && sameAffine(i.upper, reference.upper)) {
      for (Inst &x : inner) out.push_back(std::move(x));
      continue;
    }
    // A segment of the row: guarded by offset <= row < offset + upper.
    auto emit = [&](Inst inst) {
      inst.result = k.numValues++;
      out.push_back(inst);
      return inst.result;
    };
    Inst at;
    at.op = Opcode::Index;
    at.type = DType::I64;
    at.index = plus(Affine{{kir::Term{1, -1, rowVar_}}}, scaled(offset, -1));
    const int local = emit(at);
    Inst zero;
    zero.op = Opcode::Const;
    zero.type = DType::I64;
    const int z = emit(zero);
    Inst upper = at;
    upper.index = i.upper;
    const int u = emit(upper);
    auto compare = [&](Opcode op, int a, int b) {
      Inst c;
      c.op = op;
      c.type = DType::Bool;
      c.castFrom = DType::I64;
      c.operands = {a, b};
      return emit(c);
    };
    const int inside = compare(Opcode::Ge, local, z), below = compare(Opcode::Lt, local, u);
    Inst both;
    both.op = Opcode::And;
    both.type = DType::Bool;
    both.operands = {inside, below};
    const int cond = emit(both);
    Inst guard;
    guard.op = Opcode::If;
    guard.operands = {cond};
    guard.body = std::move(inner);
    out.push_back(std::move(guard));
  }
  return true;
}

// Whether the first access to `buffer` in `body`, pre-order, is a store at
// the top (so it runs unconditionally).
bool firstAccessIsTopStore(const std::vector<Inst> &body, int buffer) {
  for (const Inst &i : body) {
    if ((i.op == Opcode::Load || i.op == Opcode::Store) && i.buffer == buffer)
      return i.op == Opcode::Store;
    if (touches(i.body, buffer)) return false;
  }
  return false;
}

void replaceAccesses(std::vector<Inst> &body, int buffer, int var) {
  for (Inst &i : body) {
    if ((i.op == Opcode::Load || i.op == Opcode::Store) && i.buffer == buffer) {
      i.op = i.op == Opcode::Load ? Opcode::VarRead : Opcode::VarWrite;
      i.var = var;
      i.buffer = -1;
      i.index = {};
      i.dynIndex = -1;
    }
    replaceAccesses(i.body, buffer, var);
  }
}

// Keeps `buffer`'s element of the row in a variable: loaded first unless
// the first access stores it unconditionally, stored once at the end.
void Rewriter::promote(kir::Kernel &k, std::vector<Inst> &rowBody, int buffer) const {
  const Access *found = nullptr;
  for (const Access &a : accesses_)
    if (a.buffer == buffer && !found) found = &a;
  const Access &ref = *found;
  const Affine element = plus(ref.offset, scaled(rowOffset_.at(ref.loop), -ref.stride));
  const DType type = k.buffers[size_t(buffer)].dtype;
  std::string name = "elem_" + k.buffers[size_t(buffer)].name;
  auto taken = [&](const std::string &n) {
    for (const auto &b : k.buffers)
      if (b.name == n) return true;
    for (const auto &p : k.params)
      if (p == n) return true;
    for (const auto &v : k.vars)
      if (v.name == n) return true;
    return false;
  };
  while (taken(name)) name += "_";
  const int var = int(k.vars.size());
  k.vars.push_back({name, type});

  const bool initialized = firstAccessIsTopStore(rowBody, buffer);
  replaceAccesses(rowBody, buffer, var);
  auto access = [&](Opcode op) {
    Inst i;
    i.op = op;
    i.type = type;
    i.buffer = buffer;
    i.index = plus(plus(Affine{{kir::Term{ref.stride, -1, rowVar_}}}, element), ref.rest);
    i.dynIndex = ref.base;
    return i;
  };
  auto varOp = [&](Opcode op) {
    Inst i;
    i.op = op;
    i.type = type;
    i.var = var;
    return i;
  };
  if (!initialized) {
    Inst load = access(Opcode::Load);
    load.result = k.numValues++;
    Inst write = varOp(Opcode::VarWrite);
    write.operands = {load.result};
    rowBody.insert(rowBody.begin(), {load, write});
  }
  Inst read = varOp(Opcode::VarRead);
  read.result = k.numValues++;
  Inst store = access(Opcode::Store);
  store.operands = {read.result};
  rowBody.push_back(read);
  rowBody.push_back(store);
}

std::optional<RowShapedKernel> Rewriter::run() {
  const Inst *parallel = k_.parallelLoop();
  if (!parallel) return std::nullopt;
  parallelVar_ = parallel->loopVar;
  if (!classify(parallel->body, nullptr, 0) || rows_.empty() || !nestedRow_) return std::nullopt;
  if (!collectAccesses(parallel->body, nullptr)) return std::nullopt;
  rowOffsets();

  RowShapedKernel shaped;
  shaped.kernel = k_;
  kir::Kernel &k = shaped.kernel;
  rowVar_ = k.numLoopVars++;
  shaped.rowUpper = rows_.front()->upper;
  for (const Inst *r : rows_) {
    const auto it = rowOffset_.find(r->loopVar);
    const Affine offset = it == rowOffset_.end() ? Affine{} : it->second;
    if (!offset.terms.empty() || !sameAffine(r->upper, shaped.rowUpper))
      shaped.segments.push_back({offset, r->upper});
  }

  // Pure instructions stay in front; loops, ifs and status stores go into
  // the row loop, in their order.
  std::vector<Inst> prefix, effects;
  for (const Inst &i : parallel->body) {
    const bool effect = i.op == Opcode::Loop || i.op == Opcode::If || i.op == Opcode::Store;
    (effect ? effects : prefix).push_back(i);
  }
  Inst row;
  row.op = Opcode::Loop;
  row.loopVar = rowVar_;
  row.upper = shaped.rowUpper;
  if (!inlineRows(effects, row.body, k)) return std::nullopt;
  for (int buffer : written_)
    if (promotable(buffer)) promote(k, row.body, buffer);
  for (Inst &top : k.body)
    if (top.op == Opcode::Loop && top.loopVar == parallelVar_) {
      top.body = std::move(prefix);
      top.body.push_back(std::move(row));
    }
  // Useful, and checkable per launch, only as a grid level of its own.
  shaped.plan = planGrid(k);
  const GridPlan &plan = shaped.plan;
  if (plan.levels.empty() || plan.levels[0].loops.size() != 1 ||
      plan.levels[0].loops[0].loopVar != rowVar_)
    return std::nullopt;
  return shaped;
}

} // namespace

std::optional<RowShapedKernel> rowPassesToElements(const kir::Kernel &kernel) {
  return Rewriter(kernel).run();
}

bool fitsLaunch(const RowShapedKernel &shaped, const std::vector<int64_t> &params) {
  if (!levelIndependent(shaped.plan, 0, params)) return false;
  const int64_t row = evaluateClamped(shaped.rowUpper, params);
  for (const RowShapedKernel::Segment &s : shaped.segments) {
    const int64_t n = evaluateClamped(s.upper, params);
    if (n <= 0) continue;
    const int64_t at = evaluateClamped(s.offset, params);
    if (at < 0 || at > row || n > row - at) return false;
  }
  return true;
}

} // namespace kiln::codegen::gpu
