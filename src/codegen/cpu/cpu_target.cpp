#include "codegen/cpu/cpu_target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <mutex>

namespace kiln::codegen {

namespace {

void initializeLlvmOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::string hostFeatures() {
  std::string features;
  for (const auto &f : llvm::sys::getHostCPUFeatures()) {
    if (!features.empty()) features += ",";
    features += (f.second ? "+" : "-") + f.first().str();
  }
  return features;
}

bool hasFeature(const std::string &features, const std::string &f) {
  return ("," + features + ",").find(",+" + f + ",") != std::string::npos;
}

} // namespace

bool CpuTarget::runsOnHost() const {
  const std::string host = hostFeatures();
  size_t pos = 0;
  while (pos < features.size()) {
    size_t end = features.find(',', pos);
    if (end == std::string::npos) end = features.size();
    std::string f = features.substr(pos, end - pos);
    if (f.size() > 1 && f[0] == '+' && !hasFeature(host, f.substr(1))) return false;
    pos = end + 1;
  }
  return true;
}

Expected<CpuTarget> cpuTargetFromName(const std::string &name) {
  initializeLlvmOnce();
  CpuTarget t;
  t.name = name;
  t.triple = llvm::sys::getProcessTriple();
  if (name == "native") {
    t.cpu = llvm::sys::getHostCPUName().str();
    t.features = hostFeatures();
  } else if (name == "x86-64-v4") {
    t.cpu = "x86-64-v4";
    t.features = "+avx512f,+avx512vl,+avx512bw,+avx512dq,+avx512cd,+avx2,+fma,+f16c,+bmi,+bmi2,"
                 "+lzcnt,+movbe,+avx,+sse4.2,+sse4.1,+ssse3,+popcnt";
  } else if (name == "x86-64-v3") {
    t.cpu = "x86-64-v3";
    t.features = "+avx2,+fma,+f16c,+bmi,+bmi2,+lzcnt,+movbe,+avx,+sse4.2,+sse4.1,+ssse3,+popcnt";
  } else if (name == "x86-64") {
    t.cpu = "x86-64";
    t.features = "";
  } else {
    return makeError("unknown --cpu '", name, "' (choose native, x86-64-v4, x86-64-v3 or x86-64)");
  }
  if (hasFeature(t.features, "avx512f")) t.vectorBits = 512;
  else if (hasFeature(t.features, "avx")) t.vectorBits = 256;
  else t.vectorBits = 128;
  return t;
}

Expected<std::unique_ptr<llvm::TargetMachine>> createTargetMachine(const CpuTarget &target) {
  initializeLlvmOnce();
  std::string err;
  const llvm::Target *llvmTarget = llvm::TargetRegistry::lookupTarget(target.triple, err);
  if (!llvmTarget) return makeError("no LLVM target for '", target.triple, "': ", err);
  llvm::TargetOptions options;
  // Keep IEEE semantics by default; fast-math flags are set per instruction
  // by the emitter where the Kernel IR allows it (reductions).
  std::unique_ptr<llvm::TargetMachine> tm(llvmTarget->createTargetMachine(
      target.triple, target.cpu, target.features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm) return makeError("cannot create an LLVM target machine for ", target.cpu);
  // 512-bit vectors are worth it in our kernels (no frequency cliff matters
  // more than the halved instruction count on this kind of server CPU).
  return tm;
}

} // namespace kiln::codegen
