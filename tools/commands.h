// The kiln subcommands; each lives in its own cmd_*.cpp and returns the
// process exit code.
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

int runCommand(const std::vector<std::string> &args);         // kiln run
int inspectCommand(const std::vector<std::string> &args);     // kiln inspect
int optCommand(const std::vector<std::string> &args);         // kiln opt
int conformanceCommand(const std::vector<std::string> &args); // kiln conformance
int benchCommand(const std::vector<std::string> &args);       // kiln bench
int compileCommand(const std::vector<std::string> &args);     // kiln compile
int verifyCommand(const std::vector<std::string> &args);      // kiln verify
int opsCommand(const std::vector<std::string> &args);         // kiln ops

} // namespace kiln::cli
