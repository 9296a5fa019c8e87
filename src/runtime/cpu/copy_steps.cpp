#include "runtime/cpu/copy_steps.h"

#include "runtime/cpu/steps.h"

#include <algorithm>
#include <cstring>

namespace kiln::cpu {

namespace {

// Copies the box `extent` (same rank as both tensors) from `src` starting at
// `srcOrigin` into `dst` starting at `dstOrigin`. Dims are merged where both
// sides are contiguous; the innermost run is one memcpy.
void copyBox(const Tensor &src, const Shape64 &srcOrigin, Tensor &dst, const Shape64 &dstOrigin,
             const Shape64 &extent, runtime::ThreadPool *pool) {
  const size_t elem = dtypeSize(src.dtype());
  const int rank = static_cast<int>(extent.size());
  if (numelOf(extent) == 0) return;
  const Shape64 ss = stridesOf(src.shape()), ds = stridesOf(dst.shape());
  int64_t srcBase = 0, dstBase = 0;
  for (int i = 0; i < rank; ++i) {
    srcBase += srcOrigin[i] * ss[i];
    dstBase += dstOrigin[i] * ds[i];
  }
  // The innermost run: trailing dims that are whole on both sides.
  int64_t run = 1;
  int d = rank - 1;
  for (; d >= 0; --d) {
    run *= extent[d];
    const bool whole = extent[d] == src.dim(d) && extent[d] == dst.dim(d);
    if (!whole) {
      --d;
      break;
    }
  }
  // Rows: the dims [0, d] (d may be -1: one run).
  Shape64 outer(extent.begin(), extent.begin() + (d + 1));
  const int64_t rows = numelOf(outer);
  const char *s = static_cast<const char *>(src.raw());
  char *t = static_cast<char *>(dst.mutableRaw());
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t so = srcBase, dOff = dstBase, rest = r;
      for (int i = d; i >= 0; --i) {
        const int64_t idx = rest % outer[i];
        rest /= outer[i];
        so += idx * ss[i];
        dOff += idx * ds[i];
      }
      std::memcpy(t + dOff * elem, s + so * elem, static_cast<size_t>(run) * elem);
    }
  };
  const int64_t bytes = rows * run * static_cast<int64_t>(elem);
  if (pool && pool->threads() > 1 && bytes > (1 << 18) && rows > 1)
    pool->parallelFor(rows, body, std::max<int64_t>(1, (1 << 16) / (run * int64_t(elem)) + 1));
  else
    body(0, rows);
}

bool plainTensor(const RtValue &v) { return v.isTensor() && v.tensor.dtype() != DType::String; }

// Calls f with a value of the unsigned integer type of `elem` bytes (1, 2,
// 4 or 8), so element copies compile to typed loads and stores; false for
// other sizes, which the caller copies with memcpy.
template <class F> bool withWordType(size_t elem, F &&f) {
  switch (elem) {
  case 1:
    return f(uint8_t()), true;
  case 2:
    return f(uint16_t()), true;
  case 4:
    return f(uint32_t()), true;
  case 8:
    return f(uint64_t()), true;
  default:
    return false;
  }
}

// Copies `count` elements of `elem` bytes, reading every `stride` elements
// of src (any sign) and writing contiguously.
void gatherRun(char *dst, const char *src, int64_t count, int64_t stride, size_t elem) {
  const bool typed = withWordType(elem, [&](auto zero) {
    using T = decltype(zero);
    for (int64_t k = 0; k < count; ++k)
      std::memcpy(dst + k * int64_t(sizeof(T)), src + k * stride * int64_t(sizeof(T)), sizeof(T));
  });
  if (!typed)
    for (int64_t k = 0; k < count; ++k)
      std::memcpy(dst + k * int64_t(elem), src + k * stride * int64_t(elem), elem);
}

