// PackedLstm: packing and the per-step loop around the packed GEMM and the
// epilogue's vector activations. See rnn.h for the algorithm.
#include "kernels/rnn.h"

#include "kernels/epilogue_impl.h"
#include "runtime/thread_pool.h"

#include <algorithm>
#include <memory>

namespace kiln::kernels {

PackedLstm PackedLstm::pack(int64_t hidden, int64_t input, const float *w, const float *r,
                            const float *wb, const float *rb, GemmIsa isa) {
  PackedLstm p;
  p.hidden_ = hidden;
  p.input_ = input;
  const int64_t gates = 4 * hidden;
  // W is [4H x I] = (W^T)^T: packed as op(B) = W^T with transB.
  p.w_ = PackedB::pack(true, input, gates, w, input, isa);
  p.r_ = PackedB::pack(true, hidden, gates, r, hidden, p.w_.isa());
  p.bias_.assign(size_t(gates), 0.0f);
  for (int64_t j = 0; j < gates; ++j)
    p.bias_[size_t(j)] = (wb ? wb[j] : 0.0f) + (rb ? rb[j] : 0.0f);
  return p;
}

void PackedLstm::run(int64_t seq, int64_t batch, bool batchFirst, bool reverse, const float *x,
                     float *h, float *c, float *y, int64_t yStrideT, int64_t yStrideB,
                     runtime::ThreadPool *pool) const {
  const int64_t H = hidden_, G4 = 4 * H, T = seq, B = batch;
  if (T <= 0 || B <= 0 || H <= 0) return;
  runtime::ThreadPool &tp = pool ? *pool : runtime::ThreadPool::global();
  const detail::EpilogueFn epilogue = detail::epilogueFor(w_.isa());

  // 1. Every step's input projection plus both biases, rows in x's order.
  std::unique_ptr<float[]> g(new float[size_t(T * B * G4)]);
  if (input_ > 0) {
    GemmOptions opts;
    opts.pool = &tp;
    opts.epilogue.push({EpilogueKind::kAddColBias, 0, 0, bias_.data()});
    sgemmPackedB(false, T * B, 1.0f, x, input_, w_, 0.0f, g.get(), G4, opts);
  } else {
    for (int64_t row = 0; row < T * B; ++row) std::copy(bias_.begin(), bias_.end(), &g[row * G4]);
  }

  // 2. The recurrence. G_t's batch rows are ldg apart.
  const int64_t ldg = batchFirst ? T * G4 : G4;
  const EpilogueOp sigmoidOp{EpilogueKind::kSigmoid}, tanhOp{EpilogueKind::kTanh};
  std::unique_ptr<float[]> tanhC(new float[size_t(B * H)]);
  GemmOptions opts;
  opts.pool = &tp;
  for (int64_t step = 0; step < T; ++step) {
    const int64_t t = reverse ? T - 1 - step : step;
    float *gt = g.get() + (batchFirst ? t : t * B) * G4;
    sgemmPackedB(false, B, 1.0f, h, H, r_, 1.0f, gt, ldg, opts);
    epilogue(&sigmoidOp, 1, gt, ldg, 0, 0, B, 3 * H);  // i, o, f
    epilogue(&tanhOp, 1, gt + 3 * H, ldg, 0, 0, B, H); // the cell input
    for (int64_t b = 0; b < B; ++b) {
      const float *gi = gt + b * ldg, *gf = gi + 2 * H, *gc = gi + 3 * H;
      float *cb = c + b * H, *tb = tanhC.get() + b * H;
      for (int64_t j = 0; j < H; ++j) {
        cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
        tb[j] = cb[j];
      }
    }
    epilogue(&tanhOp, 1, tanhC.get(), H, 0, 0, B, H);
    for (int64_t b = 0; b < B; ++b) {
      const float *go = gt + b * ldg + H, *tb = tanhC.get() + b * H;
      float *hb = h + b * H;
      for (int64_t j = 0; j < H; ++j) hb[j] = go[j] * tb[j];
      if (y) std::copy_n(hb, H, y + t * yStrideT + b * yStrideB);
    }
  }
}

} // namespace kiln::kernels
