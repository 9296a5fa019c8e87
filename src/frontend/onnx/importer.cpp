#include "frontend/onnx/importer.h"

#include "frontend/onnx/legalize.h"
#include "frontend/onnx/proto_convert.h"
#include "ir/infer/infer.h"
#include "ir/verifier.h"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

using namespace onnx_import;

namespace {

// Deepest nesting of regions accepted (real models use a handful).
constexpr int kMaxRegionDepth = 32;

// Names visible while importing one graph: its own values, then its parents'.
struct Scope {
  const Scope *parent = nullptr;
  std::unordered_map<std::string, Value *> names;

  Value *find(const std::string &n) const {
    for (const Scope *s = this; s; s = s->parent) {
      auto it = s->names.find(n);
      if (it != s->names.end()) return it->second;
    }
    return nullptr;
  }
};

class Importer {
public:
  Importer(const onnx::ModelProto &model, std::string baseDir)
      : model_(model), source_{std::move(baseDir)} {}

  Expected<Model> run();

private:
  Status checkOpsets();
  Status checkAllOpsSupported();
  Status importGraph(const onnx::GraphProto &gp, Graph &g, Scope &scope, bool topLevel, int depth);
  Expected<std::vector<int>> nodeOrder(const onnx::GraphProto &gp, const Scope &scope);
  Status importNode(const onnx::NodeProto &np, Graph &g, Scope &scope, int depth);
  Expected<Attribute> convertAttribute(const onnx::AttributeProto &ap, const std::string &where,
                                       Graph &g, Scope &scope, int depth);
  int64_t opsetOf(const std::string &domain) const {
    auto it = opsets_.find(domain.empty() ? "" : domain == "ai.onnx" ? "" : domain);
    return it == opsets_.end() ? 0 : it->second;
  }

  const onnx::ModelProto &model_;
  TensorSource source_;
  std::map<std::string, int64_t> opsets_;
};

Status Importer::checkOpsets() {
  for (const auto &o : model_.opset_import()) {
    std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    opsets_[domain] = o.version();
  }
  // Unsupported ops first: a model of only foreign-domain ops should hear
  // about its ops, not about the missing default opset.
  KILN_RETURN_IF_ERROR(checkAllOpsSupported());
  auto it = opsets_.find("");
  if (it == opsets_.end()) return makeError("model declares no opset for the default ONNX domain");
  if (it->second < kMinOnnxOpset || it->second > kMaxOnnxOpset)
    return makeError("model uses ONNX opset ", it->second, "; kiln supports opsets ",
                     kMinOnnxOpset, " to ", kMaxOnnxOpset);
  return Status::success();
}

// Lists every node, in the main graph and in regions, whose op kiln lacks.
Status Importer::checkAllOpsSupported() {
  std::vector<std::string> missing;
  std::function<void(const onnx::GraphProto &)> scan = [&](const onnx::GraphProto &gp) {
    for (const auto &n : gp.node()) {
      if (!isSupportedOnnxOp(n.domain(), n.op_type())) {
        std::string domain = n.domain().empty() ? "ai.onnx" : n.domain();
        missing.push_back(strCat("node '", n.name(), "' (", domain, ":", n.op_type(), ", opset ",
                                 opsetOf(n.domain()), ")"));
      }
      for (const auto &a : n.attribute()) {
        if (a.has_g()) scan(a.g());
        for (const auto &g : a.graphs()) scan(g);
      }
    }
  };
  scan(model_.graph());
  if (missing.empty()) return Status::success();
  std::string msg = strCat(missing.size(), " node", missing.size() == 1 ? "" : "s",
                           " use unsupported ops:");
  for (const auto &m : missing) msg += "\n  " + m;
  return Error{msg};
}

Expected<Model> Importer::run() {
  KILN_RETURN_IF_ERROR(checkOpsets());
  Model m;
  m.opsets = opsets_;
  m.producer = model_.producer_name();
  if (!model_.producer_version().empty()) m.producer += " " + model_.producer_version();
  m.graph->setName(model_.graph().name().empty() ? "main" : model_.graph().name());
  Scope scope;
  KILN_RETURN_IF_ERROR(importGraph(model_.graph(), *m.graph, scope, true, 0));
  KILN_RETURN_IF_ERROR(verifyModel(m));
  return m;
}

// Every name a region reads, at any depth (its free variables, plus names it
// defines itself, which are harmless: they are filtered against producers).
void collectReads(const onnx::GraphProto &gp, std::unordered_set<std::string> &out) {
  for (const auto &n : gp.node()) {
    for (const auto &i : n.input()) out.insert(i);
    for (const auto &a : n.attribute()) {
      if (a.has_g()) collectReads(a.g(), out);
      for (const auto &g : a.graphs()) collectReads(g, out);
    }
  }
  for (const auto &o : gp.output()) out.insert(o.name());
}

// Dependency order of the graph's nodes (files need not list them sorted).
Expected<std::vector<int>> Importer::nodeOrder(const onnx::GraphProto &gp, const Scope &scope) {
  int n = gp.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto &o : gp.node(i).output()) {
      if (o.empty()) continue;
      if (!producer.emplace(o, i).second)
        return makeError("value '", o, "' is produced by two nodes ('", gp.node(producer[o]).name(),
                         "' and '", gp.node(i).name(), "')");
    }
  std::vector<std::vector<int>> deps(n);
  for (int i = 0; i < n; ++i) {
    std::unordered_set<std::string> reads(gp.node(i).input().begin(), gp.node(i).input().end());
    for (const auto &a : gp.node(i).attribute()) {
      if (a.has_g()) collectReads(a.g(), reads);
      for (const auto &g : a.graphs()) collectReads(g, reads);
    }
    for (const auto &r : reads) {
      auto it = producer.find(r);
      if (it != producer.end() && it->second != i) deps[i].push_back(it->second);
    }
  }
  std::vector<int> order, state(n, 0);
  std::vector<std::pair<int, size_t>> stack;
  for (int root = 0; root < n; ++root) {
    if (state[root]) continue;
    stack.push_back({root, 0});
    state[root] = 1;
    while (!stack.empty()) {
      auto &[v, pos] = stack.back();
      if (pos < deps[v].size()) {
        int d = deps[v][pos++];
        if (state[d] == 1)
          return makeError("graph '", gp.name(), "' has a cycle through node '", gp.node(d).name(),
                           "' (", gp.node(d).op_type(), ")");
        if (state[d] == 0) {
          state[d] = 1;
          stack.push_back({d, 0});
        }
        continue;
      }
      state[v] = 2;
      order.push_back(v);
      stack.pop_back();
    }
  }
  (void)scope;
  return order;
}

