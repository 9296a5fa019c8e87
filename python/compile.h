// The compiler half of the Python module: `kiln.compile` calls
// kiln::package::compileFile through this narrow interface. It lives in its
// own file because the compiler's headers (support/status.h) and the runtime
// wrapper (kiln/kiln.hpp) both define a `kiln::Error`, so no translation unit
// may include both.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::python {

struct CompileOptions {
  std::string target = "cpu";
  std::string cpu = "native";
  int optLevel = 3;
  std::vector<std::pair<std::string, int64_t>> dims; // symbolic dims pinned to sizes
};

// Compiles the model at `modelPath` into the artifact `outPath`. Returns ""
// on success, otherwise the compiler's error message. Thread-safe: calls are
// serialized (the compiler's process-wide state is not assumed reentrant).
std::string compileModel(const std::string &modelPath, const std::string &outPath,
                         const CompileOptions &options);

} // namespace kiln::python
