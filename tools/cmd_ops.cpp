// `kiln ops [--target cpu] [--json] [--missing]`: every op of the op table and
// how a target compiles it. The answers come from the compiler's own tables
// (backend/cpu/coverage.h), so the listing cannot drift from what compiles.
#include "cli.h"
#include "commands.h"

#include "backend/cpu/coverage.h"
#include "ir/op.h"

#include <algorithm>
#include <iostream>

namespace kiln::cli {

namespace {

const char *kHelp = R"(usage: kiln ops [--target cpu] [--json] [--missing]

Lists every op of kiln's op table and how the target compiles it, fastest
way first:
  kernel-ir    a dispatch of its Kernel IR lowering, compiled by LLVM
  microkernel  a handwritten microkernel step (GEMM, conv, pooling, RNN)
               for its common forms; the other forms take the next way
  view         a zero-copy view of its input (Reshape and its kin)
  host-op      a host op of the runtime library (dynamic output shapes,
               strings, sequences, shape arithmetic)
  decomposed   rewritten into other ops before lowering
  sub-program  control flow whose bodies are compiled programs
  constant     a value of the program, no step
An op with no way is not compiled for that target (a compile error naming the
node); the unit test op_coverage_test fails when an op is in that state.

options:
  --target T   the target (cpu; the only one today)
  --json       one JSON object: {"target": T, "ops": {NAME: [WAY, ...]}}
  --missing    list only the ops the target does not compile; exit 1 if any
)";

std::string jsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

} // namespace

int opsCommand(const std::vector<std::string> &argv) {
  auto args = Args::parse(argv, {"target"}, {"help", "json", "missing"});
  if (!args.ok()) return fail("ops", args.error());
  if (args->flag("help")) {
    std::cout << kHelp;
    return 0;
  }
  if (!args->positional().empty())
    return fail("ops", Error{"takes no positional arguments (see --help)"});
  const std::string target = args->value("target").value_or("cpu");
  if (target != "cpu") return fail("ops", makeError("unknown target '", target, "' (known: cpu)"));

  const bool json = args->flag("json"), missingOnly = args->flag("missing");
  int missing = 0, listed = 0;
  std::string body;
  for (const OpSchema &schema : allOpSchemas()) {
    if (isCompilerOp(schema.kind)) continue;
    const std::vector<cpu::Way> ways = cpu::cpuWaysOf(schema.kind);
    if (ways.empty()) ++missing;
    if (missingOnly && !ways.empty()) continue;
    std::string list;
    for (cpu::Way w : ways) {
      if (json) list += (list.empty() ? "" : ", ") + jsonString(cpu::wayName(w));
      else list += (list.empty() ? "" : ", ") + std::string(cpu::wayName(w));
    }
    if (json) {
      body += (listed ? ",\n    " : "\n    ") + jsonString(schema.name) + ": [" + list + "]";
    } else {
      std::string name(schema.name);
      name.resize(std::max<size_t>(name.size(), 28), ' ');
      body += name + (ways.empty() ? "NOT COMPILED" : list) + "\n";
    }
    ++listed;
  }
  if (json) {
    std::cout << "{\"target\": " << jsonString(target) << ", \"ops\": {" << body << "\n  }}\n";
  } else {
    std::cout << body;
    std::cout << listed << " ops listed; " << missing << " not compiled for " << target << "\n";
  }
  return missingOnly && missing ? 1 : 0;
}

} // namespace kiln::cli