// dst[i] = src[origin + i * step] per dim, any steps (negative too): the
// strided form of Slice, in row-major order of dst. The innermost run is
// one memcpy where the last steps are 1 (x[:, ::2, ::2, :], Swin's patch
// merging: runs of C elements), else a typed strided loop; outer dims
// advance by an odometer, not a division per element (16 ns per element
// before).
void copyStrided(const Tensor &src, const Shape64 &origin, const Shape64 &step, Tensor &dst) {
  const size_t elem = dtypeSize(src.dtype());
  const int rank = static_cast<int>(dst.rank());
  if (dst.numel() == 0) return;
  const Shape64 ss = stridesOf(src.shape());
  // Trailing dims with step 1 form one contiguous run; a dim that is not
  // whole ends the merge (its extent still joins the run).
  int64_t run = 1;
  int d = rank - 1;
  while (d >= 0 && step[d] == 1) {
    run *= dst.dim(d);
    const bool whole = dst.dim(d) == src.dim(d);
    --d;
    if (!whole) break;
  }
  const bool contiguous = run > 1 || d < rank - 1;
  // Without a contiguous run the innermost dim is a strided run itself.
  const int outer = contiguous ? d : rank - 2;
  const int64_t count = contiguous ? run : dst.dim(rank - 1);
  const int64_t innerStride = contiguous ? 1 : step[rank - 1] * ss[rank - 1];
  int64_t base = 0;
  for (int i = 0; i < rank; ++i) base += origin[i] * ss[i];
  const char *s = static_cast<const char *>(src.raw());
  char *t = static_cast<char *>(dst.mutableRaw());
  const int64_t rowBytes = count * int64_t(elem);
  const int64_t rows = dst.numel() / count;
  Shape64 index(size_t(std::max(outer + 1, 0)), 0);
  int64_t off = base;
  for (int64_t r = 0; r < rows; ++r) {
    const char *from = s + off * int64_t(elem);
    if (contiguous)
      std::memcpy(t + r * rowBytes, from, size_t(rowBytes));
    else
      gatherRun(t + r * rowBytes, from, count, innerStride, elem);
    for (int i = outer; i >= 0; --i) {
      off += step[i] * ss[i];
      if (++index[i] < dst.dim(i)) break;
      off -= index[i] * step[i] * ss[i];
      index[i] = 0;
    }
  }
}

// A transpose whose output rows (length `inner`, read from x every
// `innerStride` elements) come in groups that read x contiguously: output
// axis j is x's last axis, so rows r + m * rowStep (m < J, the extent of
// axis j) start at consecutive elements of x. Copied in T x T tiles (T rows
// of a group x T columns), so the T source lines a tile reads stay in L1;
// row by row, every element of a row was a new cache line (K^T in
// attention, NHWC <-> NCHW).
template <class OffsetFn>
void transposeTiles(const char *src, char *dst, size_t elem, int64_t rows, int64_t inner,
                    int64_t innerStride, int64_t J, int64_t rowStep, const OffsetFn &sourceOffset,
                    runtime::ThreadPool *pool) {
  constexpr int64_t T = 16;
  const int64_t blocksJ = (J + T - 1) / T;
  const int64_t groups = rows / (J * rowStep) * rowStep; // (hi, lo) pairs
  auto tile = [&](auto zero, int64_t r0, int64_t m1) {
    using E = decltype(zero);
    const E *x = reinterpret_cast<const E *>(src) + sourceOffset(r0);
    E *y = reinterpret_cast<E *>(dst) + r0 * inner;
    for (int64_t k0 = 0; k0 < inner; k0 += T) {
      const int64_t k1 = std::min(inner, k0 + T);
      for (int64_t m = 0; m < m1; ++m)
        for (int64_t k = k0; k < k1; ++k) y[m * rowStep * inner + k] = x[m + k * innerStride];
    }
  };
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const int64_t g = w / blocksJ, a0 = (w % blocksJ) * T;
      const int64_t hi = g / rowStep, lo = g % rowStep;
      const int64_t r0 = (hi * J + a0) * rowStep + lo, m1 = std::min(T, J - a0);
      if (withWordType(elem, [&](auto zero) { tile(zero, r0, m1); })) continue;
      const int64_t off = sourceOffset(r0);
      for (int64_t m = 0; m < m1; ++m)
        gatherRun(dst + (r0 + m * rowStep) * inner * int64_t(elem), src + (off + m) * int64_t(elem),
                  inner, innerStride, elem);
    }
  };
  const int64_t work = groups * blocksJ;
  if (pool)
    pool->parallelFor(work, body, std::max<int64_t>(1, 256 / std::max<int64_t>(inner, 1)));
  else
    body(0, work);
}

