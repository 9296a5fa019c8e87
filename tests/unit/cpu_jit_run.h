// Runs one Kernel IR kernel on this CPU (native target, ORC JIT): the
// reference the GPU targets' tests compare their kernels against.
#pragma once

#include "codegen/cpu/compile.h"
#include "codegen/cpu/cpu_target.h"
#include "codegen/cpu/jit.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

#include <cstdint>
#include <vector>

namespace kiln {

// Runs `k` over parallel iterations [begin, end) on `buffers` (one pointer
// per kernel buffer, in the kernel's order).
inline Status runOnCpuJit(const kir::Kernel &k, const std::vector<void *> &buffers,
                          const std::vector<int64_t> &params, int64_t begin, int64_t end) {
  KILN_ASSIGN_OR_RETURN(codegen::CpuTarget target, codegen::cpuTargetFromName("native"));
  KILN_ASSIGN_OR_RETURN(auto object, codegen::compileKernels({k}, target));
  KILN_ASSIGN_OR_RETURN(auto jit, codegen::CpuJit::create());
  KILN_RETURN_IF_ERROR(jit->addObject(object));
  KILN_ASSIGN_OR_RETURN(codegen::KernelEntry fn, jit->lookup(k.name));
  fn(buffers.data(), params.data(), begin, end);
  return Status::success();
}

} // namespace kiln
