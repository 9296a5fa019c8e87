#include "interp/interpreter.h"

#include <new>
#include <stdexcept>
#include <unordered_set>

namespace kiln {

const RtValue *Environment::lookup(const Value *v) const {
  for (const Environment *e = this; e; e = e->parent_) {
    auto it = e->values_.find(v);
    if (it != e->values_.end()) return &it->second;
  }
  return nullptr;
}

Status checkInputAgainstType(const Value &input, const RtValue &value,
                             std::unordered_map<std::string, int64_t> &bindings) {
  const Type &type = input.type();
  if (type.kind() == Type::Kind::Optional) return Status::success();
  if (type.kind() == Type::Kind::Sequence) {
    if (!value.isSequence())
      return makeError("input '", input.name(), "' expects a sequence, got ", value.describe());
    return Status::success();
  }
  if (!value.isTensor())
    return makeError("input '", input.name(), "' expects a tensor, got ", value.describe());
  const Tensor &t = value.tensor;
  if (t.dtype() != type.dtype())
    return makeError("input '", input.name(), "' expects dtype ", dtypeName(type.dtype()), ", got ",
                     dtypeName(t.dtype()));
  const Shape &shape = type.shape();
  if (!shape.rankKnown) return Status::success();
  if (t.rank() != shape.rank())
    return makeError("input '", input.name(), "' expects shape ", shape.str(), " (rank ",
                     shape.rank(), "), got ", shapeToString(t.shape()));
  for (int64_t i = 0; i < t.rank(); ++i) {
    const Dim &d = shape.dims[i];
    if (d.isStatic() && d.value() != t.dim(i))
      return makeError("input '", input.name(), "' expects shape ", shape.str(), ", got ",
                       shapeToString(t.shape()), " (dim ", i, ")");
    if (d.isSymbol()) {
      auto [it, inserted] = bindings.emplace(d.symbolName(), t.dim(i));
      if (!inserted && it->second != t.dim(i))
        return makeError("input '", input.name(), "' dim ", i, " is symbol '", d.symbolName(),
                         "' = ", t.dim(i), ", but another input bound it to ", it->second);
    }
  }
  return Status::success();
}

Expected<std::vector<RtValue>> Interpreter::run(const Graph &graph, std::vector<RtValue> inputs) {
  if (inputs.size() != graph.inputs().size())
    return makeError("graph '", graph.name(), "' takes ", graph.inputs().size(), " inputs, got ",
                     inputs.size());
  std::unordered_map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size(); ++i)
    KILN_RETURN_IF_ERROR(checkInputAgainstType(*graph.inputs()[i], inputs[i], bindings));
  return runGraph(graph, std::move(inputs), nullptr, true);
}

Expected<std::vector<RtValue>> Interpreter::runRegion(const Graph &region,
                                                      std::vector<RtValue> inputs,
                                                      const Environment &outer) {
  if (inputs.size() != region.inputs().size())
    return makeError("region '", region.name(), "' takes ", region.inputs().size(),
                     " inputs, got ", inputs.size());
  return runGraph(region, std::move(inputs), &outer, false);
}

