// A loaded artifact and the sessions that run it: the C API's objects
// (kiln.h) in C++. Loading validates the container (checksum, layout), the
// manifest, the CPU features the code needs, loads the code, then the
// program (every step's fields checked, weights viewed in place).
//
// A LoadedModel is immutable after load and shared by its sessions; a
// Session holds one run's mutable state (thread pool, activation arenas).
#pragma once

#include "artifact/container.h"
#include "artifact/manifest.h"
#include "runtime/api/code_module.h"
#include "runtime/cpu/program.h"
#include "runtime/thread_pool.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {

// What failed, for the C API's status codes.
enum class ErrorKind {
  InvalidArgument, Io, Corrupt, Version, UnsupportedCpu, Shape, OutputTooSmall, Runtime,
  UnsupportedValue, // a string, sequence or optional the C API cannot carry
};

struct RtError {
  ErrorKind kind;
  std::string message;
};

template <class T> struct Result {
  std::unique_ptr<T> value;
  std::optional<RtError> error;
};

class LoadedModel {
public:
  // Maps the file read-only (weights are used in place).
  static Result<LoadedModel> openFile(const std::string &path);
  // Copies the bytes.
  static Result<LoadedModel> fromMemory(const void *data, size_t size);
  ~LoadedModel();

  const artifact::Manifest &manifest() const { return manifest_; }
  const cpu::Program &program() const { return *program_; }
  std::string describe() const; // manifest and sections, for `kiln inspect`

private:
  static Result<LoadedModel> load(std::shared_ptr<const void> storage, const uint8_t *data,
                                  size_t size, std::string where);
  std::shared_ptr<const void> storage_; // the mapping or the copy
  artifact::Container container_;
  artifact::Manifest manifest_;
  std::unique_ptr<CodeModule> code_;
  std::unique_ptr<cpu::Program> program_;
};

class Session {
public:
  Session(const LoadedModel &model, int threads);
  const LoadedModel &model() const { return model_; }
  // Inputs in manifest order: a tensor, or a sequence or optional where the
  // model declares one (TensorInfo::containers). Checks kinds, dtypes,
  // ranks, fixed dims and that each symbolic dim has one size across the
  // tensor inputs (a sequence's tensors are checked for dtype and rank).
  // Outputs are what the model declares: tensors, sequences, optionals.
  Expected<std::vector<RtValue>> run(std::vector<RtValue> inputs);
  Expected<std::vector<RtValue>> run(std::vector<Tensor> inputs);
  // Like run(), with errors classified for the C API.
  std::optional<RtError> runChecked(std::vector<RtValue> inputs, std::vector<RtValue> &outputs);

  // Per-step wall times of the runs while profiling is on (`kiln bench
  // --profile`); switching it on clears them.
  void setProfiling(bool on);
  std::string profileReport() const;
  // Activation memory of the current plans (after a run), summed over the
  // program and its branches: the arenas with reuse, and without.
  struct MemoryReport {
    int64_t arenaBytes = 0, naiveBytes = 0;
  };
  MemoryReport memoryReport() const;

private:
  const LoadedModel &model_;
  runtime::ThreadPool pool_;
  std::vector<cpu::ActivationArena> arenas_;
  bool profiling_ = false;
  std::unordered_map<const cpu::Step *, double> profile_;
};

} // namespace kiln::rt
