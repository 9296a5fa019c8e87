#include "codegen/cpu/jit.h"

#include "codegen/cpu/cpu_target.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/MemoryBuffer.h>

namespace kiln::codegen {

namespace {

Error fromLlvm(llvm::Error e, const char *what) {
  std::string message = llvm::toString(std::move(e));
  return makeError(what, ": ", message);
}

} // namespace

CpuJit::~CpuJit() = default;

Expected<std::unique_ptr<CpuJit>> CpuJit::create() {
  // Initializes LLVM's native target as a side effect.
  KILN_ASSIGN_OR_RETURN(CpuTarget host, cpuTargetFromName("native"));
  (void)host;
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return fromLlvm(jit.takeError(), "cannot start the LLVM JIT");
  // Generated code may call libm (powf, logf, fmodf): resolve from this process.
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!gen) return fromLlvm(gen.takeError(), "cannot search this process for symbols");
  (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
  std::unique_ptr<CpuJit> out(new CpuJit());
  out->jit_ = std::move(*jit);
  return out;
}

Status CpuJit::addObject(const ObjectCode &object) {
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(object.bytes.data(), object.bytes.size()), "kiln-kernels.o");
  if (llvm::Error e = jit_->addObjectFile(std::move(buffer)))
    return fromLlvm(std::move(e), "cannot link compiled kernels");
  return Status::success();
}

Expected<KernelEntry> CpuJit::lookup(const std::string &symbol) {
  auto addr = jit_->lookup(symbol);
  if (!addr) return fromLlvm(addr.takeError(), "compiled kernel not found");
  return addr->toPtr<KernelEntry>();
}

} // namespace kiln::codegen