Status Importer::importGraph(const onnx::GraphProto &gp, Graph &g, Scope &scope, bool topLevel,
                             int depth) {
  if (depth > kMaxRegionDepth)
    return makeError("regions are nested more than ", kMaxRegionDepth, " deep");
  GraphBuilder builder(g);
  std::unordered_set<std::string> initializerNames;
  for (const auto &init : gp.initializer()) {
    auto t = convertTensor(init, source_);
    if (!t.ok()) return withContext("initializer '" + init.name() + "'", t.error());
    scope.names[init.name()] = builder.constant(std::move(*t), init.name());
    initializerNames.insert(init.name());
  }
  if (gp.sparse_initializer_size() > 0)
    return makeError("graph '", gp.name(), "': sparse initializers are not supported");

  for (const auto &in : gp.input()) {
    if (initializerNames.count(in.name())) continue; // a default value: treated as a weight
    Type type = Type::tensor(DType::F32, Shape::unranked());
    if (in.has_type()) {
      auto t = convertType(in.type(), topLevel ? in.name() : "");
      if (!t.ok()) return withContext("graph input '" + in.name() + "'", t.error());
      type = std::move(*t);
    } else if (topLevel) {
      return makeError("graph input '", in.name(), "' has no type");
    }
    scope.names[in.name()] = g.addInput(in.name(), std::move(type));
  }

  KILN_ASSIGN_OR_RETURN(std::vector<int> order, nodeOrder(gp, scope));
  for (int i : order) KILN_RETURN_IF_ERROR(importNode(gp.node(i), g, scope, depth));

  for (const auto &out : gp.output()) {
    Value *v = scope.find(out.name());
    if (!v) return makeError("graph '", gp.name(), "' output '", out.name(), "' is not defined");
    if (v->owner() != &g || std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end()) {
      // An output that is an outer value, or listed twice: pass it through an
      // Identity so each graph output is a value of its own graph.
      KILN_ASSIGN_OR_RETURN(Node * id, builder.emit(OpKind::Identity, {v}, {}, 1, out.name() + "/output"));
      id->output(0)->setName(out.name());
      v = id->output(0);
    }
    if (!v->type().shape().rankKnown && out.has_type()) {
      auto declared = convertType(out.type());
      // Only for tensors: a declared sequence's element shape is a claim
      // that exporters get wrong, and a wrong shape is worse than none.
      if (declared.ok() && declared->isTensor() && v->type().isTensor()) v->setType(*declared);
    }
    g.addOutput(v);
  }
  return Status::success();
}

