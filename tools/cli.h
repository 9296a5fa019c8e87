// Small pieces shared by the kiln subcommands: argument scanning, model
// loading by file type, and the one way errors leave the tool.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

// Scans "--name value", "--name=value" and positional arguments. Flags named
// in `booleanFlags` take no value. Unknown flags are an error, so a typo never
// silently changes what runs.
class Args {
public:
  static Expected<Args> parse(const std::vector<std::string> &argv,
                              const std::vector<std::string> &valueFlags,
                              const std::vector<std::string> &booleanFlags);

  const std::vector<std::string> &positional() const { return positional_; }
  bool flag(const std::string &name) const { return flags_.count(name) != 0; }
  std::optional<std::string> value(const std::string &name) const;
  // Every value given for a repeatable flag, in order.
  std::vector<std::string> values(const std::string &name) const;

private:
  std::vector<std::string> positional_;
  std::map<std::string, int> flags_;
  std::multimap<std::string, std::string> values_;
  std::vector<std::pair<std::string, std::string>> ordered_;
};

// Splits "NAME=VALUE"; error naming the flag when there is no '='.
Expected<std::pair<std::string, std::string>> splitAssignment(const std::string &text,
                                                              const std::string &flag);

// Loads a model by extension: .onnx (importer) or .kir (IR text).
Expected<Model> loadModel(const std::string &path);

// Prints "kiln <command>: <message>" to stderr and returns exit code 1.
int fail(const std::string &command, const Error &e);

// The file names (without ".npy") that output tensors are written to, in
// output order, by the same rule as scripts/ort/ort_run.js: every byte outside
// [A-Za-z0-9._-] becomes '_' (an empty name becomes "_"); a name already taken
// by an earlier output gets "__2", "__3"... appended.
std::vector<std::string> outputFileNames(const std::vector<std::string> &names);

} // namespace kiln::cli
