// Scaled dot-product attention, flash-style: O = softmax(scale * Q K^T +
// mask) V for a batch of independent problems (batch x heads), computed by
// tiles of Q rows against blocks of K/V columns with an online softmax
// (running row max and sum, earlier partial results rescaled when the max
// grows), accumulated in f32. The Sq x Sk score matrix never exists: a task
// holds one tile x block of it, in L1.
//
// Operands are in the layouts torch's exports hand to the two MatMuls: Q is
// [Sq, D] and K^T is [D, Sk] (the right-hand side of Q K^T, as stored), V is
// [Sk, Dv], every row contiguous. Each problem b reads its operands at
// per-problem offsets, so broadcast batch dims (a mask shared by the heads,
// a K shared by the batch) cost no copies.
//
// Rows whose scores are all -inf (fully masked) come out NaN, as
// softmax(-inf...) does in the unfused graph; scores that are very negative
// but finite (a mask of float's lowest) give the uniform average of V's
// rows, as there. Sk == 0 gives zeros (an empty sum).
#pragma once

#include "kernels/isa.h"

#include <cstdint>

namespace kiln::runtime {
class ThreadPool;
}

namespace kiln::kernels {

struct AttentionProblem {
  int64_t batches = 0; // independent problems
  int64_t sq = 0, sk = 0, d = 0, dv = 0;
  float scale = 1.0f; // scores = scale * (Q K^T) + mask
  const float *q = nullptr, *kt = nullptr, *v = nullptr;
  // Element offsets of problem b's Q, K^T and V: [batches] each.
  const int64_t *qOffset = nullptr, *ktOffset = nullptr, *vOffset = nullptr;
  // Additive mask, or null. Element (i, j) of problem b is at
  // mask[maskOffset[b] + i * maskRowStride + j * maskColStride]; a stride
  // of 0 broadcasts that axis.
  const float *mask = nullptr;
  const int64_t *maskOffset = nullptr;
  int64_t maskRowStride = 0, maskColStride = 0;
  float *out = nullptr; // [batches, sq, dv], contiguous
};

// Computes the problem on `pool`, split over batches x tiles of Q rows, so
// two threads share the work even at batch 1. Blocks until done.
void attention(const AttentionProblem &p, runtime::ThreadPool &pool, GemmIsa isa = GemmIsa::kAuto);

} // namespace kiln::kernels
