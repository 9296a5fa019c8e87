#include "codegen/vulkan/loop_count.h"

#include "codegen/gpu/index_form.h"

#include <algorithm>
#include <limits>

namespace kiln::codegen {

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t saturatingAdd(int64_t a, int64_t b) {
  return a > kMax - b ? kMax : a + b;
}
int64_t saturatingMul(int64_t a, int64_t b) {
  return a != 0 && b > kMax / a ? kMax : a * b;
}

struct Counter {
  const std::vector<int64_t> &params;
  const gpu::GridPlan &plan;
  int depth;
  int64_t iterations(const std::vector<kir::Inst> &body) const;
};

int64_t Counter::iterations(const std::vector<kir::Inst> &body) const {
  int64_t total = 0;
  for (const kir::Inst &i : body) {
    if (i.op == kir::Opcode::If) {
      total = saturatingAdd(total, iterations(i.body));
    } else if (i.op == kir::Opcode::Loop) {
      const int64_t inner = iterations(i.body);
      const int level = plan.levelOf(i.loopVar);
      if (i.schedule.kind == kir::Schedule::Kind::Parallel) {
        total = saturatingAdd(total, inner); // an if in the shader, not a loop
      } else if (level > 0 && level <= depth) {
        total = saturatingAdd(total, saturatingAdd(1, inner)); // one iteration
      } else {
        const int64_t trips = std::max<int64_t>(0, gpu::evaluateClamped(i.upper, params));
        total = saturatingAdd(total, saturatingMul(trips, saturatingAdd(1, inner)));
      }
    }
  }
  return total;
}

} // namespace

int64_t loopIterationsPerInvocation(const kir::Kernel &kernel, const std::vector<int64_t> &params,
                                    const gpu::GridPlan &plan, int depth) {
  return Counter{params, plan, depth}.iterations(kernel.body);
}

} // namespace kiln::codegen
