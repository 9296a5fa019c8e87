// The manifest section of a `.kiln` artifact: what the model takes and
// gives (names, dtypes, shapes with symbolic dims kept by name), the target
// it was compiled for (CPU level and the instruction-set features its code
// needs), the generated kernels' symbols, and a summary of the program.
// Written by `kiln compile`, read by the runtime and `kiln inspect`.
#pragma once

#include "artifact/bytes.h"
#include "support/dtype.h"
#include "support/status.h"

#include <span>
#include <string>
#include <vector>

namespace kiln::artifact {

// What wraps a tensor in an input or output that is not a plain tensor.
enum class ContainerKind : uint8_t { Sequence = 1, Optional = 2 };

// An input or output: a tensor, or a sequence or optional of tensors (the
// containers, outermost first: opt<seq<f32[2]>> is {Optional, Sequence},
// with dtype and dims of the tensors inside).
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> dims;          // -1 for a symbolic or unknown dim
  std::vector<std::string> dimNames;  // the symbol of each -1 dim ("" when unknown)
  bool rankKnown = true;              // false: dims is empty, any rank
  std::vector<ContainerKind> containers; // empty for a plain tensor

  bool isTensor() const { return containers.empty(); }
};

struct Manifest {
  std::string kilnVersion;  // of the compiler that wrote it
  std::string modelName;    // the source file's name
  std::string producer;     // of the source model
  std::string target = "cpu";
  std::string cpu;          // --cpu as given: native, x86-64-v4, ...
  std::string llvmCpu;      // the CPU LLVM tuned for
  std::vector<std::string> cpuFeatures; // ISA features the code needs (avx2, avx512f...)
  std::vector<TensorInfo> inputs, outputs;
  std::vector<std::string> kernelSymbols;
  int64_t steps = 0, generatedKernels = 0, microkernelSteps = 0, copySteps = 0, hostSteps = 0;

  std::string serialize() const;
  static Expected<Manifest> parse(std::span<const uint8_t> bytes);
  // Human-readable, for `kiln inspect`.
  std::string describe() const;
};

// "[1,3,batch,?]": fixed dims, symbol names, "?" for unknown; "[*]" for an
// unknown rank.
std::string shapeText(const TensorInfo &t);
// "f32[1,3]", "seq<f32[?]>", "opt<seq<string[*]>>".
std::string typeText(const TensorInfo &t);

// The features of `cpuFeatures` this machine lacks (an unknown name counts
// as lacking).
std::vector<std::string> missingCpuFeatures(const std::vector<std::string> &features);
// The names missingCpuFeatures can check, for the compiler to filter on.
const std::vector<std::string> &checkableCpuFeatures();

} // namespace kiln::artifact
