#include "runtime/cpu/lstm_step.h"

#include <algorithm>

namespace kiln::cpu {

namespace {


const Tensor *tensorIn(const Frame &frame, const std::vector<int> &slots, int i) {
  if (i >= static_cast<int>(slots.size()) || slots[i] < 0) return nullptr;
  const RtValue &v = frame.slots[slots[i]];
  return v.isTensor() ? &v.tensor : nullptr;
}

} // namespace

Status LstmStep::prepare() {
  if (in_.size() != kP + 1 || out_.size() != 3 || (dirs_ != 1 && dirs_ != 2) || in_[kX] < 0 ||
      in_[kW] < 0 || in_[kR] < 0)
    return makeError(label_, ": corrupt LSTM step");
  packed_.clear();
  if (w_.defined()) {
    if (!r_.defined() || (in_[kB] >= 0) != b_.defined())
      return makeError(label_, ": corrupt LSTM weights");
    KILN_ASSIGN_OR_RETURN(packed_, pack(w_, r_, b_.defined() ? &b_ : nullptr));
  }
  reads.clear();
  writes.clear();
  for (int i : {kX, kW, kR, kB, kInitialH, kInitialC}) {
    if (in_[i] < 0 || (!packed_.empty() && i >= kW && i <= kB)) continue;
    reads.push_back(in_[i]);
  }
  for (int slot : out_)
    if (slot >= 0) writes.push_back(slot);
  return Status::success();
}

Expected<std::vector<kernels::PackedLstm>> LstmStep::pack(const Tensor &w, const Tensor &r,
                                                          const Tensor *b) const {
  for (const Tensor *t : {&w, &r, b})
    if (t && t->dtype() != DType::F32) return makeError(label_, ": weights must be f32");
  if (w.rank() != 3 || r.rank() != 3 || w.dim(0) != dirs_ || r.dim(0) != dirs_)
    return makeError(label_, ": W ", shapeToString(w.shape()), " and R ", shapeToString(r.shape()),
                     " do not match ", dirs_, " direction(s)");
  const int64_t H = r.dim(2), I = w.dim(2);
  if ((hidden_ >= 0 && H != hidden_) || H <= 0 || w.dim(1) != 4 * H || r.dim(1) != 4 * H)
    return makeError(label_, ": W ", shapeToString(w.shape()), " and R ", shapeToString(r.shape()),
                     " do not match hidden size ", H);
  if (b && b->shape() != Shape64{dirs_, 8 * H})
    return makeError(label_, ": B has shape ", shapeToString(b->shape()), ", expected [", dirs_,
                     ",", 8 * H, "]");
  std::vector<kernels::PackedLstm> out;
  for (int64_t d = 0; d < dirs_; ++d) {
    const float *bd = b ? b->data<float>() + d * 8 * H : nullptr;
    out.push_back(kernels::PackedLstm::pack(H, I, w.data<float>() + d * 4 * H * I,
                                            r.data<float>() + d * 4 * H * H, bd,
                                            bd ? bd + 4 * H : nullptr));
  }
  return out;
}

Status LstmStep::run(Frame &frame, ExecContext &ctx) const {
  const Tensor *xp = tensorIn(frame, in_, kX);
  if (!xp || xp->dtype() != DType::F32 || xp->rank() != 3)
    return makeError(label_, ": X must be a rank-3 f32 tensor");
  const Tensor &x = *xp;
  std::vector<kernels::PackedLstm> local;
  const std::vector<kernels::PackedLstm> *packs = &packed_;
  if (packed_.empty()) {
    const Tensor *w = tensorIn(frame, in_, kW), *r = tensorIn(frame, in_, kR);
    const Tensor *b = tensorIn(frame, in_, kB);
    if (!w || !r || (in_[kB] >= 0 && !b)) return makeError(label_, ": W, R and B must be tensors");
    KILN_ASSIGN_OR_RETURN(local, pack(*w, *r, b));
    packs = &local;
  }
  const int64_t T = batchFirst_ ? x.dim(1) : x.dim(0), B = batchFirst_ ? x.dim(0) : x.dim(1);
  const int64_t H = packs->front().hidden(), D = dirs_;
  if (x.dim(2) != packs->front().input())
    return makeError(label_, ": X has shape ", shapeToString(x.shape()), ", expected ",
                     packs->front().input(), " inputs");
  const Shape64 stateShape = batchFirst_ ? Shape64{B, D, H} : Shape64{D, B, H};
  // The state of (direction d, batch row b) in initial_h / Y_h.
  auto ioAt = [&](int64_t d, int64_t b) { return (batchFirst_ ? b * D + d : d * B + b) * H; };

  // h and c as [dirs][batch][hidden].
  std::vector<float> h(size_t(D * B * H), 0.0f), c(h.size(), 0.0f);
  for (auto [slot, state] : {std::pair{kInitialH, &h}, std::pair{kInitialC, &c}}) {
    if (in_[slot] < 0) continue;
    const Tensor *t = tensorIn(frame, in_, slot);
    if (!t || t->dtype() != DType::F32 || t->shape() != stateShape)
      return makeError(label_, ": initial state must be f32", shapeToString(stateShape));
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(t->data<float>() + ioAt(d, b), H, state->data() + (d * B + b) * H);
  }

  Tensor y;
  if (out_[0] >= 0) y = Tensor(DType::F32, batchFirst_ ? Shape64{B, T, D, H} : Shape64{T, D, B, H});
  if (T == 0) { // no step: the last state of an empty sequence is zeros
    std::fill(h.begin(), h.end(), 0.0f);
    std::fill(c.begin(), c.end(), 0.0f);
  }
  for (int64_t d = 0; d < D && T > 0; ++d) {
    float *yd = nullptr;
    int64_t strideT = 0, strideB = 0;
    if (y.defined()) {
      yd = y.data<float>() + (batchFirst_ ? d * H : d * B * H);
      strideT = D * H * (batchFirst_ ? 1 : B);
      strideB = batchFirst_ ? T * D * H : H;
    }
    (*packs)[size_t(d)].run(T, B, batchFirst_, reverseOnly_ || d == 1, x.data<float>(),
                            h.data() + d * B * H, c.data() + d * B * H, yd, strideT, strideB,
                            ctx.pool);
  }

  auto stateOut = [&](const std::vector<float> &state) {
    Tensor t(DType::F32, stateShape);
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(state.data() + (d * B + b) * H, H, t.data<float>() + ioAt(d, b));
    return t;
  };
  if (out_[0] >= 0) frame.slots[out_[0]] = RtValue(std::move(y));
  if (out_[1] >= 0) frame.slots[out_[1]] = RtValue(stateOut(h));
  if (out_[2] >= 0) frame.slots[out_[2]] = RtValue(stateOut(c));
  return Status::success();
}

} // namespace kiln::cpu
