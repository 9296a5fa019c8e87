#include "runtime/cpu/dispatch_step.h"

#include <cstring>

namespace kiln::cpu {

namespace {

bool validValue(int v, const runtime::ShapeProgram &p) {
  return v >= 0 && size_t(v) < p.insts.size();
}

} // namespace

Status DispatchRecipe::outputShape(size_t o, const std::vector<int64_t> &values,
                                   Shape64 &shape) const {
  const Output &spec = outputs[o];
  size_t first = 0;
  if (spec.rank >= 0) {
    const int64_t rank = values[size_t(spec.rank)];
    if (rank < 0 || size_t(rank) > spec.dims.size())
      return makeError("output ", o, " would have rank ", rank, ", above the ", spec.dims.size(),
                       " the kernels handle");
    first = spec.dims.size() - size_t(rank);
  }
  shape.clear();
  for (size_t k = first; k < spec.dims.size(); ++k) {
    const int64_t d = values[size_t(spec.dims[k])];
    if (d < 0) return makeError("output ", o, " would have a negative dim");
    shape.push_back(d);
  }
  return Status::success();
}

Status DispatchRecipe::validate(size_t numInputs) const {
  KILN_RETURN_IF_ERROR(shapes.validate(numInputs));
  for (const Output &o : outputs) {
    if (o.dtype == DType::String || o.dims.size() > 64) return makeError("corrupt output");
    for (int d : o.dims)
      if (!validValue(d, shapes)) return makeError("output dim reads value ", d);
    if (o.rank != -1 && !validValue(o.rank, shapes)) return makeError("corrupt output rank");
  }
  for (const Scratch &s : scratch)
    if (!validValue(s.numel, shapes) || s.dtype == DType::String)
      return makeError("corrupt scratch buffer");
  for (const Launch &l : launches) {
    for (int p : l.params)
      if (!validValue(p, shapes)) return makeError("a launch param reads value ", p);
    if ((l.extent != -1 && !validValue(l.extent, shapes)) ||
        (l.work != -1 && !validValue(l.work, shapes)))
      return makeError("corrupt launch");
  }
  return Status::success();
}

DispatchStep::DispatchStep(std::string label, std::vector<int> in, std::vector<int> out,
                           DispatchRecipe recipe)
    : label_(std::move(label)), in_(std::move(in)), out_(std::move(out)),
      recipe_(std::move(recipe)) {
  (void)prepare();
}

Status DispatchStep::prepare() {
  reads.clear();
  writes.clear();
  for (int s : in_)
    if (s >= 0) reads.push_back(s);
  for (int s : out_)
    if (s >= 0) writes.push_back(s);
  if (out_.size() != recipe_.outputs.size()) return makeError(label_, ": corrupt outputs");
  for (int s : in_)
    if (s < -1) return makeError(label_, ": corrupt inputs");
  for (int s : out_)
    if (s < -1) return makeError(label_, ": corrupt outputs");
  if (Status s = recipe_.validate(in_.size()); !s.ok())
    return makeError(label_, ": ", s.error().message);
  return Status::success();
}

constexpr int64_t kChunkElements = 16384;

void launchParallel(ExecContext &ctx, KernelEntry fn, void *const *buffers, const int64_t *params,
                    int64_t outer, int64_t rowElements) {
  const int64_t grain = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(rowElements, 1));
  if (outer <= grain || !ctx.pool || ctx.pool->threads() == 1) {
    fn(buffers, params, 0, outer);
    return;
  }
  ctx.pool->parallelFor(outer, [&](int64_t b, int64_t e) { fn(buffers, params, b, e); }, grain);
}

// The per-run working lists of DispatchStep::run, kept per thread so a run
// allocates nothing for them once they have grown (a small model runs
// dozens of dispatches per inference, where a heap allocation per list
// would be a visible share). run() never re-enters itself on one thread: it
// calls kernels, not steps.
struct DispatchLists {
  std::vector<const Tensor *> inputs;
  std::vector<void *> buffers;
  std::vector<int64_t> values, params;
  std::vector<Tensor> outputs, scratch;
};

Status DispatchStep::run(Frame &frame, ExecContext &ctx) const {
  thread_local DispatchLists lists;
  // Tensors of the last run are released when this one starts too (an
  // error may have left them).
  lists.outputs.clear();
  lists.scratch.clear();
  std::vector<const Tensor *> &inputs = lists.inputs;
  std::vector<void *> &buffers = lists.buffers;
  inputs.assign(in_.size(), nullptr);
  buffers.clear();
  for (size_t i = 0; i < in_.size(); ++i) {
    if (in_[i] < 0) {
      buffers.push_back(nullptr);
      continue;
    }
    const RtValue &v = frame.slots[in_[i]];
    if (!v.isTensor()) return makeError(label_, ": input ", i, " is ", v.describe());
    inputs[i] = &v.tensor;
    buffers.push_back(const_cast<void *>(v.tensor.raw()));
  }
  std::vector<int64_t> &values = lists.values;
  values.clear();
  if (Status s = recipe_.shapes.run(inputs, values); !s.ok())
    return makeError(label_, ": ", s.error().message);

  std::vector<Tensor> &outputs = lists.outputs;
  for (size_t o = 0; o < out_.size(); ++o) {
    Shape64 shape;
    if (Status st = recipe_.outputShape(o, values, shape); !st.ok())
      return makeError(label_, ": ", st.error().message);
    Tensor t = out_[o] >= 0 ? frame.allocate(out_[o], recipe_.outputs[o].dtype, shape)
                            : Tensor(recipe_.outputs[o].dtype, shape);
    buffers.push_back(t.mutableRaw());
    outputs.push_back(std::move(t));
  }
  std::vector<Tensor> &scratch = lists.scratch;
  for (const DispatchRecipe::Scratch &s : recipe_.scratch) {
    if (values[s.numel] < 0) return makeError(label_, ": negative scratch size");
    Tensor t(s.dtype, {values[s.numel]}); // zero-filled by construction
    buffers.push_back(t.mutableRaw());
    scratch.push_back(std::move(t));
  }
  int64_t status = 0;
  if (!recipe_.statusMessages.empty()) buffers.push_back(&status);

  std::vector<int64_t> &params = lists.params;
  for (size_t k = 0; k < recipe_.launches.size(); ++k) {
    const DispatchRecipe::Launch &l = recipe_.launches[k];
    params.clear();
    for (int p : l.params) params.push_back(values[p]);
    if (l.extent < 0) {
      entries_[k](buffers.data(), params.data(), 0, 0);
      continue;
    }
    const int64_t extent = values[l.extent];
    if (extent <= 0) continue;
    launchParallel(ctx, entries_[k], buffers.data(), params.data(), extent,
                   l.work < 0 ? 1 : values[l.work]);
  }
  if (status != 0) {
    const size_t code = static_cast<size_t>(status);
    return makeError(label_, ": ",
                     code <= recipe_.statusMessages.size() ? recipe_.statusMessages[code - 1]
                                                           : "kernel reported an error");
  }
  for (size_t o = 0; o < out_.size(); ++o)
    if (out_[o] >= 0) frame.slots[out_[o]] = RtValue(std::move(outputs[o]));
  outputs.clear();
  scratch.clear();
  return Status::success();
}

} // namespace kiln::cpu
