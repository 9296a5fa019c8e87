#include "verify/verify.h"

#include "backend/vulkan/vulkan_model.h"

#include "package/package.h"
#include "runtime/api/model.h"

#include <chrono>
#include <filesystem>
#include <unordered_map>

namespace kiln::verify {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string describeOp(const Node &n) {
  std::string op(n.schema().name);
  if (n.op() == OpKind::Fused) op += "(" + n.getString("kind") + ")";
  return op;
}

// The source-model nodes a target node computes: a fused group's body
// (recursively), else the node itself.
void sourceNodesOf(const Node &n, std::vector<std::string> &out) {
  if (n.op() != OpKind::Fused) {
    out.push_back(n.name());
    return;
  }
  for (const auto &inner : n.getGraph("body")->nodes())
    if (inner->op() != OpKind::Constant) sourceNodesOf(*inner, out);
}

ValueResult compareValues(const std::string &name, const RtValue &got, const RtValue &ref,
                          const VerifyOptions &options) {
  ValueResult r;
  r.name = name;
  if (got.isTensor()) {
    r.dtype = std::string(dtypeName(got.tensor.dtype()));
    r.shape = got.tensor.shape();
  }
  if (ref.isTensor()) r.refShape = ref.tensor.shape();
  if (!got.isTensor() || !ref.isTensor()) {
    r.metrics.error = "cannot compare " + got.describe() + " with reference " + ref.describe();
    return r;
  }
  r.tol = toleranceFor(ref.tensor.dtype(), options);
  r.metrics = compareTensors(got.tensor, ref.tensor, r.tol);
  return r;
}

// Every value a top-level, non-Constant node of `g` produces, in node order.
std::vector<std::string> producedValues(const Graph &g) {
  std::vector<std::string> names;
  for (const auto &n : g.nodes())
    if (n->op() != OpKind::Constant)
      for (const Value *v : n->outputs())
        if (v) names.push_back(v->name());
  return names;
}

} // namespace

Tolerance toleranceFor(DType dtype, const VerifyOptions &options) {
  Tolerance t = defaultTolerance(dtype);
  if (isFloat(dtype)) {
    if (options.rtol) t.rtol = *options.rtol;
    if (options.atol) t.atol = *options.atol;
  }
  return t;
}

