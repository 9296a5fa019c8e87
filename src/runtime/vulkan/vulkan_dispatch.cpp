#include "runtime/vulkan/vulkan_dispatch.h"

#include <cstring>
#include <memory>

namespace kiln::vulkan {

Status runDispatch(Device &device, DeviceTensors &tensors, const cpu::DispatchRecipe &recipe,
                   const std::vector<const Tensor *> &inputs, std::vector<Tensor> &outputs,
                   const std::string &label, const LaunchPlanner &plan,
                   std::vector<PendingStatus> &pending) {
  std::vector<int64_t> values;
  if (Status s = recipe.shapes.run(inputs, values); !s.ok())
    return makeError(label, ": ", s.error().message);

  std::vector<std::shared_ptr<Buffer>> bound;
  auto add = [&](size_t bytes, const void *from) -> Status {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> b, device.allocate(bytes));
    if (from)
      std::memcpy(b->data(), from, bytes);
    else
      std::memset(b->data(), 0, std::max<size_t>(bytes, 1));
    bound.push_back(std::move(b));
    return Status::success();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor *t = inputs[i];
    if (t && t->dtype() == DType::String)
      return makeError(label, ": input ", i,
                       " holds strings, which the vulkan target has no buffers for");
    if (std::shared_ptr<Buffer> b = t ? tensors.find(*t) : nullptr) {
      bound.push_back(std::move(b)); // already on the device
      continue;
    }
    // Copied by the host: never from a buffer a recorded dispatch has yet
    // to write (a view into one; a kiln bug, refused).
    if (t && tensors.pendingWrite(*t))
      return makeError(label, ": input ", i, " is a view into a tensor not yet computed");
    KILN_RETURN_IF_ERROR(t ? add(t->byteSize(), t->raw()) : add(0, nullptr));
  }
  outputs.clear();
  for (size_t o = 0; o < recipe.outputs.size(); ++o) {
    Shape64 shape;
    if (Status st = recipe.outputShape(o, values, shape); !st.ok())
      return makeError(label, ": ", st.error().message);
    // Written in place on the device, read from there by whoever takes it.
    KILN_ASSIGN_OR_RETURN(Tensor t, tensors.allocate(recipe.outputs[o].dtype, shape));
    bound.push_back(tensors.find(t));
    outputs.push_back(std::move(t));
  }
  for (const cpu::DispatchRecipe::Scratch &s : recipe.scratch) {
    const int64_t n = values[size_t(s.numel)];
    if (n < 0) return makeError(label, ": negative scratch size");
    KILN_RETURN_IF_ERROR(add(size_t(n) * dtypeSize(s.dtype), nullptr)); // zero-filled
  }
  if (!recipe.statusMessages.empty()) {
    KILN_RETURN_IF_ERROR(add(sizeof(int64_t), nullptr));
    pending.push_back({bound.back(), &recipe.statusMessages, label});
  }

  std::vector<int64_t> params;
  for (size_t k = 0; k < recipe.launches.size(); ++k) {
    const cpu::DispatchRecipe::Launch &l = recipe.launches[k];
    params.clear();
    for (int p : l.params) params.push_back(values[size_t(p)]);
    // A launch without an extent is one call of a kernel with no parallel
    // loop: one invocation.
    const int64_t extent = l.extent < 0 ? 1 : values[size_t(l.extent)];
    if (extent <= 0) continue;
    auto grid = plan(k, params, extent);
    if (!grid.ok()) return makeError(label, ": ", grid.error().message);
    if (grid->invocations <= 0) continue; // a split loop with no iterations
    params.push_back(0);                             // begin
    params.push_back(l.extent < 0 ? 0 : extent);     // end
    params.insert(params.end(), grid->words.begin(), grid->words.end());
    if (Status s = device.record(*grid->pipeline, bound, params, grid->invocations, label); !s.ok())
      return makeError(label, ": ", s.error().message);
  }
  return Status::success();
}

bool readsInputValues(const cpu::DispatchRecipe &recipe) {
  for (const runtime::ShapeProgram::Inst &i : recipe.shapes.insts)
    if (i.op == runtime::ShapeProgram::Op::Elem || i.op == runtime::ShapeProgram::Op::ElemF)
      return true;
  return false;
}

Status checkStatuses(std::vector<PendingStatus> &pending) {
  std::vector<PendingStatus> words = std::move(pending);
  pending.clear();
  for (const PendingStatus &p : words) {
    int64_t code = 0;
    std::memcpy(&code, p.word->data(), sizeof code);
    if (code != 0)
      return makeError(p.label, ": ",
                       code > 0 && size_t(code) <= p.messages->size()
                           ? (*p.messages)[size_t(code) - 1]
                           : std::string("kernel reported an error"));
  }
  return Status::success();
}

} // namespace kiln::vulkan
