#include "codegen/gpu/grid_plan.h"

#include "codegen/gpu/index_form.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

namespace kiln::codegen::gpu {

using kir::Inst;
using kir::Opcode;

int GridPlan::levelOf(int loopVar) const {
  for (size_t d = 0; d < levels.size(); ++d)
    for (const GridLevel::Loop &l : levels[d].loops)
      if (l.loopVar == loopVar) return int(d) + 1;
  return 0;
}

namespace {

// ---- the static plan ---------------------------------------------------------------

// Calls f(inst, enclosing loop variables) for every instruction, pre-order.
template <class F> void walk(const std::vector<Inst> &body, std::vector<int> &loops, F &&f) {
  for (const Inst &i : body) {
    f(i, loops);
    if (i.op == Opcode::Loop) loops.push_back(i.loopVar);
    if (i.op == Opcode::Loop || i.op == Opcode::If) walk(i.body, loops, f);
    if (i.op == Opcode::Loop) loops.pop_back();
  }
}

bool contains(const std::vector<int> &v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

class Planner {
public:
  explicit Planner(const kir::Kernel &k) : k_(k), forms_(k), statusWord_(statusWordOf(k)) {
    std::vector<int> loops;
    walk(k.body, loops, [&](const Inst &i, const std::vector<int> &around) {
      if (i.op == Opcode::VarRead || i.op == Opcode::VarWrite)
        varAccesses_[i.var].push_back(around);
    });
  }

  GridPlan run() {
    GridPlan plan;
    plan.loopUpper.resize(size_t(k_.numLoopVars));
    std::vector<int> loops;
    walk(k_.body, loops, [&](const Inst &i, const std::vector<int> &) {
      if (i.op == Opcode::Loop && i.loopVar >= 0 && i.loopVar < k_.numLoopVars)
        plan.loopUpper[size_t(i.loopVar)] = i.upper;
    });
    const Inst *parallel = k_.parallelLoop();
    const std::vector<Inst> *block = parallel ? &parallel->body : &k_.body;
    std::vector<int> outer;
    if (parallel) outer.push_back(parallel->loopVar);
    while (true) {
      std::vector<const Inst *> loops;
      std::optional<GridLevel> level = planLevel(*block, outer, loops);
      if (!level) break;
      plan.levels.push_back(std::move(*level));
      if (loops.size() != 1) break;
      block = &loops[0]->body;
      outer.push_back(loops[0]->loopVar);
    }
    return plan;
  }

private:
  std::optional<GridLevel> planLevel(const std::vector<Inst> &block, const std::vector<int> &outer,
                                     std::vector<const Inst *> &loops);
  bool privateVars(const Inst &loop) const;

  const kir::Kernel &k_;
  IndexForms forms_;
  std::map<int, std::vector<std::vector<int>>> varAccesses_; // var -> loops around each access
  int statusWord_;                                           // exempt (index_form.h)
};

// Every variable `loop` uses is private to an iteration: used nowhere else,
// and written at the top of the loop's body before anything reads it.
bool Planner::privateVars(const Inst &loop) const {
  std::vector<int> used;
  std::vector<int> loops;
  walk(loop.body, loops, [&](const Inst &i, const std::vector<int> &) {
    if ((i.op == Opcode::VarRead || i.op == Opcode::VarWrite) && !contains(used, i.var))
      used.push_back(i.var);
  });
  for (int var : used) {
    for (const std::vector<int> &around : varAccesses_.at(var))
      if (!contains(around, loop.loopVar)) return false;
    // The first access, pre-order, must be a write at the top of the body
    // (not inside a nested loop or if, which may not run).
    bool ok = false;
    for (const Inst &i : loop.body) {
      if ((i.op == Opcode::VarRead || i.op == Opcode::VarWrite) && i.var == var) {
        ok = i.op == Opcode::VarWrite;
        break;
      }
      bool nested = false;
      if (i.op == Opcode::Loop || i.op == Opcode::If)
        walk(i.body, loops, [&](const Inst &j, const std::vector<int> &) {
          nested |= (j.op == Opcode::VarRead || j.op == Opcode::VarWrite) && j.var == var;
        });
      if (nested) break;
    }
    if (!ok) return false;
  }
  return true;
}

std::optional<GridLevel> Planner::planLevel(const std::vector<Inst> &block,
                                            const std::vector<int> &outer,
                                            std::vector<const Inst *> &loops) {
  GridLevel level;
  // The level's loops: those of the block and of the ifs in it (each
  // invocation evaluates an if's condition alike). Anything else with an
  // effect would run once per invocation: only the status word may.
  std::vector<const Inst *> loads; // outside the loops
  bool ok = true;
  auto scan = [&](const std::vector<Inst> &b, auto &&self) -> void {
    for (const Inst &i : b) {
      if (i.op == Opcode::Loop) {
        loops.push_back(&i);
        level.loops.push_back({i.loopVar, i.upper});
      } else if (i.op == Opcode::If) {
        self(i.body, self);
      } else if (i.op == Opcode::VarWrite || i.op == Opcode::VarRead ||
                 (i.op == Opcode::Store && i.buffer != statusWord_)) {
        ok = false;
      } else if (i.op == Opcode::Load) {
        loads.push_back(&i);
      }
    }
  };
  scan(block, scan);
  if (!ok || loops.empty()) return std::nullopt;
  for (const Inst *l : loops)
    if (!privateVars(*l)) return std::nullopt;

  // The buffers the level writes (the status word aside) and their accesses.
  std::vector<int> writtenBuffers;
  std::vector<int> around;
  for (const Inst *l : loops)
    walk(l->body, around, [&](const Inst &i, const std::vector<int> &) {
      if (i.op != Opcode::Store || contains(writtenBuffers, i.buffer)) return;
      if (i.buffer != statusWord_) writtenBuffers.push_back(i.buffer);
    });
  for (const Inst *load : loads)
    if (contains(writtenBuffers, load->buffer)) return std::nullopt;

  for (int buffer : writtenBuffers) {
    std::vector<GridAccess> accesses;
    bool ok = true, first = true;
    int base = -1;
    kir::Affine fixed;
    for (size_t s = 0; s < loops.size() && ok; ++s) {
      const int var = loops[s]->loopVar;
      walk(loops[s]->body, around, [&](const Inst &i, const std::vector<int> &) {
        if (!ok || (i.op != Opcode::Load && i.op != Opcode::Store) || i.buffer != buffer) return;
        std::optional<IndexForm> f = forms_.ofAccess(i, var);
        if (!f) {
          ok = false;
          return;
        }
        GridAccess a{int(s), i.op == Opcode::Store, {}};
        kir::Affine outerTerms;
        for (const kir::Term &t : f->affine.terms)
          (t.loopVar >= 0 && contains(outer, t.loopVar) ? outerTerms : a.form).terms.push_back(t);
        if (first) {
          base = f->base;
          fixed = outerTerms;
          first = false;
        } else if (f->base != base || !sameAffine(outerTerms, fixed)) {
          ok = false;
          return;
        }
        accesses.push_back(std::move(a));
      });
    }
    if (!ok) return std::nullopt;
    level.written.push_back(std::move(accesses));
  }
  return level;
}

// ---- the run-time choice -------------------------------------------------------------

using I128 = __int128;
constexpr I128 kLimit = I128(std::numeric_limits<int64_t>::max());

// One access for the run's params: iteration j of its loop touches
// [stride * j + lo, stride * j + hi].
struct Span {
  int64_t trips = 0;
  I128 stride = 0, lo = 0, hi = 0;
  I128 fixed = 0; // the params' and constants' part
  std::vector<std::pair<I128, I128>>
      digits; // (coefficient, trips) of the loop terms, by |coefficient|
};

// Whether sum(c_i * v_i) over the digits (0 <= v_i < trips_i) takes each
// value once: each |c| exceeds what the smaller ones span, as in a mixed
// radix number (out[33600 * k + r] for r < 33600).
bool mixedRadix(const std::vector<std::pair<I128, I128>> &digits) {
  I128 span = 0;
  for (const auto &[c, trips] : digits) {
    const I128 magnitude = c < 0 ? -c : c;
    if (trips > 1 && magnitude <= span) return false;
    span += magnitude * (trips - 1);
  }
  return true;
}

std::optional<Span> spanOf(const GridAccess &a, const GridLevel &level, const GridPlan &plan,
                           const std::vector<int64_t> &params) {
  const GridLevel::Loop &loop = level.loops[size_t(a.sibling)];
  Span s;
  s.trips = int64_t(std::clamp<I128>(evaluate(loop.upper, params), 0, kLimit));
  if (s.trips == 0) return std::nullopt; // never runs
  std::map<int, I128> inner;             // loop variable -> its coefficient
  for (const kir::Term &t : a.form.terms) {
    const I128 value = termValue(t, params);
    if (t.loopVar == loop.loopVar) {
      s.stride += value;
    } else if (t.loopVar >= 0) {
      inner[t.loopVar] += value;
    } else {
      s.lo += value;
      s.hi += value;
      s.fixed += value;
    }
  }
  for (const auto &[var, value] : inner) {
    const I128 trips =
        var < int(plan.loopUpper.size()) ? evaluate(plan.loopUpper[size_t(var)], params) : 0;
    if (trips <= 0) return std::nullopt; // inside a loop that never runs
    (value > 0 ? s.hi : s.lo) += value * (trips - 1);
    if (value != 0) s.digits.push_back({value, trips});
  }
  if (s.stride != 0) s.digits.push_back({s.stride, s.trips});
  auto magnitude = [](I128 c) { return c < 0 ? -c : c; };
  std::sort(s.digits.begin(), s.digits.end(), [&](const auto &x, const auto &y) {
    return magnitude(x.first) != magnitude(y.first) ? magnitude(x.first) < magnitude(y.first)
                                                    : x < y;
  });
  return s;
}

I128 floorDiv(I128 a, I128 b) { // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
I128 ceilDiv(I128 a, I128 b) { // b > 0
  return -floorDiv(-a, b);
}

// Whether iteration ja of a and iteration jb != ja of b can touch one element.
bool mayOverlap(const Span &a, const Span &b) {
  const I128 dlo = -(I128(b.trips) - 1), dhi = I128(a.trips) - 1; // d = ja - jb
  // The same lattice of elements, each element once: equal elements mean
  // equal loop variables, so ja == jb.
  if (a.stride != 0 && a.stride == b.stride && a.fixed == b.fixed && a.digits == b.digits &&
      mixedRadix(a.digits))
    return false;
  if (a.stride != b.stride) {
    // Different strides: compare the whole ranges (conservative).
    const I128 aLo = a.lo + std::min<I128>(0, a.stride * (a.trips - 1));
    const I128 aHi = a.hi + std::max<I128>(0, a.stride * (a.trips - 1));
    const I128 bLo = b.lo + std::min<I128>(0, b.stride * (b.trips - 1));
    const I128 bHi = b.hi + std::max<I128>(0, b.stride * (b.trips - 1));
    return aLo <= bHi && bLo <= aHi;
  }
  // Same stride T: overlap iff lo_b - hi_a <= T * d <= hi_b - lo_a for a d != 0.
  const I128 lowT = b.lo - a.hi, highT = b.hi - a.lo;
  I128 from, to;
  if (a.stride == 0) {
    if (lowT > 0 || highT < 0) return false;
    from = dlo;
    to = dhi;
  } else if (a.stride > 0) {
    from = std::max(dlo, ceilDiv(lowT, a.stride));
    to = std::min(dhi, floorDiv(highT, a.stride));
  } else {
    const I128 t = -a.stride;
    from = std::max(dlo, -floorDiv(highT, t));
    to = std::min(dhi, -ceilDiv(lowT, t));
  }
  if (from > to) return false;
  return !(from == 0 && to == 0);
}

bool independent(const GridLevel &level, const GridPlan &plan, const std::vector<int64_t> &params) {
  for (const std::vector<GridAccess> &accesses : level.written) {
    std::vector<std::pair<Span, bool>> spans;
    for (const GridAccess &a : accesses)
      if (auto s = spanOf(a, level, plan, params)) spans.push_back({*s, a.store});
    for (size_t x = 0; x < spans.size(); ++x)
      for (size_t y = x; y < spans.size(); ++y)
        if ((spans[x].second || spans[y].second) && mayOverlap(spans[x].first, spans[y].first))
          return false;
  }
  return true;
}

} // namespace

bool levelIndependent(const GridPlan &plan, size_t level, const std::vector<int64_t> &params) {
  return level < plan.levels.size() && independent(plan.levels[level], plan, params);
}

GridPlan planGrid(const kir::Kernel &kernel) {
  return Planner(kernel).run();
}

GridLaunch chooseGrid(const GridPlan &plan, const std::vector<int64_t> &params, int64_t extent,
                      int64_t maxInvocations) {
  GridLaunch g;
  g.invocations = extent;
  for (const GridLevel &level : plan.levels) {
    I128 widest = 0;
    for (const GridLevel::Loop &l : level.loops)
      widest = std::max(widest, evaluate(l.upper, params));
    if (widest > kLimit || I128(g.invocations) * widest > maxInvocations) break;
    if (!independent(level, plan, params)) break;
    g.sizes.push_back(int64_t(widest));
    g.invocations = int64_t(I128(g.invocations) * widest);
    ++g.depth;
  }
  return g;
}

} // namespace kiln::codegen::gpu
