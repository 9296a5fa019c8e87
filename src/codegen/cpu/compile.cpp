#include "codegen/cpu/compile.h"

#include "codegen/cpu/emit_convert.h"
#include "codegen/cpu/emit_llvm.h"

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

namespace kiln::codegen {

namespace {

void optimize(llvm::Module &m, llvm::TargetMachine &tm, int level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = level >= 2;
  tuning.SLPVectorization = level >= 2;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel opt = level <= 0   ? llvm::OptimizationLevel::O0
                                : level == 1 ? llvm::OptimizationLevel::O1
                                : level == 2 ? llvm::OptimizationLevel::O2
                                             : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = level <= 0 ? pb.buildO0DefaultPipeline(opt)
                                           : pb.buildPerModuleDefaultPipeline(opt);
  mpm.run(m, mam);
}

} // namespace

Expected<ObjectCode> compileKernels(const std::vector<kir::Kernel> &kernels,
                                    const CpuTarget &target, const CompileOptions &options) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, createTargetMachine(target));
  llvm::LLVMContext context;
  llvm::Module module("kiln", context);
  module.setTargetTriple(target.triple);
  module.setDataLayout(tm->createDataLayout());

  ObjectCode out;
  for (const kir::Kernel &k : kernels) {
    KILN_RETURN_IF_ERROR(emitKernel(k, target, module));
    out.symbols.push_back(k.name);
  }
  std::string verifyErrors;
  llvm::raw_string_ostream verifyStream(verifyErrors);
  if (llvm::verifyModule(module, &verifyStream))
    return makeError("cpu codegen produced invalid LLVM IR (a kiln bug): ", verifyErrors);

  optimize(module, *tm, options.optLevel);
  lowerHalfToFloatPlaceholders(module);
  if (!options.dumpLlvmIrPath.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream f(options.dumpLlvmIrPath, ec);
    if (ec) return makeError("cannot write '", options.dumpLlvmIrPath, "': ", ec.message());
    module.print(f, nullptr);
  }

  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager codegen;
  if (tm->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    return makeError("LLVM cannot emit object code for ", target.cpu);
  codegen.run(module);
  out.bytes.assign(buffer.begin(), buffer.end());
  return out;
}

} // namespace kiln::codegen
