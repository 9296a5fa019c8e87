#include "backend/cpu/program.h"

#include <chrono>
#include <new>
#include <stdexcept>
#include <unordered_set>

namespace kiln::cpu {

void Program::computeLiveness() {
  std::vector<int> lastRead(numSlots, -1);
  for (size_t i = 0; i < steps.size(); ++i)
    for (int s : steps[i]->reads) lastRead[s] = static_cast<int>(i);
  std::unordered_set<int> keep(outputSlots.begin(), outputSlots.end());
  releaseAfter.assign(steps.size(), {});
  for (int s = 0; s < numSlots; ++s)
    if (lastRead[s] >= 0 && !keep.count(s)) releaseAfter[lastRead[s]].push_back(s);

  std::vector<std::pair<int, int>> lifetimes(numSlots, {-1, -1});
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i]->usesArena()) continue;
    for (int s : steps[i]->writes)
      if (!keep.count(s)) lifetimes[s] = {int(i), std::max(int(i), lastRead[s])};
  }
  arena.configure(std::move(lifetimes));
}

Expected<std::vector<RtValue>> Program::run(Frame &frame, ExecContext &ctx) const {
  frame.arena = &arena;
  for (const auto &[slot, value] : constants) frame.slots[slot] = value;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step &step = *steps[i];
    auto t0 = std::chrono::steady_clock::now();
    Status s = Status::success();
    // Allocation failures become errors naming the step, never an escape.
    try {
      s = step.run(frame, ctx);
    } catch (const std::bad_alloc &) {
      s = makeError(step.describe(), ": out of memory");
    } catch (const std::length_error &e) {
      s = makeError(step.describe(), ": ", e.what());
    }
    if (!s.ok()) return s.error();
    if (ctx.profile)
      (*ctx.profile)[&step] +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (int slot : releaseAfter[i]) frame.slots[slot] = RtValue();
  }
  std::vector<RtValue> out;
  out.reserve(outputSlots.size());
  for (int s : outputSlots) out.push_back(frame.slots[s]);
  frame.slots.clear(); // drop every view into the arena before replanning
  arena.endRun();
  return out;
}

} // namespace kiln::cpu
