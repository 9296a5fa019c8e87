#include "runtime/cpu/attention_step.h"

#include "kernels/attention.h"
#include "runtime/cpu/steps.h"
#include "runtime/thread_pool.h"

namespace kiln::cpu {

namespace {

// The trailing two dims of `t` as [rows, cols] (1 where `t` has fewer) and
// the rest as its batch dims.
struct Split {
  Shape64 batch;
  int64_t rows = 1, cols = 1;
};

Split splitMatrix(const Tensor &t) {
  Split s;
  const int64_t r = t.rank();
  if (r >= 1) s.cols = t.dim(r - 1);
  if (r >= 2) s.rows = t.dim(r - 2);
  if (r > 2) s.batch.assign(t.shape().begin(), t.shape().end() - 2);
  return s;
}

// For every problem (index over the broadcast batch dims `full`), the
// element offset of the matrix of an operand with batch dims `dims` and
// matrices of `matrix` elements; broadcast dims repeat.
std::vector<int64_t> batchOffsets(const Shape64 &full, const Shape64 &dims, int64_t matrix) {
  std::vector<int64_t> offsets(size_t(numelOf(full)));
  for (size_t b = 0; b < offsets.size(); ++b) {
    int64_t index = int64_t(b), offset = 0, stride = matrix;
    for (int64_t d = int64_t(full.size()) - 1; d >= 0; --d) {
      const int64_t i = index % full[d];
      index /= full[d];
      const int64_t k = d - int64_t(full.size() - dims.size());
      if (k < 0) continue;
      if (dims[k] != 1) offset += i * stride;
      stride *= dims[k];
    }
    offsets[b] = offset;
  }
  return offsets;
}

// `t` with each run of its last dim repeated n times: a one-row Q
// [..., 1, D] becomes [..., n, D], a one-column K^T [..., D, 1] becomes
// [..., D, n]. For scores that a wider mask broadcasts (the unfused Add
// grows them), which never happens in the models seen so far: a copy is
// simple and costs nothing elsewhere.
Tensor repeatLastDimRuns(const Tensor &t, int grownAxisFromEnd, int64_t n) {
  Shape64 shape = t.shape();
  shape[shape.size() - size_t(grownAxisFromEnd)] = n;
  Tensor out(DType::F32, shape);
  const int64_t width = t.dim(t.rank() - 1);
  const float *src = t.data<float>();
  float *dst = out.data<float>();
  for (int64_t i = 0; width > 0 && i < t.numel() / width; ++i)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < width; ++j) *dst++ = src[i * width + j];
  return out;
}

} // namespace

Status AttentionStep::prepare() {
  if ((in_.size() != 3 && in_.size() != 4) || out_ < 0) return makeError(label_, ": corrupt slots");
  for (int slot : in_)
    if (slot < 0) return makeError(label_, ": corrupt slots");
  reads = in_;
  writes = {out_};
  return Status::success();
}

Status AttentionStep::run(Frame &frame, ExecContext &ctx) const {
  std::vector<const Tensor *> t;
  for (int slot : in_) {
    const RtValue &v = frame.slots[slot];
    if (!v.isTensor() || v.tensor.dtype() != DType::F32)
      return makeError(label_, ": operands must be f32 tensors, got ", v.describe());
    t.push_back(&v.tensor);
  }
  Tensor q = *t[0], kt = *t[1];
  const Tensor &v = *t[2];
  const Tensor *mask = t.size() > 3 ? t[3] : nullptr;
  if (q.rank() < 2 || kt.rank() < 2 || v.rank() < 2)
    return makeError(label_, ": Q, K^T and V must have rank 2 or more");
  Split sq = splitMatrix(q), sk = splitMatrix(kt);
  const Split sv = splitMatrix(v);
  Split sm;
  if (mask) {
    sm = splitMatrix(*mask);
    if (sm.rows != 1 && sm.rows != sq.rows && sq.rows == 1)
      q = repeatLastDimRuns(q, 2, sm.rows), sq.rows = sm.rows;
    if (sm.cols != 1 && sm.cols != sk.cols && sk.cols == 1)
      kt = repeatLastDimRuns(kt, 1, sm.cols), sk.cols = sm.cols;
    if ((sm.rows != 1 && sm.rows != sq.rows) || (sm.cols != 1 && sm.cols != sk.cols))
      return makeError(label_, ": mask of shape ", shapeToString(mask->shape()),
                       " does not broadcast with scores of ", sq.rows, "x", sk.cols);
  }
  if (sq.cols != sk.rows || sk.cols != sv.rows)
    return makeError(label_, ": shapes ", shapeToString(q.shape()), ", ", shapeToString(kt.shape()),
                     " and ", shapeToString(v.shape()), " do not multiply");
  auto full = broadcastShapes({sq.batch, sk.batch, sv.batch, sm.batch});
  if (!full.ok()) return makeError(label_, ": batch dims: ", full.error().message);
  Shape64 outShape = *full;
  outShape.push_back(sq.rows);
  outShape.push_back(sv.cols);
  Tensor y = frame.allocate(out_, DType::F32, outShape);

  kernels::AttentionProblem p;
  p.batches = numelOf(*full);
  p.sq = sq.rows, p.sk = sk.cols, p.d = sq.cols, p.dv = sv.cols;
  p.scale = scale_;
  const std::vector<int64_t> qOff = batchOffsets(*full, sq.batch, p.sq * p.d);
  const std::vector<int64_t> kOff = batchOffsets(*full, sk.batch, p.d * p.sk);
  const std::vector<int64_t> vOff = batchOffsets(*full, sv.batch, p.sk * p.dv);
  std::vector<int64_t> mOff;
  p.q = q.data<float>(), p.kt = kt.data<float>(), p.v = v.data<float>();
  p.qOffset = qOff.data(), p.ktOffset = kOff.data(), p.vOffset = vOff.data();
  if (mask) {
    mOff = batchOffsets(*full, sm.batch, sm.rows * sm.cols);
    p.mask = mask->data<float>();
    p.maskOffset = mOff.data();
    p.maskRowStride = sm.rows == 1 ? 0 : sm.cols;
    p.maskColStride = sm.cols == 1 ? 0 : 1;
  }
  p.out = y.data<float>();
  kernels::attention(p, ctx.pool ? *ctx.pool : runtime::ThreadPool::global());
  frame.slots[out_] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
