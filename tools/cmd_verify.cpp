// `kiln verify MODEL`: runs the target (the CPU compiler by default) and a
// golden reference on the same inputs, prints error figures per output and
// exits 0 only when every output is within tolerance. With --bisect it finds
// the first layer that diverges; --json and --report write the result for
// tools and for people. The work is in src/verify/; this file is flags.
#include "cli.h"
#include "commands.h"
#include "engine.h"
#include "inputs.h"

#include "support/npy.h"
#include "verify/report.h"
#include "verify/verify.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;

const char *kHelp = R"(usage: kiln verify MODEL [options]

Runs MODEL on the target and on a golden reference with the same inputs and
compares every output: shape, max abs error, MAE, RMSE, relative L2, cosine
similarity, elements outside tolerance, NaN/Inf counts on each side. Exits 0
when every output is within tolerance, 1 when one is not, 2 on errors.
A float element agrees when |target - reference| <= atol + rtol * max(
|reference|, RMS of the reference tensor).

options:
  --reference R           interp (default), interp-f64 (float64 accumulation,
                          the strictest oracle) or ort (ONNX Runtime through
                          scripts/ort/ort_run.js; .onnx models only)
  --rtol R, --atol A      tolerances of float values (defaults per dtype:
                          f32 5e-4/1e-5, f16 1e-2/1e-3, bf16 2e-2/1e-2,
                          f64 1e-7/1e-9; integers, bools, strings exact)
  --input NAME=FILE.npy   use this tensor for input NAME (repeatable)
  --inputs-from DIR       take input NAME from DIR/<NAME>.npy where it exists
                          (the names --save-inputs and --report write)
  --save-inputs DIR       write the inputs used to DIR/<NAME>.npy
  --dim NAME=VALUE        size of symbolic dim NAME (default 1; repeatable)
  --seed N                seed for random inputs (default 0; floats in [-1, 1),
                          integers in [0, 10))
  --bisect                when an output fails, compare every intermediate
                          value both runs have and name the first node that
                          diverges while its inputs agree
  --all-layers            the per-layer comparison and table, always
  --json FILE             write the result as JSON (schema kiln-verify/1,
                          docs/verify.md)
  --report DIR            write DIR/report.html (error curve by layer, tables;
                          self-contained) and the inputs under DIR/inputs/
  --ort-threads N         intra-op threads of the ort reference (default: ORT's)
environment:
  KILN_DEBUG_PERTURB=NODE perturb the compiled output of ONNX node NODE
                          (x -> x ± (|x|+1)/2, element-dependent), to test verify itself
  KILN_ORT_RUN=FILE       the ort_run.js to use
)";

int error(const Error &e) {
  return fail("verify", e) + 1;
}

Expected<double> parseTolerance(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || !(v >= 0))
    return makeError("--", flag, ": '", text, "' is not a non-negative number");
  return v;
}

// --inputs-from DIR: inputs not given with --input come from DIR/<file>.npy
// (the file-name rule of --output-dir) where that exists.
void addInputsFrom(const std::string &dir, const Graph &graph, InputSpec &spec) {
  std::vector<std::string> names;
  for (Value *in : graph.inputs()) names.push_back(in->name());
  std::vector<std::string> files = outputFileNames(names);
  for (size_t i = 0; i < names.size(); ++i) {
    fs::path p = fs::path(dir) / (files[i] + ".npy");
    if (!spec.files.count(names[i]) && fs::exists(p)) spec.files[names[i]] = p.string();
  }
}

Status saveInputs(const std::string &dir, const Graph &graph, const std::vector<RtValue> &inputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return makeError(dir, ": cannot create directory: ", ec.message());
  std::vector<std::string> names;
  for (Value *in : graph.inputs()) names.push_back(in->name());
  std::vector<std::string> files = outputFileNames(names);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].isTensor())
      KILN_RETURN_IF_ERROR(
          writeNpy((fs::path(dir) / (files[i] + ".npy")).string(), inputs[i].tensor));
  return Status::success();
}

Status writeFile(const fs::path &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return makeError(path.string(), ": cannot write");
  return Status::success();
}

// A scratch folder for the ort bridge, removed when it goes out of scope.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln-verify-XXXXXX").string();
    if (char *p = mkdtemp(tmpl.data())) path = p;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

} // namespace