class SliceStep : public CopyStep {
public:
  StepKind kind() const override { return StepKind::Slice; }
  Status run(Frame &frame, ExecContext &ctx) const override {
    for (size_t i = 0; i < in_.size(); ++i)
      if (in_[i] >= 0 && !plainTensor(frame.slots[in_[i]])) return fallback(frame, ctx);
    const Tensor &x = input(frame, 0);
    const int64_t rank = x.rank();
    Shape64 origin(rank, 0), extent = x.shape(), steps(rank, 1);
    const Tensor &starts = input(frame, 1), &ends = input(frame, 2);
    const int64_t n = starts.numel();
    if (ends.numel() != n) return fallback(frame, ctx);
    for (int k : {3, 4})
      if (int(in_.size()) > k && in_[k] >= 0 && input(frame, k).numel() != n)
        return fallback(frame, ctx);
    for (int64_t j = 0; j < n; ++j) {
      int64_t axis = in_.size() > 3 && in_[3] >= 0 ? input(frame, 3).getInt(j) : j;
      int64_t step = in_.size() > 4 && in_[4] >= 0 ? input(frame, 4).getInt(j) : 1;
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank || step == 0) return fallback(frame, ctx);
      // ONNX's clamping: [0, dim] for positive steps; starts to [0, dim-1]
      // and ends to [-1, dim-1] for negative ones.
      const int64_t dim = x.dim(axis);
      auto clampIndex = [&](int64_t v, int64_t lo, int64_t hi) {
        if (v < 0) v = v < -dim ? -1 : v + dim;
        return std::clamp<int64_t>(v, lo, hi);
      };
      const int64_t b = step > 0 ? clampIndex(starts.getInt(j), 0, dim)
                                 : clampIndex(starts.getInt(j), 0, dim - 1);
      const int64_t e = step > 0 ? clampIndex(ends.getInt(j), 0, dim)
                                 : clampIndex(ends.getInt(j), -1, dim - 1);
      origin[axis] = b;
      steps[axis] = step;
      // ceil(span / |step|) without overflow for steps near INT64 limits.
      const int64_t span = step > 0 ? e - b : b - e;
      const uint64_t magnitude = step > 0 ? uint64_t(step) : uint64_t(-(step + 1)) + 1;
      extent[axis] = span > 0 ? int64_t(1 + uint64_t(span - 1) / magnitude) : 0;
    }
    Tensor y = frame.allocate(out_[0], x.dtype(), extent);
    if (std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; }))
      copyBox(x, origin, y, Shape64(rank, 0), extent, ctx.pool);
    else
      copyStrided(x, origin, steps, y);
    frame.slots[out_[0]] = RtValue(std::move(y));
    return Status::success();
  }
};

class ConcatStep : public CopyStep {
public:
  StepKind kind() const override { return StepKind::Concat; }
  Status run(Frame &frame, ExecContext &ctx) const override {
    for (int s : in_)
      if (s < 0 || !plainTensor(frame.slots[s])) return fallback(frame, ctx);
    const Tensor &first = input(frame, 0);
    const int64_t rank = first.rank();
    int64_t axis = axis_;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return fallback(frame, ctx);
    Shape64 shape = first.shape();
    shape[axis] = 0;
    for (size_t i = 0; i < in_.size(); ++i) {
      const Tensor &t = input(frame, static_cast<int>(i));
      if (t.rank() != rank || t.dtype() != first.dtype()) return fallback(frame, ctx);
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && t.dim(d) != first.dim(d)) return fallback(frame, ctx);
      shape[axis] += t.dim(axis);
    }
    Tensor y = frame.allocate(out_[0], first.dtype(), shape);
    Shape64 origin(rank, 0);
    for (size_t i = 0; i < in_.size(); ++i) {
      const Tensor &t = input(frame, static_cast<int>(i));
      copyBox(t, Shape64(rank, 0), y, origin, t.shape(), ctx.pool);
      origin[axis] += t.dim(axis);
    }
    frame.slots[out_[0]] = RtValue(std::move(y));
    return Status::success();
  }
};

