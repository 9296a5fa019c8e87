// `kiln run|bench|inspect OUT.kiln`: an Engine over a loaded artifact, run
// by the runtime library's own code (rt::Session), so the CLI, the C API
// and the Python module produce the same bytes.
#pragma once

#include "engine.h"

#include <optional>

namespace kiln::cli {

// True when the file at `path` starts with the artifact magic.
bool isArtifactFile(const std::string &path);

// Loads the artifact; the engine's graph() only declares its inputs and
// outputs (for input preparation and output names).
Expected<std::unique_ptr<Engine>> openArtifactEngine(const std::string &path, int threads);
// The same for an artifact's bytes (copied). `graph`, when given, is the
// optimized graph the artifact was compiled from (its outputs name the
// intermediates that `kiln verify` exposes) and `summary` the compiler's.
Expected<std::unique_ptr<Engine>> openArtifactEngineFromMemory(const std::string &bytes,
                                                               int threads,
                                                               std::optional<Model> graph = std::nullopt,
                                                               std::string summary = "");

} // namespace kiln::cli
