#include "verify/reference.h"

#include "interp/interpreter.h"
#include "support/npy.h"

#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace kiln::verify {

namespace fs = std::filesystem;

Expected<std::vector<RtValue>> runInterpreter(const Graph &graph, std::vector<RtValue> inputs,
                                              bool accumulateF64,
                                              const std::unordered_set<std::string> &wanted,
                                              const ValueSink &sink) {
  Interpreter interp(InterpOptions{.accumulateF64 = accumulateF64});
  if (!wanted.empty())
    interp.setObserver([&](const Node &node, const std::vector<RtValue> &outs) {
      for (size_t i = 0; i < outs.size() && i < node.outputs().size(); ++i) {
        const Value *v = node.outputs()[i];
        if (v && wanted.count(v->name())) sink(v->name(), outs[i]);
      }
    });
  return interp.run(graph, std::move(inputs));
}

namespace {

std::string readText(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// POSIX shell single-quoting.
std::string quote(const std::string &s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The "file" fields of ort_run.js's manifest.json, in output order. Those
// names are [A-Za-z0-9._-] only (the bridge's file-name rule), so no JSON
// unescaping is needed.
std::vector<std::string> manifestFiles(const std::string &json) {
  std::vector<std::string> files;
  const std::string key = "\"file\":\"";
  for (size_t at = json.find(key); at != std::string::npos; at = json.find(key, at)) {
    at += key.size();
    size_t end = json.find('"', at);
    if (end == std::string::npos) break;
    files.push_back(json.substr(at, end - at));
    at = end;
  }
  return files;
}

// Writes a copy of the model whose graph also outputs `names` (those a
// top-level ONNX node produces as a tensor); returns the names added.
Expected<std::vector<std::string>> withExtraOutputs(const std::string &modelPath,
                                                    const Graph &graph,
                                                    const std::vector<std::string> &names,
                                                    const std::string &outPath) {
  onnx::ModelProto proto;
  {
    std::ifstream in(modelPath, std::ios::binary);
    if (!in || !proto.ParseFromIstream(&in))
      return makeError(modelPath, ": cannot read the ONNX model");
  }
  for (const onnx::TensorProto &t : proto.graph().initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL)
      return makeError(modelPath,
                       ": keeps weights in external data; per-layer comparison with "
                       "onnxruntime needs them inside the model (use --reference interp)");
  std::unordered_set<std::string> produced, taken;
  for (const onnx::NodeProto &n : proto.graph().node())
    if (n.op_type() != "Constant")
      for (const std::string &o : n.output()) produced.insert(o);
  for (const onnx::ValueInfoProto &o : proto.graph().output()) taken.insert(o.name());
  std::unordered_set<std::string> tensors;
  for (const auto &n : graph.nodes())
    for (const Value *v : n->outputs())
      if (v && v->type().isTensor()) tensors.insert(v->name());
  std::vector<std::string> added;
  for (const std::string &name : names) {
    if (!produced.count(name) || !tensors.count(name) || !taken.insert(name).second) continue;
    // A name without a type: onnxruntime infers it.
    proto.mutable_graph()->add_output()->set_name(name);
    added.push_back(name);
  }
  std::ofstream out(outPath, std::ios::binary);
  if (!out || !proto.SerializeToOstream(&out)) return makeError(outPath, ": cannot write");
  return added;
}

} // namespace

Expected<std::string> findOrtScript() {
  if (const char *env = std::getenv("KILN_ORT_RUN"); env && *env) {
    if (!fs::exists(env)) return makeError("KILN_ORT_RUN=", env, ": no such file");
    return std::string(env);
  }
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.parent_path();
         dir = dir.parent_path())
      candidates.push_back(dir / "scripts" / "ort" / "ort_run.js");
#ifdef KILN_SOURCE_DIR
  candidates.push_back(fs::path(KILN_SOURCE_DIR) / "scripts" / "ort" / "ort_run.js");
#endif
  // A bridge with its onnxruntime-node installed beats one without (a copy
  // of the scripts next to a build tree need not have it).
  for (const fs::path &c : candidates)
    if (fs::exists(c.parent_path() / "node_modules" / "onnxruntime-node", ec)) return c.string();
  for (const fs::path &c : candidates)
    if (fs::exists(c, ec)) return c.string();
  return makeError("cannot find scripts/ort/ort_run.js (the onnxruntime bridge); set KILN_ORT_RUN");
}

Expected<std::vector<RtValue>> runOrt(const std::string &modelPath, const Graph &graph,
                                      const std::vector<RtValue> &inputs,
                                      const std::vector<std::string> &extraOutputs,
                                      const OrtOptions &options, const ValueSink &sink) {
  std::string script = options.script;
  if (script.empty()) {
    KILN_ASSIGN_OR_RETURN(script, findOrtScript());
  }
  fs::path work(options.workDir);
  std::string model = modelPath;
  std::vector<std::string> added;
  if (!extraOutputs.empty()) {
    model = (work / "model_with_intermediates.onnx").string();
    KILN_ASSIGN_OR_RETURN(added, withExtraOutputs(modelPath, graph, extraOutputs, model));
  }
  std::string cmd = quote(options.node) + " " + quote(script) + " " + quote(model);
  for (size_t i = 0; i < inputs.size() && i < graph.inputs().size(); ++i) {
    if (!inputs[i].isTensor())
      return makeError("input '", graph.inputs()[i]->name(), "' is a ", inputs[i].describe(),
                       ": onnxruntime takes tensors only");
    fs::path file = work / ("input_" + std::to_string(i) + ".npy");
    KILN_RETURN_IF_ERROR(writeNpy(file.string(), inputs[i].tensor));
    cmd += " --input " + quote(graph.inputs()[i]->name() + "=" + file.string());
  }
  fs::path outDir = work / "ort_outputs", errFile = work / "ort_stderr.txt";
  cmd += " --output-dir " + quote(outDir.string()) + " --quiet";
  if (options.threads > 0) cmd += " --threads " + std::to_string(options.threads);
  cmd += " >/dev/null 2>" + quote(errFile.string());
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::string err = readText(errFile);
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
    if (err.empty()) err = "exit status " + std::to_string(rc) + " (is node installed?)";
    return makeError("onnxruntime reference failed: ", err);
  }
  std::vector<std::string> files = manifestFiles(readText(outDir / "manifest.json"));
  size_t own = graph.outputs().size();
  if (files.size() != own + added.size())
    return makeError("onnxruntime reference: ", files.size(), " outputs in ",
                     (outDir / "manifest.json").string(), ", expected ", own + added.size());
  std::vector<RtValue> outputs;
  for (size_t i = 0; i < files.size(); ++i) {
    fs::path file = outDir / files[i];
    KILN_ASSIGN_OR_RETURN(Tensor t, readNpy(file.string()));
    fs::remove(file); // keep the scratch folder small on big models
    if (i < own)
      outputs.emplace_back(std::move(t));
    else
      sink(added[i - own], RtValue(std::move(t)));
  }
  return outputs;
}

} // namespace kiln::verify