Expected<VerifyResult> verifyModel(Model targetModel, Model referenceModel,
                                   std::vector<RtValue> inputs, const VerifyOptions &options) {
  VerifyResult result;
  result.model = options.modelPath;
  result.target = options.target;
  result.reference = options.reference;
  result.rtol = options.rtol;
  result.atol = options.atol;
  const bool layers = options.bisect || options.allLayers;
  const size_t numOutputs = referenceModel.graph->outputs().size();

  // 1. The target. Its intermediates are kept by name until the reference
  // streams the same value past.
  std::vector<RtValue> targetOutputs;
  std::unordered_map<std::string, RtValue> pending;
  std::vector<std::string> pendingOrder;
  Model compiledGraph;
  const Graph *targetGraph = targetModel.graph.get();
  auto t0 = Clock::now();
  if (options.target == "cpu") {
    // What `kiln compile` would store, loaded and run by the runtime.
    package::PackageOptions po;
    po.optLevel = options.compile.optLevel;
    po.cpu = options.compile.cpu;
    po.perturbNode = options.compile.perturbNode;
    po.exposeIntermediates = layers;
    KILN_ASSIGN_OR_RETURN(auto compiled, package::compileForArtifact(std::move(targetModel), po));
    KILN_ASSIGN_OR_RETURN(std::string bytes, package::packageCompiled(*compiled, po));
    compiledGraph = compiled->releaseModel();
    targetGraph = compiledGraph.graph.get();
    auto loaded = rt::LoadedModel::fromMemory(bytes.data(), bytes.size());
    if (loaded.error) return makeError(loaded.error->message);
    rt::Session session(*loaded.value, options.threads);
    KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs, session.run(inputs));
    const std::vector<Value *> &names = targetGraph->outputs();
    if (outs.size() < numOutputs || names.size() != outs.size())
      return makeError("the compiled model returned ", outs.size(), " outputs, expected ",
                       numOutputs);
    for (size_t i = 0; i < outs.size(); ++i) {
      if (i < numOutputs) {
        targetOutputs.push_back(std::move(outs[i]));
      } else if (pending.emplace(names[i]->name(), std::move(outs[i])).second) {
        pendingOrder.push_back(names[i]->name());
      }
    }
  } else if (options.target == "interp") {
    std::unordered_set<std::string> wanted;
    if (layers)
      for (const std::string &n : producedValues(*targetGraph)) wanted.insert(n);
    KILN_ASSIGN_OR_RETURN(targetOutputs,
                          runInterpreter(*targetGraph, inputs, false, wanted,
                                         [&](const std::string &name, const RtValue &v) {
                                           if (pending.emplace(name, v).second)
                                             pendingOrder.push_back(name);
                                         }));
  } else if (options.target == "vulkan") {
    // The model's outputs only: the vulkan target does not expose
    // intermediates yet, so per-layer bisection is for cpu and interp.
    if (layers) return Error{"--bisect and --all-layers need --target cpu or interp"};
    KILN_ASSIGN_OR_RETURN(auto vk, vulkan::VulkanModel::compile(std::move(targetModel), "",
                                                                options.compile.optLevel));
    KILN_ASSIGN_OR_RETURN(targetOutputs, vk->run(inputs));
  } else {
    return makeError("unknown target '", options.target, "' (available: cpu, interp, vulkan)");
  }
  result.targetMs = msSince(t0);

  // 2. The reference, comparing each intermediate as it arrives.
  std::unordered_map<std::string, ValueResult> compared;
  ValueSink sink = [&](const std::string &name, const RtValue &ref) {
    auto it = pending.find(name);
    if (it == pending.end()) return;
    compared.emplace(name, compareValues(name, it->second, ref, options));
    pending.erase(it);
  };
  std::unordered_set<std::string> wanted(pendingOrder.begin(), pendingOrder.end());
  std::vector<RtValue> refOutputs;
  t0 = Clock::now();
  if (options.reference == "interp" || options.reference == "interp-f64") {
    KILN_ASSIGN_OR_RETURN(refOutputs,
                          runInterpreter(*referenceModel.graph, inputs,
                                         options.reference == "interp-f64", wanted, sink));
  } else if (options.reference == "ort") {
    KILN_ASSIGN_OR_RETURN(refOutputs, runOrt(options.modelPath, *referenceModel.graph, inputs,
                                             pendingOrder, options.ort, sink));
  } else {
    return makeError("unknown reference '", options.reference,
                     "' (available: interp, interp-f64, ort)");
  }
  result.referenceMs = msSince(t0);
  if (refOutputs.size() != numOutputs)
    return makeError("the reference returned ", refOutputs.size(), " outputs, expected ",
                     numOutputs);

  // 3. Outputs, then layers.
  result.pass = true;
  for (size_t i = 0; i < numOutputs; ++i) {
    result.outputs.push_back(compareValues(referenceModel.graph->outputs()[i]->name(),
                                           targetOutputs[i], refOutputs[i], options));
    result.pass &= result.outputs.back().metrics.pass;
  }
  if (options.allLayers || (options.bisect && !result.pass)) {
    // The model's outputs are layers too: the nodes that make them belong in
    // the walk (a fault in the last node shows only there).
    for (size_t i = 0; i < numOutputs; ++i)
      compared.emplace(targetGraph->outputs()[i]->name(), result.outputs[i]);
    result.bisect = bisect(*targetGraph, compared);
    result.bisect.valuesNotCompared = static_cast<int>(pending.size());
  } else if (options.bisect) {
    result.bisect.note = "every output passes: no per-layer search (--all-layers shows the table)";
  }
  return result;
}

BisectResult bisect(const Graph &targetGraph,
                    const std::unordered_map<std::string, ValueResult> &compared) {
  BisectResult r;
  r.ran = true;
  for (const auto &n : targetGraph.nodes()) {
    if (n->op() == OpKind::Constant) continue;
    Layer base;
    base.node = n->name();
    base.op = describeOp(*n);
    sourceNodesOf(*n, base.sourceNodes);
    for (const Value *in : n->inputs()) {
      if (!in || !in->producer() || constantOf(in)) continue; // graph inputs and weights agree
      auto it = compared.find(in->name());
      if (it == compared.end())
        base.uncheckedInputs.push_back(in->name());
      else if (!it->second.metrics.pass)
        base.badInputs.push_back(in->name());
    }
    base.inputsAgree = base.badInputs.empty();
    for (const Value *v : n->outputs()) {
      auto it = v ? compared.find(v->name()) : compared.end();
      if (it == compared.end()) continue;
      Layer row = base;
      row.value = it->second;
      if (r.firstDivergence < 0 && !row.value.metrics.pass && row.inputsAgree)
        r.firstDivergence = static_cast<int>(r.layers.size());
      r.layers.push_back(std::move(row));
    }
  }
  if (r.layers.empty()) r.note = "no intermediate value exists in both runs";
  return r;
}

} // namespace kiln::verify
