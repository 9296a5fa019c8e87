// `kiln opt FILE`: parses IR text (or imports an ONNX model), runs the named
// passes, verifies, and prints the result.
#include "cli.h"
#include "commands.h"

#include "ir/printer.h"
#include "ir/verifier.h"

#include <iostream>

namespace kiln::cli {

namespace {

const char *kHelp = R"(usage: kiln opt FILE [--passes=a,b,...] [--elide-weights]

Parses FILE (.kir IR text, or an .onnx model, which is imported first),
runs the given passes in order, verifies the result and prints it as IR text.
Without --passes it prints the parsed IR unchanged, so `kiln opt x.kir`
round-trips a file.

options:
  --passes=a,b      passes to run, comma-separated (none are registered yet)
  --elide-weights   print large constants as "elided" (for reading; the
                    result does not parse back)
)";

} // namespace

int optCommand(const std::vector<std::string> &argv) {
  auto args = Args::parse(argv, {"passes"}, {"help", "elide-weights"});
  if (!args.ok()) return fail("opt", args.error());
  if (args->flag("help")) {
    std::cout << kHelp;
    return 0;
  }
  if (args->positional().size() != 1) return fail("opt", Error{"expects one FILE argument"});
  auto model = loadModel(args->positional()[0]);
  if (!model.ok()) return fail("opt", model.error());
  if (auto passes = args->value("passes"); passes && !passes->empty())
    return fail("opt", makeError("unknown pass '", passes->substr(0, passes->find(',')),
                                 "' (no passes are registered yet)"));
  if (Status s = verifyModel(*model); !s.ok()) return fail("opt", s.error());
  PrintOptions options;
  options.elideLargeConstants = args->flag("elide-weights");
  std::cout << printModel(*model, options);
  return 0;
}

} // namespace kiln::cli
