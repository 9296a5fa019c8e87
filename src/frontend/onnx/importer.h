// ONNX ModelProto -> kiln Graph IR.
//
// Opset-aware from 7 to 23 (older opsets where the op is unchanged): each node is legalized at its model's opset into
// kiln's one canonical form (legalize.h). Initializers and Constant nodes
// become Constant nodes; external data is read from files next to the model;
// nodes are imported in dependency order whatever order the file lists them
// in; If/Loop/Scan bodies become regions that may read outer-scope values.
//
// A model with unsupported ops fails with ONE error listing every such node
// (name, domain:op, opset). A corrupt or truncated file fails with an error
// naming the file; nothing in here may crash on bad bytes (fuzzed).
#pragma once

#include "ir/graph.h"
#include "support/status.h"

#include <string>

namespace kiln {

// Opsets 1-6 import where an op's form did not change by opset 7, or where a
// legalization rule rewrites it (binary ops' legacy `broadcast`/`axis`, old
// PRelu slopes; `consumed_inputs` is dropped). Other old forms (Reshape's
// shape attribute...) are attributes kiln's op table does not know, so such
// nodes are rejected with a clear error rather than misread.
inline constexpr int64_t kMinOnnxOpset = 1;
inline constexpr int64_t kMaxOnnxOpset = 23;

Expected<Model> importOnnxFile(const std::string &path);

// `baseDir` is where external data files are looked up; `name` is used in
// error messages.
Expected<Model> importOnnxBytes(const std::string &bytes, const std::string &baseDir,
                                const std::string &name);

} // namespace kiln
