#include "runtime/cpu/steps.h"

#include <algorithm>

namespace kiln::cpu {

Expected<Shape64> broadcastShapes(const std::vector<Shape64> &shapes) {
  size_t rank = 0;
  for (const Shape64 &s : shapes) rank = std::max(rank, s.size());
  Shape64 out(rank, 1);
  for (const Shape64 &s : shapes)
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[rank - s.size() + i];
      const int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o != 1) {
        std::string all;
        for (const Shape64 &x : shapes) all += (all.empty() ? "" : ", ") + shapeToString(x);
        return makeError("shapes ", all, " do not broadcast");
      }
      o = d;
    }
  return out;
}

ElementwiseStep::ElementwiseStep(std::string label, ElementwiseLaunch launch,
                                 std::vector<int> inputSlots, std::vector<int> outputSlots,
                                 std::vector<DType> outputTypes, std::unique_ptr<Step> fallback)
    : label_(std::move(label)), launch_(std::move(launch)), in_(std::move(inputSlots)),
      out_(std::move(outputSlots)), outTypes_(std::move(outputTypes)) {
  generalVariant = std::move(fallback);
  setSlots();
}

void ElementwiseStep::setSlots() {
  reads = in_;
  writes = out_;
}

// Enough elements per parallel chunk that scheduling costs are noise.
constexpr int64_t kChunkElements = 16384;
// The block of a flat kernel: long enough for the vector loop, short enough
// to split across threads.
constexpr int64_t kFlatBlock = 1024;

void KernelStep::launchRows(ExecContext &ctx, void *const *buffers, const int64_t *params,
                            int64_t outer, int64_t rowElements) const {
  const int64_t grain = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(rowElements, 1));
  KernelEntry fn = entry_;
  if (outer <= grain || !ctx.pool || ctx.pool->threads() == 1) {
    fn(buffers, params, 0, outer);
    return;
  }
  ctx.pool->parallelFor(outer, [&](int64_t b, int64_t e) { fn(buffers, params, b, e); }, grain);
}

Status ElementwiseStep::validate() const {
  for (int s : in_)
    if (s < 0) return makeError(label_, ": corrupt inputs");
  for (int s : out_)
    if (s < 0) return makeError(label_, ": corrupt outputs");
  if (outTypes_.size() != out_.size() || int64_t(out_.size()) != launch_.numOutputs)
    return makeError(label_, ": corrupt outputs");
  return launch_.validate(in_.size());
}

void ElementwiseStep::launch(ExecContext &ctx, const std::vector<void *> &buffers,
                             const std::vector<int64_t> &extents) const {
  const std::vector<int64_t> params = launch_.params(extents);
  int64_t inner = 1;
  for (size_t k = 1; k < extents.size(); ++k) inner *= extents[k];
  launchRows(ctx, buffers.data(), params.data(), extents[0], inner);
}

Status ElementwiseStep::run(Frame &frame, ExecContext &ctx) const {
  std::vector<Shape64> shapes;
  std::vector<void *> buffers;
  for (size_t j = 0; j < in_.size(); ++j) {
    const RtValue &v = frame.slots[in_[j]];
    if (!v.isTensor()) return makeError(label_, ": input ", j, " is ", v.describe());
    shapes.push_back(v.tensor.shape());
    buffers.push_back(const_cast<void *>(v.tensor.raw()));
  }
  auto broadcast = broadcastShapes(shapes);
  if (!broadcast.ok() || !launch_.shapesHold(shapes, *broadcast)) {
    std::string all;
    for (const Shape64 &x : shapes) all += (all.empty() ? "" : ", ") + shapeToString(x);
    return runFallback(generalVariant.get(), frame, ctx, label_,
                       "input shapes " + all + " do not fit the shapes the kernel was compiled for");
  }
  const Shape64 &outShape = *broadcast;
  for (size_t o = 0; o < out_.size(); ++o) {
    Tensor t = frame.allocate(out_[o], outTypes_[o], outShape);
    buffers.push_back(t.mutableRaw());
    frame.slots[out_[o]] = RtValue(std::move(t));
  }
  if (numelOf(outShape) == 0) return Status::success();

  std::vector<int64_t> extents = launch_.loopExtents(outShape);
  if (!launch_.flat()) {
    launch(ctx, buffers, extents);
    return Status::success();
  }
  // A flat space runs as [blocks, block] plus the remainder.
  const int64_t total = extents[0];
  const int64_t blocks = total / kFlatBlock, rest = total % kFlatBlock;
  if (blocks > 0) launch(ctx, buffers, {blocks, kFlatBlock});
  if (rest > 0) {
    std::vector<void *> shifted = buffers;
    const int64_t offset = blocks * kFlatBlock;
    for (size_t j = 0; j < shifted.size(); ++j) {
      const bool isOutput = j >= in_.size();
      if (!isOutput && !launch_.inputIsFull(j)) continue;
      DType t = isOutput ? outTypes_[j - in_.size()]
                         : frame.slots[in_[j]].tensor.dtype();
      shifted[j] = static_cast<char *>(shifted[j]) + offset * static_cast<int64_t>(dtypeSize(t));
    }
    launch(ctx, shifted, {1, rest});
  }
  return Status::success();
}

} // namespace kiln::cpu