Status Importer::importNode(const onnx::NodeProto &np, Graph &g, Scope &scope, int depth) {
  std::string where = strCat("node '", np.name(), "' (", np.op_type(), ")");
  NodeDraft d;
  d.opType = np.op_type();
  d.domain = np.domain();
  d.name = np.name();
  d.opset = opsetOf(np.domain());
  d.numOutputs = np.output_size();
  for (const auto &in : np.input()) {
    if (in.empty()) {
      d.inputs.push_back(nullptr);
      continue;
    }
    Value *v = scope.find(in);
    if (!v) return makeError(where, ": input '", in, "' is not defined");
    d.inputs.push_back(v);
  }
  for (const auto &ap : np.attribute()) {
    KILN_ASSIGN_OR_RETURN(Attribute a, convertAttribute(ap, where, g, scope, depth));
    d.attrs[ap.name()] = std::move(a);
  }

  // Opsets 1-5 marked in-place reuse with `consumed_inputs`, which carries no
  // meaning for inference.
  if (d.opset < 6) d.take("consumed_inputs");
  GraphBuilder builder(g);
  Legalizer rule = findLegalizer(d.opType);
  auto outs = rule ? rule(d, builder) : legalizeDirect(d, builder);
  if (!outs.ok()) return outs.error();
  if (static_cast<int>(outs->size()) < np.output_size())
    return makeError(where, ": legalization produced ", outs->size(), " outputs, expected ",
                     np.output_size());
  for (int i = 0; i < np.output_size(); ++i) {
    const std::string &name = np.output(i);
    Value *v = (*outs)[i];
    if (name.empty()) continue;
    v->setName(name);
    scope.names[name] = v;
  }
  return Status::success();
}

Expected<Attribute> Importer::convertAttribute(const onnx::AttributeProto &ap,
                                               const std::string &where, Graph &g, Scope &scope,
                                               int depth) {
  using AP = onnx::AttributeProto;
  auto ctx = [&](const Error &e) { return withContext(where + ": attribute '" + ap.name() + "'", e); };
  if (!ap.ref_attr_name().empty())
    return makeError(where, ": attribute '", ap.name(), "' refers to a function attribute (unsupported)");
  switch (ap.type()) {
  case AP::INT: return Attribute::ofInt(ap.i());
  case AP::FLOAT: return Attribute::ofFloat(ap.f());
  case AP::STRING: return Attribute::ofString(ap.s());
  case AP::INTS: return Attribute::ofInts({ap.ints().begin(), ap.ints().end()});
  case AP::FLOATS: return Attribute::ofFloats({ap.floats().begin(), ap.floats().end()});
  case AP::STRINGS: return Attribute::ofStrings({ap.strings().begin(), ap.strings().end()});
  case AP::TENSOR: {
    auto t = convertTensor(ap.t(), source_);
    if (!t.ok()) return ctx(t.error());
    return Attribute::ofTensor(std::move(*t));
  }
  case AP::TYPE_PROTO: {
    auto t = convertType(ap.tp());
    if (!t.ok()) return ctx(t.error());
    return Attribute::ofType(std::move(*t));
  }
  case AP::GRAPH: {
    auto region = std::make_shared<Graph>(ap.g().name().empty() ? ap.name() : ap.g().name(), &g);
    Scope inner;
    inner.parent = &scope;
    if (Status s = importGraph(ap.g(), *region, inner, false, depth + 1); !s.ok())
      return ctx(s.error());
    return Attribute::ofGraph(std::move(region));
  }
  default:
    return makeError(where, ": attribute '", ap.name(), "' has unsupported kind ",
                     AP::AttributeType_Name(ap.type()));
  }
}

} // namespace

Expected<Model> importOnnxBytes(const std::string &bytes, const std::string &baseDir,
                                const std::string &name) {
  onnx::ModelProto proto;
  if (bytes.empty()) return makeError(name, ": file is empty");
  if (!proto.ParseFromString(bytes))
    return makeError(name, ": not a valid ONNX model (protobuf parse failed; truncated or corrupt?)");
  if (!proto.has_graph()) return makeError(name, ": model has no graph");
  Importer importer(proto, baseDir);
  auto m = importer.run();
  if (!m.ok()) return withContext(name, m.error());
  return m;
}

Expected<Model> importOnnxFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(path, ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string dir = std::filesystem::path(path).parent_path().string();
  return importOnnxBytes(ss.str(), dir.empty() ? "." : dir, path);
}

} // namespace kiln
