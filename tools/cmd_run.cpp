// `kiln run MODEL`: runs a model on the given or seeded random inputs and
// prints every output's name, dtype, shape and a short summary.
#include "cli.h"
#include "commands.h"
#include "engine.h"
#include "inputs.h"

#include "support/npy.h"

#include <filesystem>
#include <iostream>

namespace kiln::cli {

namespace {

const char *kHelp = R"(usage: kiln run MODEL [options]

Runs MODEL (.onnx or .kir) and prints each output's name, dtype, shape and
summary. Inputs not given are filled with seeded random values of the right
dtype and shape (floats in [-1, 1), integers in [0, 10)).

options:
  --input NAME=FILE.npy   use this tensor for input NAME (repeatable)
  --dim NAME=VALUE        size of symbolic dim NAME (default 1; repeatable)
  --seed N                seed for random inputs (default 0)
  --output-dir DIR        also write each output to DIR/<name>.npy (bytes
                          outside [A-Za-z0-9._-] in names become '_'; a
                          repeated file name gets "__2", "__3"...)
  --dump-dir DIR          cpu target: write the Kernel IR and LLVM IR there;
                          vulkan: the Kernel IR and each kernel's GLSL
)";

Status writeOutput(const std::string &dir, const std::string &name, const std::string &file,
                   const RtValue &v) {
  if (!v.isTensor()) return makeError("output '", name, "' is a ", v.describe(), ", not a tensor");
  return writeNpy((std::filesystem::path(dir) / (file + ".npy")).string(), v.tensor);
}

} // namespace

int runCommand(const std::vector<std::string> &argv) {
  std::vector<std::string> flags = {"input", "dim", "seed", "output-dir", "dump-dir"};
  flags.insert(flags.end(), kTargetFlags.begin(), kTargetFlags.end());
  auto args = Args::parse(argv, flags, {"help"});
  if (!args.ok()) return fail("run", args.error());
  if (args->flag("help")) {
    std::cout << kHelp << kTargetHelp;
    return 0;
  }
  if (args->positional().size() != 1) return fail("run", Error{"expects one MODEL argument"});
  auto target = targetOptionsFrom(*args);
  if (!target.ok()) return fail("run", target.error());
  target->dumpDir = args->value("dump-dir").value_or("");

  auto spec = inputSpecFrom(*args);
  if (!spec.ok()) return fail("run", spec.error());
  auto engine = openEngine(args->positional()[0], *target);
  if (!engine.ok()) return fail("run", engine.error());
  const Graph &graph = (*engine)->graph();
  auto inputs = prepareInputs(graph, *spec);
  if (!inputs.ok()) return fail("run", inputs.error());
  auto outputs = (*engine)->run(std::move(*inputs));
  if (!outputs.ok()) return fail("run", outputs.error());

  auto dir = args->value("output-dir");
  if (dir) {
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    if (ec) return fail("run", makeError(*dir, ": cannot create directory: ", ec.message()));
  }
  std::vector<std::string> names;
  for (Value *o : graph.outputs()) names.push_back(o->name());
  std::vector<std::string> files = outputFileNames(names);
  for (size_t i = 0; i < outputs->size(); ++i) {
    const std::string &name = names[i];
    const RtValue &v = (*outputs)[i];
    if (v.isTensor())
      std::cout << name << " " << dtypeName(v.tensor.dtype()) << shapeToString(v.tensor.shape())
                << " " << summarize(v.tensor) << "\n";
    else
      std::cout << name << " " << v.describe() << "\n";
    if (dir)
      if (Status s = writeOutput(*dir, name, files[i], v); !s.ok()) return fail("run", s.error());
  }
  return 0;
}

} // namespace kiln::cli
