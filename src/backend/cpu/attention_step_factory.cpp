// The compiler's side of the attention step: reads the scale and the mask's
// presence off a Fused attention node's region (passes/attention_region.h).
#include "ir/graph.h"
#include "passes/attention_region.h"
#include "runtime/cpu/attention_step.h"

namespace kiln::cpu {

Expected<std::unique_ptr<AttentionStep>>
AttentionStep::create(const Node &node, std::vector<int> inputSlots, int outputSlot) {
  std::optional<AttentionForm> form = attentionFormOf(node);
  if (!form) return Error{"not an attention region of the recognized form"};
  for (const Value *v : node.inputs())
    if (!v || !v->type().isTensor() || v->type().dtype() != DType::F32)
      return Error{"attention operands must be f32"};
  auto s = std::make_unique<AttentionStep>();
  s->label_ = "attention " + node.describe();
  s->in_ = std::move(inputSlots);
  s->out_ = outputSlot;
  s->scale_ = form->scale;
  KILN_RETURN_IF_ERROR(s->prepare());
  return s;
}

} // namespace kiln::cpu