int verifyCommand(const std::vector<std::string> &argv) {
  std::vector<std::string> flags = {"input", "inputs-from", "save-inputs", "dim",
                                    "seed",  "reference",   "rtol",        "atol",
                                    "json",  "report",      "ort-threads"};
  flags.insert(flags.end(), kTargetFlags.begin(), kTargetFlags.end());
  auto args = Args::parse(argv, flags, {"help", "bisect", "all-layers"});
  if (!args.ok()) return error(args.error());
  if (args->flag("help")) {
    std::cout << kHelp << kTargetHelp;
    return 0;
  }
  if (args->positional().size() != 1) return error(Error{"expects one MODEL argument"});
  const std::string path = args->positional()[0];

  verify::VerifyOptions options;
  options.modelPath = path;
  auto target = targetOptionsFrom(*args);
  if (!target.ok()) return error(target.error());
  options.target = target->target;
  options.compile.optLevel = target->optLevel;
  options.compile.cpu = target->cpu;
  options.threads = target->threads;
  options.reference = args->value("reference").value_or("interp");
  if (options.reference != "interp" && options.reference != "interp-f64" &&
      options.reference != "ort")
    return error(makeError("unknown reference '", options.reference,
                           "' (available: interp, interp-f64, ort)"));
  for (const char *flag : {"rtol", "atol"})
    if (auto text = args->value(flag)) {
      auto v = parseTolerance(flag, *text);
      if (!v.ok()) return error(v.error());
      (std::string(flag) == "rtol" ? options.rtol : options.atol) = *v;
    }
  options.bisect = args->flag("bisect");
  options.allLayers = args->flag("all-layers");
  if (auto t = args->value("ort-threads")) options.ort.threads = std::atoi(t->c_str());

  auto spec = inputSpecFrom(*args);
  if (!spec.ok()) return error(spec.error());
  auto referenceModel = loadModel(path);
  if (!referenceModel.ok()) return error(referenceModel.error());
  if (auto dir = args->value("inputs-from")) {
    if (!fs::is_directory(*dir))
      return error(makeError("--inputs-from ", *dir, ": not a directory"));
    addInputsFrom(*dir, *referenceModel->graph, *spec);
  }
  auto inputs = prepareInputs(*referenceModel->graph, *spec);
  if (!inputs.ok()) return error(inputs.error());
  std::vector<verify::InputInfo> inputInfo;
  for (size_t i = 0; i < inputs->size(); ++i) {
    const Value *in = referenceModel->graph->inputs()[i];
    const RtValue &v = (*inputs)[i];
    auto file = spec->files.find(in->name());
    inputInfo.push_back({in->name(),
                         v.isTensor() ? std::string(dtypeName(v.tensor.dtype())) : v.describe(),
                         file == spec->files.end() ? "random" : file->second,
                         v.isTensor() ? v.tensor.shape() : Shape64{}});
  }
  if (auto dir = args->value("save-inputs"))
    if (Status s = saveInputs(*dir, *referenceModel->graph, *inputs); !s.ok())
      return error(s.error());
  if (auto dir = args->value("report"))
    if (Status s =
            saveInputs((fs::path(*dir) / "inputs").string(), *referenceModel->graph, *inputs);
        !s.ok())
      return error(s.error());

  auto targetModel = loadModel(path);
  if (!targetModel.ok()) return error(targetModel.error());
  ScratchDir scratch;
  if (options.reference == "ort") {
    if (scratch.path.empty()) return error(Error{"cannot create a temporary directory"});
    options.ort.workDir = scratch.path;
  }
  auto result = verify::verifyModel(std::move(*targetModel), std::move(*referenceModel),
                                    std::move(*inputs), options);
  if (!result.ok()) return error(result.error());
  result->seed = spec->seed;
  result->inputs = std::move(inputInfo);

  verify::printText(std::cout, *result);
  if (auto json = args->value("json"))
    if (Status s = writeFile(*json, verify::toJson(*result)); !s.ok()) return error(s.error());
  if (auto dir = args->value("report")) {
    fs::path page = fs::path(*dir) / "report.html";
    if (Status s = writeFile(page, verify::toHtml(*result)); !s.ok()) return error(s.error());
    std::cout << "report: " << page.string() << "\n";
  }
  return result->pass ? 0 : 1;
}

} // namespace kiln::cli
