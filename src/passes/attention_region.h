// The region of a Fused(kind = "attention") node, made by recognize-attention
// and read by the backends that run it as one kernel. The region is always
// the same five nodes, whatever form the model wrote them in:
//
//   region(q, kt, v[, mask]):
//     c = Constant(scale)           a one-element f32 tensor of rank 0
//     s = MatMul(q, kt)             q [..., Sq, D], kt [..., D, Sk]
//     t = Mul(s, c)
//     u = Add(t, mask)              only with a mask, which broadcasts into t
//     p = Softmax(u or t) {axis = -1}
//     y = MatMul(p, v)              v [..., Sk, Dv]
//     yield y
//
// so the interpreter runs it as the plain nodes it is, and a kernel needs
// only the scale and whether there is a mask.
#pragma once

#include "ir/graph.h"

#include <optional>

namespace kiln {

inline constexpr const char *kAttentionKind = "attention";

struct AttentionOperands {
  Value *q = nullptr, *kt = nullptr, *v = nullptr;
  Value *mask = nullptr; // optional
  double scale = 1.0;
  // The types of the scores (q kt), of the softmax's input (the masked
  // scores: the mask may broadcast their batch dims wider) and of the
  // result, as the model's values had them.
  Type scores, probs, out;
  // The names of the model's nodes the region's MatMuls and Softmax stand
  // for, kept so that tools that name nodes (verify's divergence search,
  // fault injection) still find them.
  std::string scoresName, softmaxName, outName;
};

// A new Fused attention node in `g` (appended; the caller sorts) reading
// the operands, its output typed `operands.out` and unnamed. Names inside
// the region derive from `name`.
Node *buildAttentionNode(Graph &g, const AttentionOperands &operands, const std::string &name);

// What a kernel needs from a Fused attention node whose region has the form
// above: the scale and whether input 3 is a mask; nullopt for any other node.
struct AttentionForm {
  float scale = 1.0f;
  bool hasMask = false;
};
std::optional<AttentionForm> attentionFormOf(const Node &node);

} // namespace kiln
