// fold-constants: evaluates at compile time what depends only on constants.
//
// Before: a verified, topologically sorted model.
// After:  every node that is deterministic, has no regions, is not a
//         Constant, and either
//           - has at least one input and every present input produced by a
//             Constant node (evaluated by the interpreter's kernel), or
//           - is Shape or Size of a value whose type is static (read from
//             the type, the value is never computed), or
//           - has one i64/i32 result of static shape whose elements the
//             shape tracer (ir/infer/shape_value.h) knows, although some
//             inputs are not constant: Shape(x)[1:3] of f32[N,3,48,W] is
//             [3, 48] whatever N and W are
//         is replaced by one Constant per output (outputs keep their names;
//         the node's name goes to the constants) when folding does not grow
//         the model: its results total at most kSmallBytes (16 KiB, so
//         shape subgraphs always fold), or the constant inputs it leaves
//         unused hold at least as many bytes as it creates. A Slice of a big weight
//         that is still used elsewhere would duplicate it: it stays. A node
//         whose kernel fails is left as it is (the error belongs to run
//         time). Constants left unused are erased; the model stays sorted
//         and valid.
//
// Algorithm: three patterns on every op, run to a fixpoint by the pattern
// driver (rewrite.h), which visits nodes in topological order, so a constant
// made for one node is already a Constant when its consumers are visited and
// a Shape -> Gather -> Concat -> Reshape chain folds in one sweep:
//  1. fold-static-shape: Shape/Size of a statically typed value.
//  2. fold-constant-inputs: check the size rule on the static result types
//     (skipping the evaluation when it must fail), evaluate with the
//     interpreter's kernel, check the rule on the real results, replace.
//  3. fold-traced-ints: trace the integer result; fold when every element
//     is known and fits the result's dtype.
#include "interp/interpreter.h"
#include "interp/kernel.h"
#include "ir/infer/shape_value.h"
#include "passes/match.h"
#include "passes/rewrite.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace kiln {
namespace {

// Results up to this size always fold: shape and index computations, small
// per-channel parameters. Not 64 KiB: silero's LSTM gate slices are 128x128
// f32, exactly 64 KiB each, and sixteen of them would add 1 MiB of copies
// of weights that stay in the model.
constexpr size_t kSmallBytes = 16 * 1024;

bool mayFold(const Node &n, Rewriter &rw) {
  if (n.op() == OpKind::Constant || !n.regions().empty() || !isDeterministic(n.op())) return false;
  for (Value *out : n.outputs())
    if (!rw.canReplace(out)) return false;
  return true;
}

// Bytes of the constant inputs no other node or graph output reads.
size_t freedBytes(const Node &n, Rewriter &rw) {
  size_t bytes = 0;
  std::vector<const Value *> seen;
  for (const Value *v : n.inputs()) {
    if (!v || std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
    seen.push_back(v);
    const Tensor *t = constantOf(v);
    long mine = std::count(n.inputs().begin(), n.inputs().end(), v);
    if (t && rw.numUses(v) == mine) bytes += t->byteSize();
  }
  return bytes;
}

bool growsModel(size_t created, size_t freed) {
  return created > kSmallBytes && created > freed;
}

void replaceWithConstants(Node &n, Rewriter &rw, std::vector<Tensor> values) {
  for (int i = 0; i < n.numOutputs(); ++i) {
    Value *c = rw.constant(*n.owner(), std::move(values[i]), n.output(i)->name());
    c->producer()->setName(n.name());
    rw.replace(n.output(i), c);
  }
}

bool foldStaticShape(Node &n, Rewriter &rw) {
  if (n.op() != OpKind::Shape && n.op() != OpKind::Size) return false;
  std::optional<Shape64> dims = n.input(0)->type().shape().staticDims();
  if (!n.input(0)->type().isTensor() || !dims || !mayFold(n, rw)) return false;
  Tensor value;
  if (n.op() == OpKind::Size) {
    value = Tensor::scalar<int64_t>(numelOf(*dims));
  } else {
    const int64_t rank = static_cast<int64_t>(dims->size());
    auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
    int64_t start = clampAxis(n.getInt("start"));
    int64_t end = n.hasAttr("end") ? clampAxis(n.getInt("end")) : rank;
    std::vector<int64_t> slice(dims->begin() + start, dims->begin() + std::max(start, end));
    value = Tensor::fromVector(slice, {static_cast<int64_t>(slice.size())});
  }
  replaceWithConstants(n, rw, {std::move(value)});
  return true;
}

// The bytes of the node's results when their types are static tensors.
std::optional<size_t> staticResultBytes(const Node &n) {
  size_t bytes = 0;
  for (const Value *out : n.outputs()) {
    std::optional<Shape64> dims = out->type().shape().staticDims();
    if (!out->type().isTensor() || !dims) return std::nullopt;
    int64_t numel = numelOf(*dims);
    if (numel == INT64_MAX) return std::nullopt;
    bytes += static_cast<size_t>(numel) * dtypeSize(out->type().dtype());
  }
  return bytes;
}

// The node's outputs computed by its kernel, or nothing when it cannot be
// (no kernel, a kernel error, a non-tensor result).
std::optional<std::vector<Tensor>> evaluate(const Node &n) {
  KernelFn kernel = kernelTable().find(n.op());
  if (!kernel) return std::nullopt;
  std::vector<RtValue> held;
  held.reserve(n.numInputs());
  std::vector<const RtValue *> inputs;
  for (Value *v : n.inputs()) {
    if (!v) {
      inputs.push_back(nullptr);
      continue;
    }
    held.emplace_back(*constantOf(v));
    inputs.push_back(&held.back());
  }
  Interpreter interp;
  InterpOptions options;
  Environment env;
  KernelContext ctx(n, std::move(inputs), interp, options, env);
  try {
    if (!kernel(ctx).ok()) return std::nullopt;
  } catch (const std::exception &) { // oversized or unallocatable results
    return std::nullopt;
  }
  std::vector<Tensor> results;
  for (RtValue &v : ctx.takeOutputs()) {
    if (!v.isTensor() || !v.tensor.defined()) return std::nullopt;
    results.push_back(std::move(v.tensor));
  }
  return results;
}

bool foldConstantInputs(Node &n, Rewriter &rw) {
  bool anyInput = false;
  for (Value *v : n.inputs()) {
    if (!v) continue;
    if (!constantOf(v)) return false;
    anyInput = true;
  }
  if (!anyInput || !mayFold(n, rw)) return false;
  for (Value *out : n.outputs())
    if (!out->type().isTensor()) return false;
  const size_t freed = freedBytes(n, rw);
  if (std::optional<size_t> bytes = staticResultBytes(n); bytes && growsModel(*bytes, freed))
    return false;
  std::optional<std::vector<Tensor>> values = evaluate(n);
  if (!values || static_cast<int>(values->size()) != n.numOutputs()) return false;
  size_t created = 0;
  for (const Tensor &t : *values) created += t.byteSize();
  if (growsModel(created, freed)) return false;
  replaceWithConstants(n, rw, std::move(*values));
  return true;
}

template <class T> bool fits(int64_t v) {
  return v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
}

bool foldTracedInts(Node &n, Rewriter &rw) {
  if (n.numOutputs() != 1 || n.op() == OpKind::Constant) return false;
  const Type &type = n.output(0)->type();
  const DType dtype = type.dtype();
  std::optional<Shape64> shape = type.shape().staticDims();
  if (!type.isTensor() || (dtype != DType::I64 && dtype != DType::I32) || !shape) return false;
  std::optional<std::vector<int64_t>> values = traceKnownInts(n.output(0));
  if (!values || static_cast<int64_t>(values->size()) != numelOf(*shape) || !mayFold(n, rw))
    return false;
  Tensor t(dtype, *shape);
  for (size_t i = 0; i < values->size(); ++i) {
    if (dtype == DType::I32 && !fits<int32_t>((*values)[i])) return false;
    t.setInt(static_cast<int64_t>(i), (*values)[i]);
  }
  replaceWithConstants(n, rw, {std::move(t)});
  return true;
}

const PatternSet &foldConstantsPatterns() {
  static const PatternSet set{"fold-constants",
                              {
                                  {"fold-static-shape", OpKind::NumOps, foldStaticShape},
                                  {"fold-constant-inputs", OpKind::NumOps, foldConstantInputs},
                                  {"fold-traced-ints", OpKind::NumOps, foldTracedInts},
                              }};
  return set;
}

} // namespace

std::unique_ptr<Pass> createFoldConstantsPass() {
  return makePatternPass(foldConstantsPatterns());
}

} // namespace kiln
