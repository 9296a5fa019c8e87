#include "lower/elementwise.h"

#include "lower/elementwise_ops.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::lower {

namespace {

// Step 1: for output dim k, does an input of shape `in` (right-aligned)
// vary along it? An input dim that is statically 1 broadcasts; any other
// dim is taken to vary with the output. When either dim is unknown that is
// a speculation, which the executor checks on every run (checkShapes) and
// answers with the interpreter when it fails.
bool variesAlong(const Shape &in, const Shape &out, int k) {
  const int offset = out.rank() - in.rank();
  if (k < offset) return false;
  const Dim &d = in.dims[k - offset];
  return !(d.isStatic() && d.value() == 1);
}

} // namespace

bool compatibleShapes(const Shape &a, const Shape &b) {
  if (!a.rankKnown || !b.rankKnown || a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i) {
    const Dim &x = a.dims[i], &y = b.dims[i];
    if (x.isUnknown() || y.isUnknown()) continue;
    if (!(x == y)) return false;
  }
  return true;
}

Expected<ElementwiseKernel> lowerElementwise(const ElementwiseGroup &group, const std::string &name,
                                             int vectorWidth) {
  if (group.outputs.empty()) return makeError("elementwise group without outputs");
  const Shape &out = group.outputs[0]->type().shape();
  for (const Value *o : group.outputs)
    if (!compatibleShapes(o->type().shape(), out))
      return makeError("elementwise group outputs differ in shape");
  for (const Node *n : group.nodes)
    if (!canLowerElementwise(*n))
      return makeError(n->describe(), ": no elementwise lowering");

  ElementwiseKernel ek;
  ek.launch.outRank = out.rank();
  ek.launch.numOutputs = group.outputs.size();

  // Steps 1-2: classify, drop static-1 dims, merge equal patterns.
  std::vector<std::vector<bool>> pattern(group.inputs.size());
  std::vector<int> kept;
  for (int k = 0; k < out.rank(); ++k) {
    if (out.dims[k].isStatic() && out.dims[k].value() == 1) continue;
    kept.push_back(k);
  }
  for (size_t j = 0; j < group.inputs.size(); ++j) {
    const Type &t = group.inputs[j]->type();
    if (!t.isTensor() || !t.shape().rankKnown || t.shape().rank() > out.rank())
      return makeError("input '", group.inputs[j]->name(), "' cannot broadcast statically");
    for (int k : kept) pattern[j].push_back(variesAlong(t.shape(), out, k));
  }
  ek.launch.full.assign(group.inputs.size(), {});
  for (size_t i = 0; i < kept.size(); ++i) {
    bool merge = !ek.launch.loopDims.empty();
    for (size_t j = 0; merge && j < group.inputs.size(); ++j)
      merge = pattern[j][i] == pattern[j][i - 1];
    if (merge) {
      ek.launch.loopDims.back().push_back(kept[i]);
    } else {
      ek.launch.loopDims.push_back({kept[i]});
      for (size_t j = 0; j < group.inputs.size(); ++j) ek.launch.full[j].push_back(pattern[j][i]);
    }
  }
  if (ek.launch.loopDims.empty()) { // a scalar output: one loop of extent 1
    ek.launch.loopDims.push_back({});
    for (auto &f : ek.launch.full) f.push_back(false);
  }
  for (const auto &f : ek.launch.full)
    ek.launch.kernelFull.push_back(ek.launch.flat() ? std::vector<bool>{f[0], f[0]} : f);

  // Step 3: buffers, params, loops.
  kir::KernelBuilder b(name);
  for (size_t j = 0; j < group.inputs.size(); ++j)
    b.addBuffer("in" + std::to_string(j), group.inputs[j]->type().dtype(), false);
  for (size_t o = 0; o < group.outputs.size(); ++o)
    b.addBuffer("out" + std::to_string(o), group.outputs[o]->type().dtype(), true);
  const size_t nl = ek.launch.flat() ? 2 : ek.launch.loopDims.size();
  std::vector<int> extentParams;
  for (size_t k = 0; k < nl; ++k) extentParams.push_back(b.addParam("n" + std::to_string(k)));
  std::vector<std::vector<int>> strideParams(group.inputs.size() + group.outputs.size(),
                                             std::vector<int>(nl, -1));
  for (size_t j = 0; j < group.inputs.size(); ++j)
    for (size_t k = 0; k + 1 < nl; ++k)
      if (ek.launch.kernelFull[j][k])
        strideParams[j][k] = b.addParam("s" + std::to_string(j) + "_" + std::to_string(k));
  for (size_t o = 0; o < group.outputs.size(); ++o)
    for (size_t k = 0; k + 1 < nl; ++k)
      strideParams[group.inputs.size() + o][k] =
          b.addParam("o" + std::to_string(o) + "_" + std::to_string(k));

  std::vector<int> loopVars;
  for (size_t k = 0; k < nl; ++k) {
    kir::Schedule sched;
    if (k + 1 == nl) sched = {kir::Schedule::Kind::Vector, vectorWidth};
    else if (k == 0) sched = {kir::Schedule::Kind::Parallel, 1};
    loopVars.push_back(b.beginLoop(kir::Affine::param(extentParams[k]), sched));
  }
  auto indexOf = [&](size_t buffer, bool fullInner) {
    kir::Affine a;
    for (size_t k = 0; k + 1 < nl; ++k)
      if (strideParams[buffer][k] >= 0) a.add(1, strideParams[buffer][k], loopVars[k]);
    if (fullInner) a.add(1, -1, loopVars[nl - 1]);
    return a;
  };

  // Step 4: the body (and the shape program of shapesHold).
  std::unordered_map<const Value *, int> valueIndex;
  for (size_t j = 0; j < group.inputs.size(); ++j) valueIndex[group.inputs[j]] = int(j);
  for (const Node *n : group.nodes) {
    std::vector<int> operands;
    for (const Value *v : n->inputs()) {
      if (!v) continue;
      auto it = valueIndex.find(v);
      if (it == valueIndex.end())
        return makeError(n->describe(), ": input '", v->name(), "' is not in the group");
      operands.push_back(it->second);
    }
    ek.launch.nodeOperands.push_back(std::move(operands));
    const int index = static_cast<int>(valueIndex.size());
    valueIndex[n->output(0)] = index;
  }
  for (const Value *o : group.outputs) {
    auto it = valueIndex.find(o);
    if (it == valueIndex.end()) return makeError("group output '", o->name(), "' is not computed");
    ek.launch.outputValues.push_back(it->second);
  }
  std::unordered_map<const Value *, int> ssa;
  for (size_t j = 0; j < group.inputs.size(); ++j)
    ssa[group.inputs[j]] = b.load(static_cast<int>(j), indexOf(j, ek.launch.kernelFull[j][nl - 1]));
  for (const Node *n : group.nodes) {
    std::vector<int> operands;
    for (const Value *v : n->inputs()) {
      if (!v) {
        operands.push_back(-1);
        continue;
      }
      auto it = ssa.find(v);
      if (it == ssa.end())
        return makeError(n->describe(), ": input '", v->name(), "' is not in the group");
      operands.push_back(it->second);
    }
    KILN_ASSIGN_OR_RETURN(int r, emitElementwise(b, *n, operands));
    ssa[n->output(0)] = r;
  }
  for (size_t o = 0; o < group.outputs.size(); ++o) {
    auto it = ssa.find(group.outputs[o]);
    if (it == ssa.end())
      return makeError("group output '", group.outputs[o]->name(), "' is not computed");
    const size_t buffer = group.inputs.size() + o;
    b.store(static_cast<int>(buffer), indexOf(buffer, true), it->second);
  }
  for (size_t k = 0; k < nl; ++k) b.endLoop();
  ek.kernel = b.finish();
  ek.launch.symbol = ek.kernel.name;
  return ek;
}

} // namespace kiln::lower
