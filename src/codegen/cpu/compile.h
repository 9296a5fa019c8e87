// Kernel IR -> optimized native object code for one CPU target. The object
// is what both paths consume: the JIT (jit.h) links it into this process for
// `kiln run`, and the artifact writer (issue 4) packages it, so the code
// that runs is the same either way.
#pragma once

#include "codegen/cpu/cpu_target.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

#include <string>
#include <vector>

namespace kiln::codegen {

struct CompileOptions {
  int optLevel = 3;            // LLVM optimization level 0..3
  std::string dumpLlvmIrPath;  // when set, the optimized LLVM IR is written here
};

struct ObjectCode {
  std::vector<char> bytes; // an ELF relocatable object
  std::vector<std::string> symbols; // one entry point per kernel, in input order
};

// Compiles the kernels into one object (one LLVM module, optimized once).
Expected<ObjectCode> compileKernels(const std::vector<kir::Kernel> &kernels,
                                    const CpuTarget &target, const CompileOptions &options = {});

} // namespace kiln::codegen
