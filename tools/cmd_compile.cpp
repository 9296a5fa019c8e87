// kiln compile: a model -> a `.kiln` artifact (package/package.h) that the
// runtime library runs without the compiler.
#include "cli.h"
#include "commands.h"

#include "package/package.h"

#include <iostream>

namespace kiln::cli {

namespace {

const char *kHelp = R"(usage: kiln compile MODEL -o OUT.kiln [options]

Compiles MODEL (ONNX) for the CPU and writes one artifact file: manifest,
program, native code and weights (docs/artifact.md). Run it with
`kiln run OUT.kiln`, the C API (include/kiln/kiln.h) or `kiln.load` in Python.
Compiling twice gives identical bytes.

options:
  -o, --output FILE       the artifact to write (required)
  --target cpu            the target (only cpu so far)
  --cpu NAME              native (default), x86-64-v4, x86-64-v3 or x86-64: the
                          CPU level the code may assume
  -O N, --opt N           graph optimization level 0..3 (default 3)
  --dim NAME=VALUE        pin symbolic dim NAME to VALUE (repeatable); other
                          symbolic dims stay symbolic
)";

int fail(const Error &e) {
  std::cerr << "kiln compile: " << e.message << "\n";
  return 1;
}

} // namespace

int compileCommand(const std::vector<std::string> &argv) {
  // -o FILE and -ON are spelled the compiler way.
  std::vector<std::string> normalized;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string &a = argv[i];
    if (a == "-o") normalized.push_back("--output");
    else if (a.size() == 3 && a[0] == '-' && a[1] == 'O') normalized.push_back("--opt=" + a.substr(2));
    else if (a == "-O") normalized.push_back("--opt");
    else normalized.push_back(a);
  }
  auto args = Args::parse(normalized, {"output", "target", "cpu", "opt", "dim"}, {"help"});
  if (!args.ok()) return fail(args.error());
  if (args->flag("help")) {
    std::cout << kHelp;
    return 0;
  }
  if (args->positional().size() != 1) return fail(Error{"expects one MODEL argument"});
  auto out = args->value("output");
  if (!out) return fail(Error{"-o OUT.kiln is required"});
  package::PackageOptions options;
  options.target = args->value("target").value_or("cpu");
  options.cpu = args->value("cpu").value_or("native");
  if (auto opt = args->value("opt")) {
    if (opt->size() != 1 || (*opt)[0] < '0' || (*opt)[0] > '3')
      return fail(Error{"-O must be 0, 1, 2 or 3, got '" + *opt + "'"});
    options.optLevel = (*opt)[0] - '0';
  }
  for (const std::string &d : args->values("dim")) {
    auto kv = splitAssignment(d, "dim");
    if (!kv.ok()) return fail(kv.error());
    char *end = nullptr;
    const long long v = std::strtoll(kv->second.c_str(), &end, 10);
    if (kv->second.empty() || *end || v < 0)
      return fail(Error{"--dim " + kv->first + ": '" + kv->second + "' is not a non-negative integer"});
    options.dims.emplace_back(kv->first, v);
  }
  if (Status s = package::compileFile(args->positional()[0], *out, options); !s.ok())
    return fail(s.error());
  return 0;
}

} // namespace kiln::cli
