// The kiln command-line tool: one binary, one subcommand per job.
#include "commands.h"

#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

const char *kUsage = R"(usage: kiln <command> [options]

kiln compiles and runs ML models. Commands:
  compile      compile a model to a .kiln artifact (code, program, weights)
  run          run a model or artifact on given or random inputs, print its outputs
  inspect      show a model's inputs, outputs, ops, opsets and parameters
  opt          parse a .kir file, run passes, print it
  conformance  run ONNX backend test cases and compare with their outputs
  bench        time a model's runs (median/min/mean/p90 latency)
  verify       compare the compiled model with a golden reference, find the
               first diverging layer
  ops          list every op and how each target compiles it

Run `kiln <command> --help` for a command's options.
)";

int dispatch(std::vector<std::string> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 1 : 0;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  using namespace kiln::cli;
  if (cmd == "run") return runCommand(args);
  if (cmd == "compile") return compileCommand(args);
  if (cmd == "inspect") return inspectCommand(args);
  if (cmd == "opt") return optCommand(args);
  if (cmd == "conformance") return conformanceCommand(args);
  if (cmd == "bench") return benchCommand(args);
  if (cmd == "verify") return verifyCommand(args);
  if (cmd == "ops") return opsCommand(args);
  std::cerr << "kiln: unknown command '" << cmd << "'\n" << kUsage;
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  // Layers report errors as values; this is the last net for an allocation
  // that fails outside the interpreter (e.g. --dim sizes no machine holds).
  try {
    return dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception &e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 1;
  }
}
