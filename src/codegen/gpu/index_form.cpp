#include "codegen/gpu/index_form.h"

#include <algorithm>
#include <map>
#include <utility>

namespace kiln::codegen::gpu {

using kir::Affine;
using kir::Inst;
using kir::Opcode;

Affine normalized(const Affine &a) {
  std::map<std::pair<int, int>, int64_t> sum; // (loopVar, param) -> coeff
  for (const kir::Term &t : a.terms) sum[{t.loopVar, t.param}] += t.coeff;
  Affine out;
  for (const auto &[key, coeff] : sum)
    if (coeff != 0) out.terms.push_back(kir::Term{coeff, key.second, key.first});
  return out;
}

bool sameAffine(const Affine &a, const Affine &b) {
  const Affine x = normalized(a), y = normalized(b);
  if (x.terms.size() != y.terms.size()) return false;
  for (size_t i = 0; i < x.terms.size(); ++i)
    if (x.terms[i].coeff != y.terms[i].coeff || x.terms[i].param != y.terms[i].param ||
        x.terms[i].loopVar != y.terms[i].loopVar)
      return false;
  return true;
}

__int128 termValue(const kir::Term &t, const std::vector<int64_t> &params) {
  if (t.param < 0) return t.coeff;
  return __int128(t.coeff) * (t.param < int(params.size()) ? params[size_t(t.param)] : 0);
}

__int128 evaluate(const Affine &a, const std::vector<int64_t> &params) {
  __int128 sum = 0;
  for (const kir::Term &t : a.terms) sum += termValue(t, params);
  return sum;
}

int64_t evaluateClamped(const Affine &a, const std::vector<int64_t> &params) {
  return int64_t(std::clamp<__int128>(evaluate(a, params), INT64_MIN, INT64_MAX));
}

namespace {

bool loads(const std::vector<kir::Inst> &body, int buffer) {
  for (const kir::Inst &i : body)
    if ((i.op == Opcode::Load && i.buffer == buffer) || loads(i.body, buffer)) return true;
  return false;
}

} // namespace

int statusWordOf(const kir::Kernel &kernel) {
  for (size_t b = 0; b < kernel.buffers.size(); ++b)
    if (kernel.buffers[b].name == "status" && !loads(kernel.body, int(b))) return int(b);
  return -1;
}

namespace {

// a + b, or nullopt when both carry an opaque value.
std::optional<IndexForm> add(const IndexForm &a, const IndexForm &b) {
  if (a.base >= 0 && b.base >= 0) return std::nullopt;
  IndexForm out{a.affine, a.base >= 0 ? a.base : b.base};
  out.affine.terms.insert(out.affine.terms.end(), b.affine.terms.begin(), b.affine.terms.end());
  out.affine = normalized(out.affine);
  return out;
}

// a * c for a constant c; opaque values cannot be scaled.
std::optional<IndexForm> scale(const IndexForm &a, int64_t c) {
  if (a.base >= 0 && c != 1) return std::nullopt;
  IndexForm out = a;
  for (kir::Term &t : out.affine.terms) {
    if (__builtin_mul_overflow(t.coeff, c, &t.coeff)) return std::nullopt;
  }
  out.affine = normalized(out.affine);
  return out;
}

// a * params[p]: each term takes the param, so none may have one already.
std::optional<IndexForm> scaleByParam(const IndexForm &a, int p) {
  if (a.base >= 0) return std::nullopt;
  IndexForm out = a;
  for (kir::Term &t : out.affine.terms) {
    if (t.param >= 0) return std::nullopt;
    t.param = p;
  }
  out.affine = normalized(out.affine);
  return out;
}

// The constant an affine form is, if it is one.
std::optional<int64_t> constantOf(const IndexForm &f) {
  if (f.base >= 0) return std::nullopt;
  int64_t c = 0;
  for (const kir::Term &t : f.affine.terms) {
    if (t.param >= 0 || t.loopVar >= 0) return std::nullopt;
    c += t.coeff;
  }
  return c;
}

// The param an affine form is (exactly 1 * param), if it is one.
std::optional<int> paramOf(const IndexForm &f) {
  if (f.base >= 0 || f.affine.terms.size() != 1) return std::nullopt;
  const kir::Term &t = f.affine.terms[0];
  if (t.coeff != 1 || t.param < 0 || t.loopVar >= 0) return std::nullopt;
  return t.param;
}

} // namespace

IndexForms::IndexForms(const kir::Kernel &kernel)
    : def_(size_t(kernel.numValues), nullptr), enclosingLoops_(size_t(kernel.numValues)) {
  std::vector<int> loops;
  record(kernel.body, loops);
}

void IndexForms::record(const std::vector<Inst> &body, std::vector<int> &loops) {
  for (const Inst &i : body) {
    if (i.result >= 0 && size_t(i.result) < def_.size()) {
      def_[size_t(i.result)] = &i;
      enclosingLoops_[size_t(i.result)] = loops;
    }
    if (i.op == Opcode::Loop) loops.push_back(i.loopVar);
    if (i.op == Opcode::Loop || i.op == Opcode::If) record(i.body, loops);
    if (i.op == Opcode::Loop) loops.pop_back();
  }
}

bool IndexForms::definedInside(int value, int loopVar) const {
  if (value < 0 || size_t(value) >= def_.size()) return false;
  const std::vector<int> &loops = enclosingLoops_[size_t(value)];
  return std::find(loops.begin(), loops.end(), loopVar) != loops.end();
}

const std::vector<int> &IndexForms::loopsAround(int value) const {
  static const std::vector<int> none;
  return value >= 0 && size_t(value) < def_.size() ? enclosingLoops_[size_t(value)] : none;
}

std::optional<IndexForm> IndexForms::ofValue(int value, int loopVar, int depth) const {
  if (value < 0 || size_t(value) >= def_.size() || !def_[size_t(value)]) return std::nullopt;
  if (!definedInside(value, loopVar)) return IndexForm{{}, value};
  const Inst &i = *def_[size_t(value)];
  if (depth > 64 || i.type != DType::I64) return std::nullopt; // no deeper than lowerings go
  switch (i.op) {
  case Opcode::Index:
    return IndexForm{normalized(i.index), -1};
  case Opcode::Const:
    return IndexForm{Affine::constant(i.iimm), -1};
  case Opcode::Add:
  case Opcode::Sub:
  case Opcode::Mul: {
    auto a = ofValue(i.operands[0], loopVar, depth + 1);
    auto b = ofValue(i.operands[1], loopVar, depth + 1);
    if (!a || !b) return std::nullopt;
    if (i.op == Opcode::Add) return add(*a, *b);
    if (i.op == Opcode::Sub) {
      auto negated = scale(*b, -1);
      return negated ? add(*a, *negated) : std::nullopt;
    }
    if (auto c = constantOf(*b)) return scale(*a, *c);
    if (auto c = constantOf(*a)) return scale(*b, *c);
    if (auto p = paramOf(*b)) return scaleByParam(*a, *p);
    if (auto p = paramOf(*a)) return scaleByParam(*b, *p);
    return std::nullopt;
  }
  default:
    return std::nullopt;
  }
}

std::optional<IndexForm> IndexForms::ofAccess(const Inst &access, int loopVar) const {
  IndexForm f{normalized(access.index), -1};
  if (access.dynIndex < 0) return f;
  auto dyn = ofValue(access.dynIndex, loopVar, 0);
  return dyn ? add(f, *dyn) : std::nullopt;
}

} // namespace kiln::codegen::gpu
