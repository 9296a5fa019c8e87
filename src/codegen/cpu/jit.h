// Links compiled kernel objects into this process with LLVM's ORC JIT
// (`kiln run --target cpu`). The object comes from compile.h, so the JIT
// runs exactly the code an artifact would carry.
#pragma once

#include "codegen/cpu/compile.h"
#include "support/status.h"

#include <memory>
#include <string>

namespace llvm::orc {
class LLJIT;
}

namespace kiln::codegen {

// The entry ABI of kernel/kernel_ir.h.
using KernelEntry = void (*)(void *const *buffers, const int64_t *params, int64_t begin,
                             int64_t end);

class CpuJit {
public:
  static Expected<std::unique_ptr<CpuJit>> create();
  ~CpuJit();

  // Links the object; its symbols become callable.
  Status addObject(const ObjectCode &object);
  Expected<KernelEntry> lookup(const std::string &symbol);

private:
  CpuJit() = default;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
};

} // namespace kiln::codegen
