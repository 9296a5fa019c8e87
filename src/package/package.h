// `kiln compile`: an imported model → a `.kiln` artifact (docs/artifact.md).
// The compiler half of the artifact: runs the CPU compiler, links the
// generated kernels into a shared object, and writes the manifest, the
// program (steps, slots, constants), the code and the weights into one
// container (artifact/container.h). Deterministic: the same model and
// options give identical bytes.
#pragma once

#include "artifact/manifest.h"
#include "backend/cpu/compiler.h"
#include "ir/graph.h"
#include "support/status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::package {

struct PackageOptions {
  std::string target = "cpu"; // the only target so far
  std::string cpu = "native";  // codegen::cpuTargetFromName: native, x86-64-v4, x86-64-v3, x86-64
  int optLevel = 3;            // -O0..-O3
  // Symbolic dims pinned to sizes (--dim NAME=VALUE); the others stay symbolic.
  std::vector<std::pair<std::string, int64_t>> dims;
  std::string modelName; // recorded in the manifest (compileFile: the file name)
  // Debugging and verification (cpu::CompileOptions has the details): every
  // intermediate as an extra output, fault injection at one node, dumps.
  bool exposeIntermediates = false;
  std::string perturbNode;
  std::string dumpDir;
  PipelineOptions passOptions;
  bool specializedSteps = true; // cpu::CompileOptions::specializedSteps
};

// The compiler half: pins dims, runs the CPU compiler. The result's model()
// is the optimized graph the artifact computes (its inputs and outputs are
// the manifest's).
Expected<std::unique_ptr<cpu::CompiledModel>> compileForArtifact(Model model,
                                                                  const PackageOptions &options);
// The artifact's bytes for a compiled model.
Expected<std::string> packageCompiled(const cpu::CompiledModel &compiled,
                                      const PackageOptions &options);
// Both: the artifact's bytes.
Expected<std::string> packageModel(Model model, const PackageOptions &options);

// A graph input's or output's entry in the manifest (dtype, dims, symbols).
artifact::TensorInfo tensorInfoOf(const Value &v);

// Imports the ONNX model at `modelPath` and writes its artifact to `outPath`.
Status compileFile(const std::string &modelPath, const std::string &outPath,
                   const PackageOptions &options);

} // namespace kiln::package
