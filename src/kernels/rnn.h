// The LSTM layer (ONNX LSTM with its default activations: sigmoid for the
// gates, tanh for the cell input and output; no peepholes, no clip) on the
// packed GEMM: the kernel behind the CPU backend's LSTM step.
//
// Per direction:
//  1. G[T*B x 4H] = X[T*B x I] * W^T + (Wb + Rb): the input projections of
//     every step in one GEMM (W^T packed once), the biases in its epilogue.
//  2. For each step t (backwards for the reverse direction):
//       G_t[B x 4H] += H[B x H] * R^T            (R^T packed once)
//       i, o, f = sigmoid(G_t gates), c = tanh(G_t cell input)
//       C = f * C + i * c,  H = o * tanh(C)
//     The activations are the epilogue's vector sigmoid and tanh (relative
//     error ~2e-7, see epilogue.h) over whole gate rows.
// Gate order in W, R and the biases is ONNX's: i, o, f, c.
//
// Threads: the GEMMs split over the pool when they are big enough; the
// step-to-step recurrence is serial by nature.
#pragma once

#include "kernels/gemm.h"
#include "kernels/isa.h"

#include <cstdint>
#include <vector>

namespace kiln::runtime {
class ThreadPool;
}

namespace kiln::kernels {

// One direction's weights, packed. Immutable after pack(); move-only.
class PackedLstm {
public:
  PackedLstm() = default;
  // w: [4*hidden][input], r: [4*hidden][hidden] (ONNX's W and R of one
  // direction); wb, rb: 4*hidden values each, or null for zeros. Copied.
  static PackedLstm pack(int64_t hidden, int64_t input, const float *w, const float *r,
                         const float *wb, const float *rb, GemmIsa isa = GemmIsa::kAuto);
  int64_t hidden() const { return hidden_; }
  int64_t input() const { return input_; }

  // Runs the direction over a sequence.
  //  x:  the input, [seq][batch][input], or [batch][seq][input] when
  //      batchFirst (ONNX layout 1).
  //  h, c: [B][hidden] each: the initial state in, the final state out.
  //  y:  null, or where H of step t, batch row b goes: y + t * yStrideT +
  //      b * yStrideB (hidden floats).
  // reverse walks t from seq - 1 down to 0. pool: null means
  // runtime::ThreadPool::global(). Blocks until done.
  void run(int64_t seq, int64_t batch, bool batchFirst, bool reverse, const float *x, float *h,
           float *c, float *y, int64_t yStrideT, int64_t yStrideB, runtime::ThreadPool *pool) const;

private:
  int64_t hidden_ = 0, input_ = 0;
  PackedB w_;               // W^T: input x 4*hidden
  PackedB r_;               // R^T: hidden x 4*hidden
  std::vector<float> bias_; // Wb + Rb: 4*hidden
};

} // namespace kiln::kernels
