// Kernel IR -> LLVM IR for CPUs. Each kernel becomes one external function
// with the entry ABI of kernel/kernel_ir.h. Loops are emitted as plain
// scalar loops; a loop's Schedule becomes LLVM loop metadata (vectorize
// width, unroll count) so LLVM's vectorizer does the widening with the
// target's cost model, and transcendental functions are expanded inline
// (emit_math.h) so those loops vectorize too.
#pragma once

#include "codegen/cpu/cpu_target.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace llvm {
class Module;
}

namespace kiln::codegen {

// Adds `kernel` to `module` as the function named kernel.name. The kernel
// must have passed kir::verifyKernel.
Status emitKernel(const kir::Kernel &kernel, const CpuTarget &target, llvm::Module &module);

} // namespace kiln::codegen
