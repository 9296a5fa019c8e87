// recognize-softmax: turns a decomposed softmax back into one Softmax op.
//
// Before: a verified, topologically sorted model.
// After:  every
//           e = Exp(x - ReduceMax(x, [a], keepdims=1))   (or e = Exp(x))
//           y = e / ReduceSum(e, [a], keepdims=1)
//         over one constant axis a, whose inner values nothing else reads
//         (e only by the ReduceSum and the Div), is y = Softmax(x) {axis = a}.
//         Without the max subtraction the decomposition is the same function
//         computed less stably; Softmax is the stable form of both. The result
//         keeps its name; the model stays sorted and valid.
//
// Algorithm: one pattern on Div, run by the pattern driver:
//  1. The divisor is ReduceSum(e) over one axis with keepdims, read only here;
//     e is Exp(d), read by exactly the ReduceSum and the Div.
//  2. d is Sub(x, ReduceMax(x)) over the same axis, both read only here, or
//     d is x itself.
//  3. Replace the Div's result with Softmax(x) on that axis.
#include "passes/match.h"
#include "passes/rewrite.h"

namespace kiln {
namespace {

// The single axis of a keepdims reduction of `n`, normalized.
std::optional<int64_t> reducedAxis(const Node &n) {
  std::optional<int64_t> rank = rankOf(n.input(0));
  if (!rank || n.getInt("keepdims") != 1 || !n.input(1)) return std::nullopt;
  std::optional<std::vector<int64_t>> axes = normalizedAxes(n.input(1), *rank);
  if (!axes || axes->size() != 1) return std::nullopt;
  return (*axes)[0];
}

bool recognizeSoftmax(Node &div, Rewriter &rw) {
  Value *e = div.input(0), *sum = div.input(1), *out = div.output(0);
  Node *reduce = producedBy(sum, OpKind::ReduceSum);
  Node *exp = producedBy(e, OpKind::Exp);
  if (!reduce || !exp || reduce->input(0) != e || !rw.hasOneUse(sum) || rw.numUses(e) != 2)
    return false;
  std::optional<int64_t> axis = reducedAxis(*reduce);
  if (!axis || !isFloat(e->type().dtype()) || !rw.canReplace(out)) return false;
  Value *x = exp->input(0);
  Node *sub = producedBy(x, OpKind::Sub);
  Node *max = sub ? producedBy(sub->input(1), OpKind::ReduceMax) : nullptr;
  if (max && max->input(0) == sub->input(0) && rw.hasOneUse(x) && rw.hasOneUse(sub->input(1)) &&
      reducedAxis(*max) == axis)
    x = sub->input(0);
  Node *softmax = rw.create(*div.owner(), OpKind::Softmax, {x}, div.name());
  softmax->setAttr("axis", Attribute::ofInt(*axis));
  softmax->output(0)->setType(out->type());
  return rw.replace(out, softmax->output(0));
}

const PatternSet &recognizeSoftmaxPatterns() {
  static const PatternSet set{"recognize-softmax",
                              {{"softmax-from-div", OpKind::Div, recognizeSoftmax}}};
  return set;
}

} // namespace

std::unique_ptr<Pass> createRecognizeSoftmaxPass() {
  return makePatternPass(recognizeSoftmaxPatterns());
}

} // namespace kiln
