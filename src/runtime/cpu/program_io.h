// A CPU program as stored in a `.kiln` artifact: the program section (a
// table of the tensors the program refers to, then the programs: slots,
// constants, steps with their fields, If branches inline) and the weights
// section (every tensor's bytes, 64-byte aligned, so a mapped file is used
// in place).
#pragma once

#include "runtime/cpu/archive.h"
#include "runtime/cpu/program.h"

#include <memory>
#include <span>

namespace kiln::cpu {

struct SavedProgram {
  std::string program; // the program section
  std::string weights; // the weights section
};

// Fails when a step cannot be stored (the message names the step).
Expected<SavedProgram> saveProgram(const Program &main);

// Loads and validates a program. Tensors view `weights` (kept alive by
// `owner`); generated kernels are looked up with `resolve`. Every error says
// what is wrong and where ("program section: at byte 120: ...").
Expected<std::unique_ptr<Program>> loadProgram(std::span<const uint8_t> program,
                                               std::span<const uint8_t> weights,
                                               std::shared_ptr<const void> owner,
                                               const SymbolResolver &resolve);

// Gives every program reachable from `main` its id (allPrograms order).
void numberPrograms(Program &main);

} // namespace kiln::cpu
