#include "runtime/cpu/program.h"

#include <chrono>
#include <new>
#include <stdexcept>
#include <unordered_set>

namespace kiln::cpu {

namespace {

// x -> x*1.25 + 0.25 on every float output (a copy: outputs may share
// their input's buffer).
void perturb(Frame &frame, const std::vector<int> &slots) {
  for (int slot : slots) {
    if (slot < 0 || !frame.slots[slot].isTensor()) continue;
    const Tensor &t = frame.slots[slot].tensor;
    if (!t.defined() || t.dtype() != DType::F32) continue;
    Tensor copy = t.clone();
    for (float &x : copy.span<float>()) x = x * 1.25f + 0.25f;
    frame.slots[slot] = RtValue(std::move(copy));
  }
}

} // namespace

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
  this->lifetimes = std::move(lifetimes);
}

Status Program::validate() const {
  auto check = [&](int s, bool allowAbsent) {
    return (allowAbsent && s == -1) || (s >= 0 && s < numSlots);
  };
  if (numSlots < 0 || numSlots > (1 << 24)) return makeError("program ", id, ": bad slot count");
  for (int s : inputSlots)
    if (!check(s, false)) return makeError("program ", id, ": input slot ", s, " out of range");
  for (int s : outputSlots)
    if (!check(s, false)) return makeError("program ", id, ": output slot ", s, " out of range");
  for (const auto &[slot, value] : constants)
    if (!check(slot, false)) return makeError("program ", id, ": constant slot out of range");
  for (const auto &[outer, inner] : captures)
    if (!check(inner, false)) return makeError("program ", id, ": capture slot out of range");
  for (const auto &step : steps) {
    for (int s : step->reads)
      if (!check(s, false)) return makeError(step->describe(), ": slot ", s, " out of range");
    for (int s : step->writes)
      if (!check(s, false)) return makeError(step->describe(), ": slot ", s, " out of range");
  }
  return Status::success();
}

Expected<std::vector<RtValue>> Program::run(Frame &frame, ExecContext &ctx) const {
  ActivationArena &arena = (*ctx.arenas)[id];
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
    if (step.perturbOutputs) perturb(frame, step.writes);
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

namespace kiln::cpu {

std::vector<const Program *> allPrograms(const Program &main) {
  std::vector<const Program *> out = {&main};
  for (size_t i = 0; i < out.size(); ++i)
    for (const auto &step : out[i]->steps)
      for (const Program *sub : step->subPrograms()) out.push_back(sub);
  return out;
}

std::vector<ActivationArena> createArenas(const Program &main) {
  std::vector<const Program *> programs = allPrograms(main);
  std::vector<ActivationArena> arenas(programs.size());
  for (const Program *p : programs) arenas[p->id].configure(p->lifetimes);
  return arenas;
}

} // namespace kiln::cpu
