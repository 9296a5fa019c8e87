// The pass registry and the pipeline driver.
#include "passes/pass.h"

#include "ir/printer.h"
#include "ir/verifier.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace kiln {

std::unique_ptr<Pass> createDecomposePass();
std::unique_ptr<Pass> createDcePass();
std::unique_ptr<Pass> createCsePass();
std::unique_ptr<Pass> createFoldConstantsPass();
std::unique_ptr<Pass> createCanonicalizePass();
std::unique_ptr<Pass> createFuseBatchnormPass();
std::unique_ptr<Pass> createRecognizeLayerNormPass();
std::unique_ptr<Pass> createRecognizeGeluPass();
std::unique_ptr<Pass> createRecognizeHardSwishPass();
std::unique_ptr<Pass> createRecognizeSoftmaxPass();
std::unique_ptr<Pass> createRecognizeAttentionPass();
std::unique_ptr<Pass> createFuseEpiloguesPass();
std::unique_ptr<Pass> createFuseElementwisePass();
std::unique_ptr<Pass> createLegalizePrecisionPass();

namespace {

using PassFactory = std::unique_ptr<Pass> (*)();

// Every pass, once. The name comes from the pass itself, so it cannot drift.
const std::vector<PassFactory> &registry() {
  static const std::vector<PassFactory> factories = {
      createDecomposePass,
      createCanonicalizePass,
      createFoldConstantsPass,
      createCsePass,
      createDcePass,
      createFuseBatchnormPass,
      createRecognizeLayerNormPass,
      createRecognizeGeluPass,
      createRecognizeHardSwishPass,
      createRecognizeSoftmaxPass,
      createRecognizeAttentionPass,
      createFuseEpiloguesPass,
      createFuseElementwisePass,
      createLegalizePrecisionPass,
  };
  return factories;
}

std::string joinedPassNames() {
  std::string s;
  for (const std::string &n : allPassNames()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

Status dump(const Model &model, const std::string &dir, int index, std::string_view pass) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return makeError("cannot create dump directory '", dir, "': ", ec.message());
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02d-", index);
  std::filesystem::path path = std::filesystem::path(dir) / (prefix + std::string(pass) + ".kir");
  std::ofstream f(path);
  f << printModel(model);
  if (!f) return makeError("cannot write dump file '", path.string(), "'");
  return Status::success();
}

} // namespace

std::unique_ptr<Pass> findPass(std::string_view name) {
  for (PassFactory make : registry()) {
    std::unique_ptr<Pass> p = make();
    if (p->name() == name) return p;
  }
  return nullptr;
}

std::vector<std::string> allPassNames() {
  std::vector<std::string> names;
  for (PassFactory make : registry()) names.emplace_back(make()->name());
  return names;
}

Status runPipeline(Model &model, const std::vector<std::string> &names,
                   const PipelineOptions &options) {
  std::vector<std::unique_ptr<Pass>> passes;
  for (const std::string &name : names) {
    passes.push_back(findPass(name));
    if (!passes.back())
      return makeError("unknown pass '", name, "' (available: ", joinedPassNames(), ")");
  }
  const bool printAll = options.printAfter.count("all") != 0;
  for (size_t i = 0; i < passes.size(); ++i) {
    Pass &pass = *passes[i];
    Expected<bool> changed = pass.run(model);
    if (!changed.ok()) return makeError("pass '", pass.name(), "': ", changed.error().message);
    if (Status s = verifyModel(model); !s.ok())
      return makeError("pass '", pass.name(), "' left invalid IR: ", s.error().message);
    if (options.out && (printAll || options.printAfter.count(std::string(pass.name()))))
      *options.out << "// ----- after " << pass.name() << (*changed ? "" : " (unchanged)")
                   << " -----\n"
                   << printModel(model);
    if (!options.dumpDir.empty())
      if (Status s = dump(model, options.dumpDir, static_cast<int>(i) + 1, pass.name()); !s.ok())
        return s;
  }
  return Status::success();
}

} // namespace kiln
