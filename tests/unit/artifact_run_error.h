// The run-time error of a model through the artifact (a companion of
// op_check.h for the lowering tests of bad inputs): the model in IR text
// is compiled to a `.kiln` artifact in memory, loaded and run on `inputs`;
// the result is the run's error message, "" when it succeeds, or a
// message starting "compile:" / "load:" when it fails before running.
#pragma once

#include "ir/parser.h"
#include "package/package.h"
#include "runtime/api/model.h"

#include <string>
#include <vector>

namespace kiln::testing {

inline std::string artifactRunError(const std::string &model, const std::vector<Tensor> &inputs) {
  auto parsed = parseModel(model, "test.kir");
  if (!parsed.ok()) return "compile: " + parsed.error().message;
  auto bytes = package::packageModel(std::move(*parsed), package::PackageOptions{});
  if (!bytes.ok()) return "compile: " + bytes.error().message;
  auto loaded = rt::LoadedModel::fromMemory(bytes->data(), bytes->size());
  if (loaded.error) return "load: " + loaded.error->message;
  rt::Session session(*loaded.value, 1);
  auto got = session.run(inputs);
  return got.ok() ? "" : got.error().message;
}

} // namespace kiln::testing
