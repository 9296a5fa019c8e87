// The CPU a compilation is for: an LLVM target triple, a CPU name and its
// feature string, chosen by `--cpu native|x86-64-v3|x86-64-v4`. `native`
// reads the features of the machine doing the compiling; the named levels
// pin them so that an artifact built here runs on any CPU of that level.
#pragma once

#include "support/status.h"

#include <memory>
#include <string>

namespace llvm {
class TargetMachine;
}

namespace kiln::codegen {

struct CpuTarget {
  std::string name;     // what the user asked for: "native", "x86-64-v3", ...
  std::string triple;   // e.g. x86_64-pc-linux-gnu
  std::string cpu;      // LLVM CPU name
  std::string features; // LLVM feature string (+avx2,+fma,...)
  int vectorBits = 128; // widest float vector the target has

  // Vector width in elements of `bytes`-sized lanes, for loop schedules.
  int lanes(int bytes) const { return vectorBits / 8 / bytes; }
  // True when the machine running this process can execute code for it.
  bool runsOnHost() const;
};

// "native", "x86-64-v3" (AVX2+FMA), "x86-64-v4" (AVX-512) or "x86-64"
// (SSE2 baseline); an unknown name is an error listing the choices.
Expected<CpuTarget> cpuTargetFromName(const std::string &name);

// An LLVM TargetMachine for the target (aggressive optimization, PIC so
// the code can be linked into a shared object for artifacts).
Expected<std::unique_ptr<llvm::TargetMachine>> createTargetMachine(const CpuTarget &target);

} // namespace kiln::codegen