class SplitStep : public CopyStep {
public:
  StepKind kind() const override { return StepKind::Split; }
  Status run(Frame &frame, ExecContext &ctx) const override {
    if (!plainTensor(frame.slots[in_[0]])) return fallback(frame, ctx);
    const Tensor &x = input(frame, 0);
    const int64_t rank = x.rank();
    int64_t axis = axis_;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return fallback(frame, ctx);
    const int64_t parts = static_cast<int64_t>(out_.size());
    std::vector<int64_t> sizes;
    if (in_.size() > 1 && in_[1] >= 0) {
      const Tensor &s = input(frame, 1);
      for (int64_t i = 0; i < s.numel(); ++i) sizes.push_back(s.getInt(i));
    } else {
      // Even split; ONNX gives the last part the remainder.
      const int64_t each = (x.dim(axis) + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i)
        sizes.push_back(std::max<int64_t>(0, std::min(each, x.dim(axis) - i * each)));
    }
    int64_t total = 0;
    for (int64_t s : sizes) total += s;
    if (static_cast<int64_t>(sizes.size()) != parts || total != x.dim(axis))
      return fallback(frame, ctx);
    Shape64 origin(rank, 0);
    for (int64_t i = 0; i < parts; ++i) {
      Shape64 shape = x.shape();
      shape[axis] = sizes[i];
      Tensor y = out_[i] >= 0 ? frame.allocate(out_[i], x.dtype(), shape) : Tensor(x.dtype(), shape);
      copyBox(x, origin, y, Shape64(rank, 0), shape, ctx.pool);
      origin[axis] += sizes[i];
      if (out_[i] >= 0) frame.slots[out_[i]] = RtValue(std::move(y));
    }
    return Status::success();
  }
};

class TransposeStep : public CopyStep {
public:
  StepKind kind() const override { return StepKind::Transpose; }
  Status run(Frame &frame, ExecContext &ctx) const override {
    if (!plainTensor(frame.slots[in_[0]])) return fallback(frame, ctx);
    const Tensor &x = input(frame, 0);
    const int64_t rank = x.rank();
    std::vector<int64_t> perm = perm_;
    if (perm.empty())
      for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != rank) return fallback(frame, ctx);
    Shape64 outShape(rank);
    for (int64_t i = 0; i < rank; ++i) {
      if (perm[i] < 0 || perm[i] >= rank) return fallback(frame, ctx);
      outShape[i] = x.dim(perm[i]);
    }
    Tensor y = frame.allocate(out_[0], x.dtype(), outShape);
    const size_t elem = dtypeSize(x.dtype());
    const Shape64 xs = stridesOf(x.shape());
    // The output's innermost run reads from x with stride xs[perm.back()];
    // when that is 1 it is a memcpy.
    const int64_t inner = rank ? outShape[rank - 1] : 1;
    const int64_t innerStride = rank ? xs[perm[rank - 1]] : 1;
    const int64_t rows = inner ? y.numel() / inner : 0;
    const char *s = static_cast<const char *>(x.raw());
    char *t = static_cast<char *>(y.mutableRaw());
    // x's offset of output row r (the output index without its last dim).
    auto sourceOffset = [&](int64_t r) {
      int64_t off = 0;
      for (int64_t i = rank - 2; i >= 0; --i) {
        off += (r % outShape[i]) * xs[perm[i]];
        r /= outShape[i];
      }
      return off;
    };
    const bool parallel = ctx.pool && ctx.pool->threads() > 1 && y.byteSize() > (1 << 18);
    // The output axis that x stores contiguously (x's last axis).
    const int64_t j = rank ? std::find(perm.begin(), perm.end(), rank - 1) - perm.begin() : 0;
    if (innerStride != 1 && j < rank - 1 && rows > 0) {
      transposeTiles(s, t, elem, rows, inner, innerStride, outShape[j],
                     numelOf(Shape64(outShape.begin() + j + 1, outShape.end() - 1)), sourceOffset,
                     parallel ? ctx.pool : nullptr);
    } else {
      auto body = [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          char *dst = t + r * inner * static_cast<int64_t>(elem);
          const char *src = s + sourceOffset(r) * int64_t(elem);
          if (innerStride == 1)
            std::memcpy(dst, src, static_cast<size_t>(inner) * elem);
          else
            gatherRun(dst, src, inner, innerStride, elem);
        }
      };
      if (parallel)
        ctx.pool->parallelFor(rows, body, std::max<int64_t>(1, 4096 / std::max<int64_t>(inner, 1)));
      else
        body(0, rows);
    }
    frame.slots[out_[0]] = RtValue(std::move(y));
    return Status::success();
  }
};

