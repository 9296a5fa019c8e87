// kiln.compile: the Python module's bridge to the compiler (package/package.h).
#include "compile.h"

#include "package/package.h"

#include <mutex>

namespace kiln::python {

std::string compileModel(const std::string &modelPath, const std::string &outPath,
                         const CompileOptions &options) {
  package::PackageOptions po;
  po.target = options.target;
  po.cpu = options.cpu;
  po.optLevel = options.optLevel;
  po.dims = options.dims;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  Status s = package::compileFile(modelPath, outPath, po);
  return s.ok() ? std::string() : s.message();
}

} // namespace kiln::python
