// Tests of the ONNX importer on models built in memory with the protobuf API:
// ordering, scopes, opset legalization, external data, and errors.
#include "frontend/onnx/importer.h"
#include "interp/interpreter.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kiln {
namespace {

using onnx::ModelProto;
using onnx::NodeProto;

void setTensorType(onnx::ValueInfoProto *v, const std::string &name, int elemType,
                   std::vector<std::variant<int64_t, std::string>> dims) {
  v->set_name(name);
  auto *tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  auto *shape = tt->mutable_shape();
  for (auto &d : dims) {
    auto *dim = shape->add_dim();
    if (std::holds_alternative<int64_t>(d)) dim->set_dim_value(std::get<int64_t>(d));
    else if (!std::get<std::string>(d).empty()) dim->set_dim_param(std::get<std::string>(d));
  }
}

ModelProto newModel(int opset) {
  ModelProto m;
  m.set_ir_version(8);
  auto *o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

NodeProto *addNode(onnx::GraphProto *g, const std::string &op, std::vector<std::string> ins,
                   std::vector<std::string> outs, const std::string &name) {
  NodeProto *n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto &i : ins) n->add_input(i);
  for (auto &o : outs) n->add_output(o);
  return n;
}

void addInts(NodeProto *n, const std::string &name, std::vector<int64_t> v) {
  auto *a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void addFloatInitializer(onnx::GraphProto *g, const std::string &name, std::vector<int64_t> dims,
                         std::vector<float> values) {
  auto *t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

Expected<Model> importProto(const ModelProto &m, const std::string &dir = ".") {
  return importOnnxBytes(m.SerializeAsString(), dir, "test.onnx");
}

TEST(OnnxImporter, NodesListedOutOfOrderAreImportedInDependencyOrder) {
  ModelProto m = newModel(17);
  auto *g = m.mutable_graph();
  setTensorType(g->add_input(), "x", onnx::TensorProto::FLOAT, {2});
  addNode(g, "Neg", {"y"}, {"z"}, "second"); // reads y before it is produced
  addNode(g, "Abs", {"x"}, {"y"}, "first");
  setTensorType(g->add_output(), "z", onnx::TensorProto::FLOAT, {2});
  auto model = importProto(m);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const auto &nodes = model->graph->nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0]->name(), "first");
  EXPECT_EQ(nodes[1]->name(), "second");
}

TEST(OnnxImporter, EveryUnsupportedOpIsListedInOneError) {
  ModelProto m = newModel(17);
  auto *g = m.mutable_graph();
  setTensorType(g->add_input(), "x", onnx::TensorProto::FLOAT, {2});
  addNode(g, "FancyOp", {"x"}, {"a"}, "n1");
  NodeProto *ms = addNode(g, "FusedConv", {"a"}, {"b"}, "n2");
  ms->set_domain("com.microsoft");
  auto *o = m.add_opset_import();
  o->set_domain("com.microsoft");
  o->set_version(1);
  setTensorType(g->add_output(), "b", onnx::TensorProto::FLOAT, {2});
  auto model = importProto(m);
  ASSERT_FALSE(model.ok());
  const std::string &msg = model.error().message;
  EXPECT_NE(msg.find("2 nodes use unsupported ops"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'n1' (ai.onnx:FancyOp, opset 17)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'n2' (com.microsoft:FusedConv, opset 1)"), std::string::npos) << msg;
}

TEST(OnnxImporter, TruncatedAndCorruptFilesGiveErrorsNotCrashes) {
  ModelProto m = newModel(13);
  auto *g = m.mutable_graph();
  setTensorType(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 2});
  addFloatInitializer(g, "w", {2, 2}, {1, 2, 3, 4});
  addNode(g, "MatMul", {"x", "w"}, {"y"}, "mm");
  setTensorType(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 2});
  std::string bytes = m.SerializeAsString();
  ASSERT_TRUE(importOnnxBytes(bytes, ".", "m.onnx").ok());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    auto r = importOnnxBytes(bytes.substr(0, cut), ".", "m.onnx");
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("m.onnx"), std::string::npos);
    }
  }
  EXPECT_FALSE(importOnnxBytes("", ".", "m.onnx").ok());
  EXPECT_FALSE(importOnnxBytes("not a model at all", ".", "m.onnx").ok());
}

TEST(OnnxImporter, InitializerWithTooLittleDataIsRejected) {
  ModelProto m = newModel(13);
  auto *g = m.mutable_graph();
  addFloatInitializer(g, "w", {1000, 1000}, {1, 2, 3});
  setTensorType(g->add_output(), "w", onnx::TensorProto::FLOAT, {1000, 1000});
  auto model = importProto(m);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("initializer 'w'"), std::string::npos)
      << model.error().message;
}