// Resize, mode nearest, asymmetric coordinates, floor rounding, scales
// given for a 4-D input with N and C unscaled and integer H, W factors:
// every output pixel copies x[h / sh][w / sw].
class ResizeNearestStep : public CopyStep {
public:
  StepKind kind() const override { return StepKind::ResizeNearest; }
  Status run(Frame &frame, ExecContext &ctx) const override {
    if (!plainTensor(frame.slots[in_[0]]) || in_.size() < 3 || in_[2] < 0 ||
        (in_.size() > 3 && in_[3] >= 0))
      return fallback(frame, ctx);
    const Tensor &x = input(frame, 0), &scales = input(frame, 2);
    if (x.rank() != 4 || x.dtype() != DType::F32 || scales.numel() != 4)
      return fallback(frame, ctx);
    int64_t factor[4];
    for (int i = 0; i < 4; ++i) {
      const double s = scales.getDouble(i);
      factor[i] = static_cast<int64_t>(s);
      if (static_cast<double>(factor[i]) != s || factor[i] < 1) return fallback(frame, ctx);
    }
    if (factor[0] != 1 || factor[1] != 1) return fallback(frame, ctx);
    const int64_t planes = x.dim(0) * x.dim(1), H = x.dim(2), W = x.dim(3);
    const int64_t sh = factor[2], sw = factor[3], OH = H * sh, OW = W * sw;
    Tensor y = frame.allocate(out_[0], DType::F32, {x.dim(0), x.dim(1), OH, OW});
    const float *src = x.data<float>();
    float *dst = y.data<float>();
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) { // r = plane * H + input row
        const float *in = src + r * W;
        float *o = dst + (r / H) * OH * OW + (r % H) * sh * OW;
        for (int64_t w = 0; w < W; ++w)
          for (int64_t k = 0; k < sw; ++k) o[w * sw + k] = in[w];
        for (int64_t k = 1; k < sh; ++k) std::memcpy(o + k * OW, o, OW * sizeof(float));
      }
    };
    if (ctx.pool && ctx.pool->threads() > 1 && y.byteSize() > (1 << 18))
      ctx.pool->parallelFor(planes * H, body, std::max<int64_t>(1, 4096 / std::max<int64_t>(OW, 1)));
    else
      body(0, planes * H);
    frame.slots[out_[0]] = RtValue(std::move(y));
    return Status::success();
  }
};

} // namespace

void CopyStep::init(std::string label, std::vector<int> in, std::vector<int> out, int64_t axis,
                    std::vector<int64_t> perm, std::unique_ptr<Step> fallback) {
  label_ = std::move(label);
  in_ = std::move(in);
  out_ = std::move(out);
  axis_ = axis;
  perm_ = std::move(perm);
  generalVariant = std::move(fallback);
  deriveSlots();
}

void CopyStep::deriveSlots() {
  reads.clear();
  writes.clear();
  for (int s : in_)
    if (s >= 0) reads.push_back(s);
  for (int s : out_)
    if (s >= 0) writes.push_back(s);
}

Status CopyStep::validate() const {
  const size_t minInputs = kind() == StepKind::Slice ? 3 : 1;
  if (in_.size() < minInputs || out_.empty() || in_[0] < 0 ||
      (kind() == StepKind::Slice && (in_[1] < 0 || in_[2] < 0)))
    return makeError(label_, ": corrupt copy step");
  if (kind() == StepKind::Concat)
    for (int s : in_)
      if (s < 0) return makeError(label_, ": corrupt copy step");
  if (kind() != StepKind::Split && out_[0] < 0) return makeError(label_, ": corrupt copy step");
  return Status::success();
}

Status CopyStep::fallback(Frame &frame, ExecContext &ctx) const {
  return runFallback(generalVariant.get(), frame, ctx, label_,
                     "this form of the op is not supported by the runtime");
}

std::unique_ptr<CopyStep> newCopyStep(StepKind kind) {
  switch (kind) {
  case StepKind::Slice: return std::make_unique<SliceStep>();
  case StepKind::Concat: return std::make_unique<ConcatStep>();
  case StepKind::Split: return std::make_unique<SplitStep>();
  case StepKind::Transpose: return std::make_unique<TransposeStep>();
  case StepKind::ResizeNearest: return std::make_unique<ResizeNearestStep>();
  default: return nullptr;
  }
}

} // namespace kiln::cpu
