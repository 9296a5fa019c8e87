#include "runtime/cpu/program.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <unordered_set>

namespace kiln::cpu {

namespace {

// Fault injection: element i of every float output becomes
// x + s_i * (|x| + 1) / 2 with a pseudo-random sign s_i per element (a copy:
// outputs may share their input's buffer). Element-dependent and not
// affine, so no later normalization (a LayerNorm removes any per-row
// x*a + b) can hide it from `kiln verify --bisect`.
void perturb(Frame &frame, const std::vector<int> &slots) {
  for (int slot : slots) {
    if (slot < 0 || !frame.slots[slot].isTensor()) continue;
    const Tensor &t = frame.slots[slot].tensor;
    if (!t.defined() || t.dtype() != DType::F32) continue;
    Tensor copy = t.clone();
    std::span<float> v = copy.span<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
      h ^= h >> 31;
      const float sign = (h >> 7) & 1 ? 1.0f : -1.0f;
      v[i] += sign * 0.5f * (std::fabs(v[i]) + 1.0f);
    }
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

std::string profileReport(const Program &main,
                          const std::unordered_map<const Step *, double> &profile_) {
  std::vector<std::pair<const Step *, double>> order(profile_.begin(), profile_.end());
  std::sort(order.begin(), order.end(), [](auto &a, auto &b) { return a.second > b.second; });
  double total = 0;
  for (const auto &step : main.steps) {
    auto it = profile_.find(step.get());
    if (it != profile_.end()) total += it->second;
  }
  std::string out;
  char line[64];
  for (const auto &[step, ms] : order) {
    std::snprintf(line, sizeof line, "%9.3f ms %5.1f%%  ", ms, total > 0 ? 100 * ms / total : 0.0);
    out += line + step->describe() + "\n";
  }
  return out;
}

} // namespace kiln::cpu