namespace {

// The values each node of `graph` reads: its inputs, plus whatever its
// regions read (including their outputs), so values can be freed after their
// last reader.
std::vector<std::vector<const Value *>> valuesReadPerNode(const Graph &graph) {
  std::vector<std::vector<const Value *>> result;
  for (auto &n : graph.nodes()) {
    std::unordered_set<const Value *> read;
    for (Value *v : n->inputs())
      if (v) read.insert(v);
    std::vector<Graph *> regions = n->regions();
    std::vector<const Graph *> stack(regions.begin(), regions.end());
    while (!stack.empty()) {
      const Graph *r = stack.back();
      stack.pop_back();
      for (Value *o : r->outputs()) read.insert(o);
      for (auto &inner : r->nodes()) {
        for (Value *v : inner->inputs())
          if (v) read.insert(v);
        for (Graph *rr : inner->regions()) stack.push_back(rr);
      }
    }
    result.emplace_back(read.begin(), read.end());
  }
  return result;
}

// Runs one kernel; allocation failures (a tensor too large for its shape, or
// for memory) become errors naming the node instead of escaping this layer.
Status runKernel(KernelFn fn, KernelContext &ctx) {
  try {
    return fn(ctx);
  } catch (const std::bad_alloc &) {
    return ctx.error("out of memory");
  } catch (const std::length_error &e) {
    return ctx.error(e.what());
  }
}

// Ops whose inputs may be sequences or optionals; every other op's kernel
// reads its inputs as tensors.
bool takesNonTensorInputs(OpKind op) {
  switch (op) {
  case OpKind::Identity:
  case OpKind::If:
  case OpKind::Fused:
  case OpKind::Loop:
  case OpKind::Scan:
  case OpKind::SequenceMap:
  case OpKind::SequenceAt:
  case OpKind::SequenceInsert:
  case OpKind::SequenceErase:
  case OpKind::SequenceLength:
  case OpKind::ConcatFromSequence:
  case OpKind::Optional:
  case OpKind::OptionalHasElement:
  case OpKind::OptionalGetElement:
    return true;
  default:
    return false;
  }
}

} // namespace

Expected<std::vector<RtValue>> Interpreter::runGraph(const Graph &graph,
                                                     std::vector<RtValue> inputs,
                                                     const Environment *outer, bool topLevel) {
  Environment env(outer);
  for (size_t i = 0; i < inputs.size(); ++i) env.set(graph.inputs()[i], std::move(inputs[i]));

  const std::vector<std::vector<const Value *>> readBy = valuesReadPerNode(graph);
  std::unordered_map<const Value *, int> uses;
  for (auto &read : readBy)
    for (const Value *v : read) ++uses[v];
  std::unordered_set<const Value *> keep(graph.outputs().begin(), graph.outputs().end());
  const KernelTable &table = kernelTable();

  for (size_t nodeIndex = 0; nodeIndex < graph.nodes().size(); ++nodeIndex) {
    const Node &node = *graph.nodes()[nodeIndex];
    KernelFn fn = table.find(node.op());
    if (!fn) return makeError(node.describe(), ": no interpreter kernel for this op");

    std::vector<const RtValue *> args;
    args.reserve(node.inputs().size());
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      Value *v = node.inputs()[i];
      if (!v) {
        args.push_back(nullptr);
        continue;
      }
      const RtValue *rv = env.lookup(v);
      if (!rv)
        return makeError(node.describe(), ": input ", i, " ('", v->name(),
                         "') has no value (read before it is defined)");
      // Kernels read tensor inputs with ctx.in(i): a sequence or optional
      // reaching an op that takes only tensors is an error, not a crash.
      if (!rv->isTensor() && !takesNonTensorInputs(node.op()))
        return makeError(node.describe(), ": input ", i, " ('", v->name(), "') is a ",
                         rv->describe(), ", expected a tensor");
      args.push_back(rv);
    }

    KernelContext ctx(node, std::move(args), *this, options_, env);
    if (Status s = runKernel(fn, ctx); !s.ok()) return s.error();
    std::vector<RtValue> outs = ctx.takeOutputs();
    if (topLevel && observer_) observer_(node, outs);
    for (size_t i = 0; i < outs.size(); ++i)
      if (Value *o = node.outputs()[i]) env.set(o, std::move(outs[i]));

    // Free what no later node reads.
    for (const Value *v : readBy[nodeIndex]) {
      auto it = uses.find(v);
      if (it != uses.end() && --it->second == 0 && !keep.count(v) && v->owner() == &graph)
        env.erase(v);
    }
  }

  std::vector<RtValue> results;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const Value *o = graph.outputs()[i];
    const RtValue *rv = env.lookup(o);
    if (!rv) return makeError("graph '", graph.name(), "' output '", o->name(), "' has no value");
    results.push_back(*rv);
  }
  return results;
}

} // namespace kiln
