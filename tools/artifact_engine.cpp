#include "artifact_engine.h"

#include "runtime/api/model.h"

#include <fstream>

namespace kiln::cli {

namespace {

class ArtifactEngine : public Engine {
public:
  // `graph`: the graph the artifact computes, when known (compiled in this
  // process); else a stand-in declaring its inputs and outputs is built.
  ArtifactEngine(std::unique_ptr<rt::LoadedModel> model, int threads,
                 std::optional<Model> graph = std::nullopt, std::string summary = "")
      : model_(std::move(model)), session_(*model_, threads), compiled_(std::move(graph)),
        summary_(std::move(summary)) {
    if (compiled_) return;
    // A stand-in graph declaring the inputs and outputs (outputs through one
    // node, which reads nothing).
    for (const artifact::TensorInfo &t : model_->manifest().inputs)
      graph_.addInput(t.name, typeOf(t));
    const auto &outs = model_->manifest().outputs;
    if (!outs.empty()) {
      Node *n = graph_.addNode(OpKind::Identity, {}, int(outs.size()));
      for (size_t i = 0; i < outs.size(); ++i) {
        n->output(int(i))->setName(outs[i].name);
        n->output(int(i))->setType(typeOf(outs[i]));
        graph_.addOutput(n->output(int(i)));
      }
    }
  }

  Expected<std::vector<RtValue>> run(std::vector<RtValue> inputs) override {
    return session_.run(std::move(inputs));
  }
  const Graph &graph() const override { return compiled_ ? *compiled_->graph : graph_; }
  std::string summary() const override { return summary_.empty() ? model_->describe() : summary_; }
  void setProfiling(bool on) override { session_.setProfiling(on); }
  std::string profileReport() const override { return session_.profileReport(); }
  std::string memoryReport() const override {
    rt::Session::MemoryReport r = session_.memoryReport();
    return strCat(r.arenaBytes, " bytes planned with buffer reuse (", r.naiveBytes,
                  " bytes without)");
  }

private:
  static Type typeOf(const artifact::TensorInfo &t) {
    std::vector<Dim> dims;
    for (size_t i = 0; i < t.dims.size(); ++i)
      dims.push_back(t.dims[i] >= 0 ? Dim(t.dims[i])
                     : t.dimNames[i].empty() ? Dim::unknown() : Dim::symbol(t.dimNames[i]));
    Type type = Type::tensor(t.dtype, t.rankKnown ? Shape(std::move(dims)) : Shape::unranked());
    for (auto c = t.containers.rbegin(); c != t.containers.rend(); ++c)
      type = *c == artifact::ContainerKind::Sequence ? Type::sequence(type) : Type::optional(type);
    return type;
  }
  std::unique_ptr<rt::LoadedModel> model_;
  rt::Session session_;
  std::optional<Model> compiled_;
  std::string summary_;
  Graph graph_;
};

} // namespace

bool isArtifactFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  f.read(magic, sizeof magic);
  return f.gcount() == 8 && std::string(magic, 7) == "KILNART";
}

Expected<std::unique_ptr<Engine>> openArtifactEngine(const std::string &path, int threads) {
  auto loaded = rt::LoadedModel::openFile(path);
  if (loaded.error) return makeError(loaded.error->message);
  return std::unique_ptr<Engine>(new ArtifactEngine(std::move(loaded.value), threads));
}

Expected<std::unique_ptr<Engine>> openArtifactEngineFromMemory(const std::string &bytes,
                                                               int threads,
                                                               std::optional<Model> graph,
                                                               std::string summary) {
  auto loaded = rt::LoadedModel::fromMemory(bytes.data(), bytes.size());
  if (loaded.error) return makeError(loaded.error->message);
  return std::unique_ptr<Engine>(new ArtifactEngine(std::move(loaded.value), threads,
                                                    std::move(graph), std::move(summary)));
}

} // namespace kiln::cli
