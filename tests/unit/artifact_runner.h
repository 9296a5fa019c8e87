// A model compiled to a `.kiln` artifact in memory and loaded by the runtime
// library: how every compiled run in the unit tests happens, since that is
// the only way kiln runs compiled code (`kiln run` included).
#pragma once

#include "package/package.h"
#include "runtime/api/model.h"

#include <memory>

namespace kiln::testing {

class ArtifactRunner {
public:
  static Expected<std::unique_ptr<ArtifactRunner>> compile(Model model,
                                                           const package::PackageOptions &options,
                                                           int threads) {
    KILN_ASSIGN_OR_RETURN(auto compiled, package::compileForArtifact(std::move(model), options));
    KILN_ASSIGN_OR_RETURN(std::string bytes, package::packageCompiled(*compiled, options));
    auto loaded = rt::LoadedModel::fromMemory(bytes.data(), bytes.size());
    if (loaded.error) return makeError(loaded.error->message);
    return std::unique_ptr<ArtifactRunner>(
        new ArtifactRunner(compiled->stats(), std::move(loaded.value), threads));
  }

  Expected<std::vector<RtValue>> run(std::vector<RtValue> inputs) {
    return session_.run(std::move(inputs));
  }
  const cpu::CompileStats &stats() const { return stats_; }
  const cpu::Program &program() const { return model_->program(); }
  rt::Session &session() { return session_; }

private:
  ArtifactRunner(cpu::CompileStats stats, std::unique_ptr<rt::LoadedModel> model, int threads)
      : stats_(stats), model_(std::move(model)), session_(*model_, threads) {}
  cpu::CompileStats stats_;
  std::unique_ptr<rt::LoadedModel> model_;
  rt::Session session_;
};

} // namespace kiln::testing
