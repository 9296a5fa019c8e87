// `kiln opt FILE`: parses IR text (or imports an ONNX model), runs an
// optimization level's pipeline and/or the named passes, verifies, and prints
// the result.
#include "cli.h"
#include "commands.h"

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "passes/pipeline.h"

#include <iostream>

namespace kiln::cli {

namespace {

const char *kHelp = R"(usage: kiln opt FILE [-O0|-O1|-O2|-O3] [--passes=a,b,...]
                     [--print-after=PASS|all] [--dump-dir=DIR] [--elide-weights]

Parses FILE (.kir IR text, or an .onnx model, which is imported first),
runs the level's pipeline and then the given passes in order, verifies the
result and prints it as IR text. Without -O and --passes it prints the
parsed IR unchanged, so `kiln opt x.kir` round-trips a file.

options:
  -O0 .. -O3        run the pipeline of that optimization level first
                    (`kiln opt --help-passes` prints each level's list);
                    -O0 runs nothing
  --passes=a,b      passes to run, in order, comma-separated, after the -O
                    pipeline if one is given; the verifier runs after each
                    (`kiln opt --help-passes` lists them)
  --print-after=P   print the IR to stderr after pass P (repeatable, or
                    comma-separated; "all" for every pass), so that the final
                    result alone goes to stdout
  --dump-dir=DIR    write the IR after each pass to DIR/NN-<pass>.kir
  --help-passes     list the registered passes and each level's pipeline
  --elide-weights   print large constants as "elided" (for reading; the
                    result does not parse back)
)";

std::vector<std::string> splitList(const std::string &text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

// Takes -O<level> out of argv (the shared scanner knows only --flags). The
// last one wins, as with every other repeated flag.
Expected<int> takeLevel(std::vector<std::string> &argv) {
  int level = 0;
  std::vector<std::string> rest;
  for (const std::string &arg : argv) {
    if (arg.rfind("-O", 0) != 0) {
      rest.push_back(arg);
      continue;
    }
    if (arg.size() != 3 || arg[2] < '0' || arg[2] > '3')
      return makeError("unknown optimization level '", arg, "' (expected -O0 to -O3)");
    level = arg[2] - '0';
  }
  argv = std::move(rest);
  return level;
}

std::string joined(const std::vector<std::string> &names) {
  std::string s;
  for (const std::string &n : names) s += (s.empty() ? "" : ",") + n;
  return s.empty() ? "(nothing)" : s;
}

} // namespace

int optCommand(const std::vector<std::string> &argv) {
  std::vector<std::string> rest = argv;
  Expected<int> level = takeLevel(rest);
  if (!level.ok()) return fail("opt", level.error());
  auto args = Args::parse(rest, {"passes", "print-after", "dump-dir"},
                          {"help", "help-passes", "elide-weights"});
  if (!args.ok()) return fail("opt", args.error());
  if (args->flag("help")) {
    std::cout << kHelp;
    return 0;
  }
  if (args->flag("help-passes")) {
    for (const std::string &name : allPassNames()) std::cout << name << "\n";
    for (int l = 0; l <= 3; ++l)
      std::cout << "-O" << l << ": " << joined(pipelineForLevel(l)) << "\n";
    return 0;
  }
  PipelineOptions pipeline;
  pipeline.out = &std::cerr;
  pipeline.dumpDir = args->value("dump-dir").value_or("");
  for (const std::string &list : args->values("print-after"))
    for (std::string &name : splitList(list)) {
      if (name != "all" && !findPass(name))
        return fail("opt", makeError("--print-after: unknown pass '", name, "'"));
      pipeline.printAfter.insert(std::move(name));
    }
  std::vector<std::string> passes = pipelineForLevel(*level);
  for (std::string &name : splitList(args->value("passes").value_or("")))
    passes.push_back(std::move(name));
  if (args->positional().size() != 1) return fail("opt", Error{"expects one FILE argument"});
  auto model = loadModel(args->positional()[0]);
  if (!model.ok()) return fail("opt", model.error());
  if (Status s = runPipeline(*model, passes, pipeline); !s.ok()) return fail("opt", s.error());
  if (Status s = verifyModel(*model); !s.ok()) return fail("opt", s.error());
  PrintOptions options;
  options.elideLargeConstants = args->flag("elide-weights");
  std::cout << printModel(*model, options);
  return 0;
}

} // namespace kiln::cli