TEST(OnnxImporter, OldOpsetReduceAxesAttributeBecomesAnInput) {
  ModelProto m = newModel(11);
  auto *g = m.mutable_graph();
  setTensorType(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  NodeProto *n = addNode(g, "ReduceSum", {"x"}, {"y"}, "sum");
  addInts(n, "axes", {1});
  setTensorType(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 1});
  auto model = importProto(m);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const Node *sum = model->graph->nodes().back().get();
  EXPECT_EQ(sum->op(), OpKind::ReduceSum);
  ASSERT_EQ(sum->numInputs(), 2);
  ASSERT_NE(sum->input(1)->producer(), nullptr);
  EXPECT_EQ(sum->input(1)->producer()->op(), OpKind::Constant);
  EXPECT_FALSE(sum->hasAttr("axes"));
}

TEST(OnnxImporter, AnonymousInputDimsBecomeNamedSymbols) {
  ModelProto m = newModel(17);
  auto *g = m.mutable_graph();
  setTensorType(g->add_input(), "input.1", onnx::TensorProto::FLOAT, {std::string("batch"), std::string(""), 3});
  addNode(g, "Relu", {"input.1"}, {"y"}, "relu");
  setTensorType(g->add_output(), "y", onnx::TensorProto::FLOAT, {});
  auto model = importProto(m);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ(model->graph->inputs()[0]->type().str(), "f32[batch,input_1_1,3]");
}

TEST(OnnxImporter, RegionsReadValuesOfTheEnclosingGraph) {
  ModelProto m = newModel(16);
  auto *g = m.mutable_graph();
  setTensorType(g->add_input(), "c", onnx::TensorProto::BOOL, {});
  setTensorType(g->add_input(), "x", onnx::TensorProto::FLOAT, {2});
  addNode(g, "Neg", {"x"}, {"nx"}, "neg");
  NodeProto *iff = addNode(g, "If", {"c"}, {"out"}, "if");
  for (const char *branch : {"then_branch", "else_branch"}) {
    auto *a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto *body = a->mutable_g();
    body->set_name(branch);
    addNode(body, std::string(branch) == "then_branch" ? "Abs" : "Relu", {"nx"}, {"r"}, "inner");
    setTensorType(body->add_output(), "r", onnx::TensorProto::FLOAT, {2});
  }
  setTensorType(g->add_output(), "out", onnx::TensorProto::FLOAT, {2});
  auto model = importProto(m);
  ASSERT_TRUE(model.ok()) << model.error().message;
  // The If must come after Neg, which its branches read.
  EXPECT_EQ(model->graph->nodes().back()->op(), OpKind::If);
}

TEST(OnnxImporter, ExternalDataIsReadFromTheModelDirectory) {
  auto dir = std::filesystem::temp_directory_path() / "kiln_external_data_test";
  std::filesystem::create_directories(dir);
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 4.0f};
  {
    std::ofstream out(dir / "weights.bin", std::ios::binary);
    out.write("PAD!", 4);
    out.write(reinterpret_cast<const char *>(values.data()), 16);
  }
  ModelProto m = newModel(17);
  auto *g = m.mutable_graph();
  auto *t = g->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char *k, const char *v) {
    auto *e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", "weights.bin");
  add("offset", "4");
  add("length", "16");
  setTensorType(g->add_output(), "w", onnx::TensorProto::FLOAT, {4});
  auto model = importProto(m, dir.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  Interpreter interp;
  auto outs = interp.run(*model->graph, {});
  ASSERT_TRUE(outs.ok()) << outs.error().message;
  const Tensor &w = (*outs)[0].tensor;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(w.data<float>()[i], values[i]);

  t->mutable_external_data(0)->set_value("../escape.bin");
  auto bad = importProto(m, dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("leaves the model's directory"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(OnnxImporter, OpsetsOutsideTheSupportedRangeAreRejected) {
  ModelProto m = newModel(30);
  setTensorType(m.mutable_graph()->add_input(), "x", onnx::TensorProto::FLOAT, {1});
  auto model = importProto(m);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("opset 30"), std::string::npos) << model.error().message;
}

TEST(OnnxImporter, UndefinedInputNamesTheNodeAndValue) {
  ModelProto m = newModel(17);
  auto *g = m.mutable_graph();
  addNode(g, "Relu", {"ghost"}, {"y"}, "relu1");
  setTensorType(g->add_output(), "y", onnx::TensorProto::FLOAT, {1});
  auto model = importProto(m);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("node 'relu1' (Relu): input 'ghost' is not defined"),
            std::string::npos)
      << model.error().message;
}

TEST(OnnxImporter, CyclesAreReported) {
  ModelProto m = newModel(17);
  auto *g = m.mutable_graph();
  addNode(g, "Relu", {"b"}, {"a"}, "n1");
  addNode(g, "Relu", {"a"}, {"b"}, "n2");
  setTensorType(g->add_output(), "a", onnx::TensorProto::FLOAT, {1});
  auto model = importProto(m);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("cycle"), std::string::npos) << model.error().message;
}

} // namespace
} // namespace kiln
