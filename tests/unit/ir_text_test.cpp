// Tests of the Graph IR's text form and verifier: the printer's canonical
// text, exact round trips of every attribute kind and element type, names
// and scopes across regions, parse errors with their positions, robustness
// against mangled text, the golden files under tests/lit/ir/, and one test
// per verifier rule.
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

namespace kiln {
namespace {

// ---- Helpers -------------------------------------------------------------------

Model parse(std::string_view text) {
  Expected<Model> m = parseModel(text, "test.kir");
  if (!m.ok()) {
    ADD_FAILURE() << "parse failed: " << m.error().message << "\n" << text;
    return Model();
  }
  return std::move(*m);
}

std::string parseError(std::string_view text) {
  Expected<Model> m = parseModel(text, "test.kir");
  if (m.ok()) return "(parsed without error)";
  return m.error().message;
}

std::string reprint(std::string_view text) {
  return printModel(parse(text));
}

std::string verifyError(const Model &m) {
  Status s = verifyModel(m);
  return s.ok() ? "(verified without error)" : s.message();
}

// Printing, parsing and printing again gives the same bytes.
void expectStablePrint(const Model &m) {
  std::string first = printModel(m);
  EXPECT_EQ(printModel(parse(first)), first);
}

Attribute onlyAttr(const Model &m, const std::string &name) {
  const Node &n = *m.graph->nodes().at(0);
  const Attribute *a = n.attr(name);
  return a ? *a : Attribute::ofString("<missing " + name + ">");
}

// A model with one input %x: f32[2] and one node `op(%x)` carrying `attrs`.
Model modelWithAttrs(OpKind op, std::map<std::string, Attribute> attrs) {
  Model m;
  Value *x = m.graph->addInput("x", Type::tensor(DType::F32, Shape({2})));
  Node *n = m.graph->addNode(op, {x}, 1, "n");
  n->output(0)->setName("y");
  n->output(0)->setType(x->type());
  for (auto &[k, a] : attrs) n->setAttr(k, a);
  m.graph->addOutput(n->output(0));
  return m;
}

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

// ---- Printer: canonical text --------------------------------------------------

TEST(IrText, PrinterWritesHeaderSignatureNodesAttributesNamesAndTypes) {
  Model m;
  m.opsets[""] = 17;
  m.producer = "pytorch 2.1";
  Graph &g = *m.graph;
  Value *x = g.addInput("images", Type::tensor(DType::F32, Shape({Dim::symbol("batch"), 3, 4, 4})));
  Node *w = g.addNode(OpKind::Constant, {}, 1);
  w->setAttr("value", Attribute::ofTensor(Tensor::fromVector<float>({1, 2.5f}, {2, 1, 1, 1})));
  w->output(0)->setName("w");
  w->output(0)->setType(Type::tensor(DType::F32, Shape({2, 1, 1, 1})));
  Node *conv = g.addNode(OpKind::Conv, {x, w->output(0), nullptr}, 1, "conv1");
  conv->setAttr("pads", Attribute::ofInts({0, 0, 0, 0}));
  conv->setAttr("group", Attribute::ofInt(1));
  conv->output(0)->setName("y");
  conv->output(0)->setType(Type::tensor(DType::F32, Shape({Dim::symbol("batch"), 2, 4, 4})));
  g.addOutput(conv->output(0));

  EXPECT_EQ(printModel(m),
            "kiln.model opsets {\"\" = 17} producer \"pytorch 2.1\"\n"
            "graph @main(%images: f32[batch,3,4,4]) -> (%y) {\n"
            "  %w = Constant() {value = dense<f32[2,1,1,1]> [1.0, 2.5]} : f32[2,1,1,1]\n"
            "  %y = Conv(%images, %w, _) {group = 1, pads = [0, 0, 0, 0]} name \"conv1\" : "
            "f32[batch,2,4,4]\n"
            "}\n");
  expectStablePrint(m);
}

TEST(IrText, CanonicalTextPrintsBackByteIdentical) {
  std::string text = R"(kiln.model opsets {"" = 17, "ai.onnx.ml" = 3} producer "hand"
graph @main(%x: f32[n,4], %k: i64[]) -> (%v, %i) {
  %v, %i = TopK(%x, %k) {axis = -1, largest = 1} name "topk" : f32[n,?], i64[n,?]
  %s = Shape(%x) {start = 0} : i64[2]
}
)";
  EXPECT_EQ(reprint(text), text);
}

TEST(IrText, HeaderlessTextParsesAsModelWithoutOpsetsOrProducer) {
  Model m = parse("graph @g(%x: f32[2]) -> (%x) {\n}\n");
  EXPECT_TRUE(m.opsets.empty());
  EXPECT_TRUE(m.producer.empty());
  EXPECT_EQ(m.graph->name(), "g");
  EXPECT_EQ(printModel(m), "kiln.model\ngraph @g(%x: f32[2]) -> (%x) {\n}\n");
}

TEST(IrText, PrintGraphOmitsTheModelHeader) {
  Model m = parse("kiln.model producer \"p\"\ngraph @g(%x: f32[2]) -> (%x) {\n}\n");
  EXPECT_EQ(printGraph(*m.graph), "graph @g(%x: f32[2]) -> (%x) {\n}\n");
}

TEST(IrText, CommentsAreIgnored) {
  Model m = parse("// header\ngraph @g(%x: f32[2]) -> (%y) { // signature\n"
                  "  %y = Relu(%x) : f32[2] // a node\n}\n");
  EXPECT_EQ(m.graph->nodes().size(), 1u);
}

// ---- Inputs and names ----------------------------------------------------------

TEST(IrText, AbsentOptionalInputsPrintAsUnderscoreAndParseAsNull) {
  std::string text = "kiln.model\ngraph @main(%x: f32[1,1,4,4], %w: f32[1,1,1,1]) -> (%y) {\n"
                     "  %y = Conv(%x, %w, _) : f32[1,1,4,4]\n"
                     "  %c = Clip(%x, _, %x) : f32[1,1,4,4]\n"
                     "}\n";
  Model m = parse(text);
  const Node &conv = *m.graph->nodes()[0];
  ASSERT_EQ(conv.numInputs(), 3);
  EXPECT_EQ(conv.input(2), nullptr);
  EXPECT_EQ(m.graph->nodes()[1]->input(1), nullptr);
  EXPECT_EQ(printModel(m), text);
}

TEST(IrText, NamesThatAreNotPlainArePrintedQuotedAndKeptExactly) {
  const std::vector<std::string> names = {
      "model/conv 1:0", "onnx::Mul_12", "a\"b\\c", "new\nline", "/model.0/conv/Conv_output_0", "-",
      "%weird@",        "tab\t"};
  Model m;
  Value *prev = m.graph->addInput("in", Type::tensor(DType::F32, Shape({2})));
  for (const std::string &name : names) {
    Node *n = m.graph->addNode(OpKind::Relu, {prev}, 1);
    n->output(0)->setName(name);
    n->output(0)->setType(prev->type());
    prev = n->output(0);
  }
  m.graph->addOutput(prev);
  std::string text = printModel(m);
  EXPECT_NE(text.find("%\"model/conv 1:0\" = Relu"), std::string::npos) << text;
  EXPECT_NE(text.find("%\"onnx::Mul_12\""), std::string::npos) << text;
  EXPECT_NE(text.find("%/model.0/conv/Conv_output_0 = Relu"), std::string::npos) << text;
  EXPECT_NE(text.find("%\"new\\nline\""), std::string::npos) << text;
  Model back = parse(text);
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(back.graph->nodes()[i]->output(0)->name(), names[i]);
  EXPECT_EQ(printModel(back), text);
}

TEST(IrText, EmptyAndDuplicateNamesGetFreshNamesThatNoValueHas) {
  Model m;
  Value *x = m.graph->addInput("x", Type::tensor(DType::F32, Shape({2})));
  std::vector<std::string> names = {"", "x", "x_1", "0", "", "x"};
  for (const std::string &name : names) {
    Node *n = m.graph->addNode(OpKind::Relu, {x}, 1);
    n->output(0)->setName(name);
    n->output(0)->setType(x->type());
    m.graph->addOutput(n->output(0));
  }
  // "" -> "1" (skipping the existing "0"), "x" -> "x_2" (skipping "x_1").
  EXPECT_EQ(printModel(m), "kiln.model\n"
                           "graph @main(%x: f32[2]) -> (%1, %x_2, %x_1, %0, %2, %x_3) {\n"
                           "  %1 = Relu(%x) : f32[2]\n"
                           "  %x_2 = Relu(%x) : f32[2]\n"
                           "  %x_1 = Relu(%x) : f32[2]\n"
                           "  %0 = Relu(%x) : f32[2]\n"
                           "  %2 = Relu(%x) : f32[2]\n"
                           "  %x_3 = Relu(%x) : f32[2]\n"
                           "}\n");
  expectStablePrint(m);
}

TEST(IrText, NodeNamesRoundTripIncludingEmptyAndUnusualOnes) {
  std::string text = "kiln.model\ngraph @main(%x: f32[2]) -> (%c) {\n"
                     "  %a = Relu(%x) : f32[2]\n"
                     "  %b = Relu(%a) name \"/model.1/act/Relu \\\"q\\\"\\n\" : f32[2]\n"
                     "  %c = Relu(%b) name \"\\x01\" : f32[2]\n"
                     "}\n";
  Model m = parse(text);
  EXPECT_EQ(m.graph->nodes()[0]->name(), "");
  EXPECT_EQ(m.graph->nodes()[1]->name(), "/model.1/act/Relu \"q\"\n");
  EXPECT_EQ(m.graph->nodes()[2]->name(), "\x01");
  EXPECT_EQ(printModel(m), text);
}

TEST(IrText, GraphNamesThatAreNotPlainAreQuoted) {
  Model m;
  m.graph->setName("torch jit");
  EXPECT_EQ(printModel(m), "kiln.model\ngraph @\"torch jit\"() -> () {\n}\n");
  expectStablePrint(m);
}

// ---- Types ----------------------------------------------------------------------

TEST(IrText, TypesRoundTripIncludingSequencesOptionalsAndUnknownRank) {
  std::string text =
      "kiln.model\ngraph @main(%a: f32[*], %b: seq<f32[?,4]>, %c: opt<i64[2]>, "
      "%d: opt<seq<bf16[*]>>, %e: i64[], %f: string[n], %g: bool[1,?,k]) -> () {\n}\n";
  Model m = parse(text);
  for (const Value *v : m.graph->inputs()) EXPECT_EQ(printType(v->type()), v->type().str());
  EXPECT_EQ(m.graph->inputs()[1]->type(),
            Type::sequence(Type::tensor(DType::F32, Shape({Dim::unknown(), 4}))));
  EXPECT_EQ(printModel(m), text);
}

TEST(IrText, SymbolicDimensionsThatAreNotIdentifiersAreQuoted) {
  Model m;
  m.graph->addInput("x",
                    Type::tensor(DType::F32, Shape({Dim::symbol("batch size"), Dim::symbol("?"),
                                                    Dim::symbol("3"), Dim::symbol("h/32")})));
  std::string text = printModel(m);
  EXPECT_NE(text.find("f32[\"batch size\",\"?\",\"3\",\"h/32\"]"), std::string::npos) << text;
  EXPECT_EQ(parse(text).graph->inputs()[0]->type(), m.graph->inputs()[0]->type());
}

// ---- Attributes -----------------------------------------------------------------

TEST(IrText, IntAttributesRoundTripAcrossTheFullRange) {
  for (int64_t v : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max()}) {
    Model m = parse(printModel(modelWithAttrs(OpKind::Softmax, {{"axis", Attribute::ofInt(v)}})));
    EXPECT_EQ(onlyAttr(m, "axis").kind, AttrKind::Int);
    EXPECT_EQ(onlyAttr(m, "axis").i, v);
  }
}

TEST(IrText, FloatAttributesKeepTheirExactBitsIncludingNanInfAndNegativeZero) {
  const std::vector<float> values = {0.1f,
                                     1.0f,
                                     -0.0f,
                                     1e-5f,
                                     123456792.0f,
                                     std::numeric_limits<float>::infinity(),
                                     -std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN(),
                                     -std::numeric_limits<float>::quiet_NaN(),
                                     std::bit_cast<float>(0x7f800001u), // signalling, payload 1
                                     std::numeric_limits<float>::denorm_min(),
                                     std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::lowest()};
  for (float v : values) {
    Model m = modelWithAttrs(OpKind::LeakyRelu, {{"alpha", Attribute::ofFloat(v)}});
    Model back = parse(printModel(m));
    EXPECT_EQ(onlyAttr(back, "alpha").kind, AttrKind::Float);
    EXPECT_EQ(bits(onlyAttr(back, "alpha").f), bits(v)) << printModel(m);
    expectStablePrint(m);
  }
  Model list = parse(
      printModel(modelWithAttrs(OpKind::RNN, {{"activation_alpha", Attribute::ofFloats(values)}})));
  const std::vector<float> &floats = onlyAttr(list, "activation_alpha").floats;
  ASSERT_EQ(floats.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(bits(floats[i]), bits(values[i]));
}

TEST(IrText, FloatsAreSpelledShortestWithAPointOrExponent) {
  Model m = modelWithAttrs(
      OpKind::RNN,
      {{"activation_alpha",
        Attribute::ofFloats(
            {1.0f, 0.1f, -0.0f, 1e-5f, 1e20f, std::numeric_limits<float>::quiet_NaN(),
             -std::numeric_limits<float>::infinity(), std::bit_cast<float>(0xffc00001u)})}});
  EXPECT_NE(printModel(m).find("[1.0, 0.1, -0.0, 1e-05, 1e+20, nan, -inf, nan(0xffc00001)]"),
            std::string::npos)
      << printModel(m);
}

TEST(IrText, StringAttributesWithQuotesNewlinesAndControlBytesRoundTrip) {
  const std::vector<std::string> strings = {"",
                                            "plain",
                                            "say \"hi\"",
                                            "back\\slash",
                                            "two\nlines",
                                            "tab\tcr\r",
                                            std::string("nul\0byte", 8),
                                            "\x7f\x1b",
                                            "utf-8 \xc3\xa9"};
  Model m = modelWithAttrs(OpKind::StringNormalizer,
                           {{"locale", Attribute::ofString(strings[2] + strings[4])},
                            {"stopwords", Attribute::ofStrings(strings)}});
  Model back = parse(printModel(m));
  EXPECT_EQ(onlyAttr(back, "locale").s, strings[2] + strings[4]);
  EXPECT_EQ(onlyAttr(back, "stopwords").strings, strings);
  expectStablePrint(m);
}

TEST(IrText, EmptyListsNameTheirKindSoTheyRoundTrip) {
  Model m = modelWithAttrs(OpKind::TfIdfVectorizer, {{"pool_int64s", Attribute::ofInts({})},
                                                     {"weights", Attribute::ofFloats({})},
                                                     {"pool_strings", Attribute::ofStrings({})}});
  std::string text = printModel(m);
  EXPECT_NE(text.find("pool_int64s = ints [], pool_strings = strings [], weights = floats []"),
            std::string::npos)
      << text;
  Model back = parse(text);
  EXPECT_EQ(onlyAttr(back, "pool_int64s").kind, AttrKind::Ints);
  EXPECT_EQ(onlyAttr(back, "weights").kind, AttrKind::Floats);
  EXPECT_EQ(onlyAttr(back, "pool_strings").kind, AttrKind::Strings);
}

TEST(IrText, BareEmptyListsAndIntegerLiteralsTakeTheirKindFromTheOpTable) {
  Model m = parse("graph @g(%x: f32[2]) -> () {\n"
                  "  %y = LeakyRelu(%x) {alpha = 1} : f32[2]\n"
                  "  %z = RNN(%x, %x, %x) {activation_alpha = [1, 2], activations = []} : f32[2]\n"
                  "}\n");
  const Node &leaky = *m.graph->nodes()[0];
  EXPECT_EQ(leaky.attr("alpha")->kind, AttrKind::Float);
  EXPECT_EQ(leaky.attr("alpha")->f, 1.0f);
  const Node &rnn = *m.graph->nodes()[1];
  EXPECT_EQ(rnn.attr("activation_alpha")->kind, AttrKind::Floats);
  EXPECT_EQ(rnn.attr("activations")->kind, AttrKind::Strings);
  EXPECT_TRUE(verifyModel(m).ok()) << verifyModel(m).message();
}

TEST(IrText, TypeAttributesRoundTrip) {
  Type t = Type::optional(Type::sequence(Type::tensor(DType::I64, Shape({2, Dim::symbol("n")}))));
  Model m;
  Node *n = m.graph->addNode(OpKind::Optional, {}, 1);
  n->setAttr("type", Attribute::ofType(t));
  n->output(0)->setName("o");
  n->output(0)->setType(t);
  std::string text = printModel(m);
  EXPECT_NE(text.find("%o = Optional() {type = opt<seq<i64[2,n]>>} : opt<seq<i64[2,n]>>"),
            std::string::npos)
      << text;
  EXPECT_EQ(onlyAttr(parse(text), "type").type, t);
  EXPECT_TRUE(verifyModel(m).ok());
}

// ---- Tensors --------------------------------------------------------------------

// Fills a tensor with values that exercise its element type: extremes,
// negative zero, NaN payloads, strings needing escapes.
Tensor interestingTensor(DType dt, int64_t n) {
  Tensor t(dt, {n});
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::String) {
      t.data<std::string>()[i] = "s\"" + std::to_string(i) + "\n";
    } else if (dt == DType::Bool) {
      t.data<bool>()[i] = i % 3 == 0;
    } else if (isFloat(dt)) {
      const double specials[] = {-0.0,
                                 std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::quiet_NaN(),
                                 0.1,
                                 65504.0,
                                 1e-7};
      t.setDouble(i, i < 7 ? specials[i] : (i - 8) * 0.37);
    } else {
      t.setInt(i, isSignedInt(dt) ? (i % 2 ? -i * 1001 : i * 977) : i * 1013);
    }
  }
  // NaNs with payloads, in the element type's own bits.
  if (n > 8 && dt == DType::F32) t.data<uint32_t>()[8] = 0xff800123u;
  if (n > 8 && dt == DType::F64) t.data<uint64_t>()[8] = 0x7ff0000000000abcull;
  if (n > 8 && dt == DType::F16) t.data<uint16_t>()[8] = 0xfc01u;
  if (n > 8 && dt == DType::BF16) t.data<uint16_t>()[8] = 0x7f81u;
  if (n > 0 && dt == DType::I64) t.data<int64_t>()[0] = std::numeric_limits<int64_t>::min();
  if (n > 0 && dt == DType::U64) t.data<uint64_t>()[0] = std::numeric_limits<uint64_t>::max();
  return t;
}

TEST(IrText, TensorsOfEveryElementTypeRoundTripBitExactlyAsLiteralsAndAsHex) {
  for (DType dt :
       {DType::F32, DType::U8, DType::I8, DType::U16, DType::I16, DType::I32, DType::I64,
        DType::String, DType::Bool, DType::F16, DType::F64, DType::U32, DType::U64, DType::BF16}) {
    for (int64_t n :
         {int64_t{0}, int64_t{1}, int64_t{9}, kMaxLiteralElements, kMaxLiteralElements + 5}) {
      Tensor t = interestingTensor(dt, n);
      Model m = modelWithAttrs(OpKind::Constant, {{"value", Attribute::ofTensor(t)}});
      std::string text = printModel(m);
      bool hex = n > kMaxLiteralElements && dt != DType::String;
      EXPECT_EQ(text.find("hex\"") != std::string::npos, hex) << text;
      Model back = parse(text);
      EXPECT_TRUE(onlyAttr(back, "value").t.identical(t)) << dtypeName(dt) << " x " << n << "\n"
                                                          << text;
      EXPECT_EQ(printModel(back), text);
    }
  }
}

TEST(IrText, ScalarTensorsAndMultiDimensionalShapesRoundTrip) {
  std::string text = "kiln.model\ngraph @main() -> (%a, %b) {\n"
                     "  %a = Constant() {value = dense<i64[]> [7]} : i64[]\n"
                     "  %b = Constant() {value = dense<f16[2,0,3]> []} : f16[2,0,3]\n"
                     "  %c = Constant() {value = dense<bool[2,2]> [true, false, false, true]} : "
                     "bool[2,2]\n"
                     "}\n";
  EXPECT_EQ(reprint(text), text);
}

TEST(IrText, LargeTensorsPrintTheirLittleEndianBytesAsHex) {
  Tensor t(DType::F32, {kMaxLiteralElements + 1});
  for (float &f : t.span<float>()) f = 1.0f;
  std::string text =
      printModel(modelWithAttrs(OpKind::Constant, {{"value", Attribute::ofTensor(t)}}));
  EXPECT_NE(text.find("dense<f32[17]> hex\"0000803f0000803f"), std::string::npos) << text;
}

TEST(IrText, ElidedConstantsShowTheirTypeOnlyAndDoNotParse) {
  Tensor t(DType::F32, {64, 3, 3, 3});
  Model m = modelWithAttrs(OpKind::Constant, {{"value", Attribute::ofTensor(t)}});
  std::string text = printModel(m, PrintOptions{.elideLargeConstants = true});
  EXPECT_NE(text.find("{value = dense<f32[64,3,3,3]> elided}"), std::string::npos) << text;
  EXPECT_NE(parseError(text).find("elided tensor data cannot be parsed"), std::string::npos);
}

TEST(IrText, UndefinedTensorAttributesRoundTrip) {
  Model m = modelWithAttrs(OpKind::ConstantOfShape, {{"value", Attribute::ofTensor(Tensor())}});
  std::string text = printModel(m);
  EXPECT_NE(text.find("{value = dense<undefined>}"), std::string::npos) << text;
  EXPECT_FALSE(onlyAttr(parse(text), "value").t.defined());
}

// ---- Regions ----------------------------------------------------------------------

const char *kNestedRegions = R"(kiln.model
graph @main(%n: i64[], %c: bool[], %x: f32[2]) -> (%out) {
  %two = Constant() {value = dense<f32[]> [2.0]} : f32[]
  %out = Loop(%n, %c, %x) {body = graph @body(%i: i64[], %cond: bool[], %acc: f32[2]) -> (%cond, %next) {
    %scaled = Mul(%acc, %two) : f32[2]
    %next = If(%cond) {else_branch = graph @else_branch() -> (%e) {
      %e = Add(%scaled, %x) : f32[2]
    }, then_branch = graph @then_branch() -> (%t) {
      %t = Sub(%scaled, %x) : f32[2]
    }} name "if" : f32[2]
  }} name "loop" : f32[2]
}
)";

TEST(IrText, NestedRegionsReadingEnclosingScopesRoundTrip) {
  EXPECT_EQ(reprint(kNestedRegions), kNestedRegions);
  Model m = parse(kNestedRegions);
  EXPECT_TRUE(verifyModel(m).ok()) << verifyModel(m).message();

  const Graph &main = *m.graph;
  const Node &loop = *main.nodes()[1];
  const Graph *body = loop.getGraph("body");
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->parent(), &main);
  const Node &mul = *body->nodes()[0];
  EXPECT_EQ(mul.input(1), main.nodes()[0]->output(0)); // %two, two scopes up the chain
  const Graph *thenBranch = body->nodes()[1]->getGraph("then_branch");
  EXPECT_EQ(thenBranch->parent(), body);
  EXPECT_EQ(thenBranch->nodes()[0]->input(0), mul.output(0));    // %scaled, from the body
  EXPECT_EQ(thenBranch->nodes()[0]->input(1), main.inputs()[2]); // %x, from main
}

TEST(IrText, SiblingRegionsMayReuseNamesButNestedOnesGetFreshOnes) {
  Model m;
  Graph &g = *m.graph;
  Value *c = g.addInput("c", Type::tensor(DType::Bool, Shape()));
  Value *x = g.addInput("x", Type::tensor(DType::F32, Shape({2})));
  Node *iff = g.addNode(OpKind::If, {c}, 1, "if");
  for (const char *branch : {"then_branch", "else_branch"}) {
    auto region = std::make_shared<Graph>(branch, &g);
    Node *n = region->addNode(OpKind::Relu, {x}, 1);
    n->output(0)->setName("x"); // the same name as the enclosing graph's input
    n->output(0)->setType(x->type());
    region->addOutput(n->output(0));
    iff->setAttr(branch, Attribute::ofGraph(region));
  }
  iff->output(0)->setName("x");
  iff->output(0)->setType(x->type());
  g.addOutput(iff->output(0));
  std::string text = printModel(m);
  EXPECT_EQ(text, "kiln.model\n"
                  "graph @main(%c: bool[], %x: f32[2]) -> (%x_3) {\n"
                  "  %x_3 = If(%c) {else_branch = graph @else_branch() -> (%x_1) {\n"
                  "    %x_1 = Relu(%x) : f32[2]\n"
                  "  }, then_branch = graph @then_branch() -> (%x_2) {\n"
                  "    %x_2 = Relu(%x) : f32[2]\n"
                  "  }} name \"if\" : f32[2]\n"
                  "}\n");
  expectStablePrint(m);
}

TEST(IrText, PrintingARegionAloneKeepsTheNamesOfTheOuterValuesItReads) {
  Model m = parse(kNestedRegions);
  const Graph *body = m.graph->nodes()[1]->getGraph("body");
  const Graph *thenBranch = body->nodes()[1]->getGraph("then_branch");
  EXPECT_EQ(printGraph(*thenBranch), "graph @then_branch() -> (%t) {\n"
                                     "  %t = Sub(%scaled, %x) : f32[2]\n"
                                     "}\n");
  EXPECT_TRUE(verifyGraph(*thenBranch).ok()) << verifyGraph(*thenBranch).message();
}

TEST(IrText, SiblingRegionsWithTheSameNamesParse) {
  std::string text = "kiln.model\ngraph @main(%c: bool[], %x: f32[2]) -> (%r) {\n"
                     "  %r = If(%c) {else_branch = graph @e() -> (%t) {\n"
                     "    %t = Relu(%x) : f32[2]\n"
                     "  }, then_branch = graph @t() -> (%t) {\n"
                     "    %t = Neg(%x) : f32[2]\n"
                     "  }} : f32[2]\n"
                     "}\n";
  EXPECT_EQ(reprint(text), text);
}

TEST(IrText, RegionCannotReadValuesDefinedAfterItsNode) {
  std::string error = parseError("graph @main(%c: bool[]) -> () {\n"
                                 "  %r = If(%c) {then_branch = graph @t() -> (%late) {\n"
                                 "  }, else_branch = graph @e() -> (%c) {\n  }} : f32[2]\n"
                                 "  %late = Not(%c) : bool[]\n}\n");
  EXPECT_EQ(error, "test.kir:2:45: use of undefined value %late");
}

TEST(IrText, RegionCannotReadItsOwnNodesResults) {
  std::string error =
      parseError("graph @main(%c: bool[]) -> () {\n"
                 "  %r = If(%c) {then_branch = graph @t() -> (%r) {\n  }} : f32[2]\n"
                 "}\n");
  EXPECT_EQ(error, "test.kir:2:45: use of undefined value %r");
}

std::string nestedIfs(int depth) {
  std::string text = "graph @main(%c: bool[]) -> () {\n";
  for (int i = 0; i < depth; ++i) text += "%r = If(%c) {then_branch = graph @t() -> () {\n";
  for (int i = 0; i < depth; ++i) text += "}} : f32[2]\n";
  return text + "}\n";
}

TEST(IrText, RegionsNestedUpToTheLimitParseAndDeeperOnesAreRejected) {
  EXPECT_EQ(parseError(nestedIfs(kMaxParseRegionDepth)), "(parsed without error)");
  EXPECT_NE(parseError(nestedIfs(kMaxParseRegionDepth + 1)).find("nested more than 64 deep"),
            std::string::npos);
  EXPECT_NE(parseError(nestedIfs(100000)).find("nested more than 64 deep"), std::string::npos);
}

TEST(IrText, TypesNestedTooDeeplyAreRejected) {
  std::string type;
  for (int i = 0; i < 100000; ++i) type += "seq<";
  EXPECT_NE(parseError("graph @g(%x: " + type).find("types are nested more than"),
            std::string::npos);
}

// ---- Parse errors -------------------------------------------------------------------

struct ErrorCase {
  const char *text;
  const char *message; // expected, exactly
};

TEST(IrText, ParseErrorsSayFileLineAndColumn) {
  const ErrorCase cases[] = {
      {"graph @g(%x: f32[2]) -> () {\n  %y = Foo(%x) : f32[2]\n}",
       "test.kir:2:8: unknown op 'Foo'"},
      {"graph @g(%x: f32[2]) -> () {\n  %y = Relu(%z) : f32[2]\n}",
       "test.kir:2:13: use of undefined value %z"},
      {"graph @g(%x: f32[2]) -> () {\n  %x = Relu(%x) : f32[2]\n}",
       "test.kir:2:3: value %x is already defined"},
      {"graph @g(%x: f32[2]) -> (%nope) {\n}", "test.kir:1:26: use of undefined value %nope"},
      {"graph @g(%x: f32[2]) -> () {\n  %y = Relu(%x) name \"abc\n}",
       "test.kir:2:22: unterminated string"},
      {"graph @g(%x: f32[2]) -> () {\n  %y = Relu(%x) ; \n}",
       "test.kir:2:17: unexpected character ';'"},
      {"graph @g(%x: f32[2]) -> () {\n  %a, %b = Relu(%x) : f32[2]\n}",
       "test.kir:3:1: expected ',' (2 results, 2 types), found '}'"},
      {"graph @g(%x: f32[2]) -> () {\n  %y = Relu(%x)\n}",
       "test.kir:3:1: expected ':' and the result types, found '}'"},
      {"graph @g(%x: f32[2]) -> () {\n  %y = Relu(%x) : f32[2], f32[2]\n}",
       "test.kir:2:25: more types than the 1 results"},
      {"graph @g() -> () {\n  %y = Constant() {value = dense<f32[3]> [1.0, 2.0]} : f32[3]\n}",
       "test.kir:2:42: tensor data has 2 elements, expected 3"},
      {"graph @g() -> () {\n  %y = Constant() {value = dense<i8[1]> [300]} : i8[1]\n}",
       "test.kir:2:42: integer '300' is out of range"},
      {"graph @g() -> () {\n  %y = Constant() {value = dense<f32[1]> [1e99]} : f32[1]\n}",
       "test.kir:2:43: '1e99' is out of range for f32"},
      {"graph @g() -> () {\n  %y = Constant() {value = dense<f16[1]> [nan(0x7c00)]} : f16[1]\n}",
       "test.kir:2:43: nan(0x7c00) is not a 16-bit nan"},
      {"graph @g(%x: f32[2]) -> () {\n  %y = Softmax(%x) {axis = 1, axis = 2} : f32[2]\n}",
       "test.kir:2:31: attribute 'axis' is given twice"},
      {"graph @g(%x: f32[2]) -> () {\n  %y = Relu(%x) {foo = []} : f32[2]\n}",
       "test.kir:2:24: cannot tell the kind of an empty list; write ints [], floats [] or "
       "strings []"},
      {"graph @g(%x: f32[2]) -> () {\n  %y = Softmax(%x) {axis = 99999999999999999999} : f32[2]\n}",
       "test.kir:2:28: integer '99999999999999999999' is out of range"},
      {"graph @g() -> () {\n  %y = Constant() {value = dense<f16[1]> [1e10]} : f16[1]\n}",
       "test.kir:2:43: '1e10' is out of range for f16"},
      {"graph @g(%x: f32[2]) -> () {\n  %y = Resize(%x) {mode = nearest} : f32[2]\n}",
       "test.kir:2:27: expected an attribute value, found 'nearest' (strings are quoted)"},
      {"graph @g() -> () {\n  %y = Constant() {value = dense<u8[1]> hex\"0g\"} : u8[1]\n}",
       "test.kir:2:44: hex data has a character that is not a hex digit"},
      {"graph @g(%x: f33[2]) -> () {\n}", "test.kir:1:14: unknown element type 'f33'"},
      {"graph @g(%x: f32[-1]) -> () {\n}", "test.kir:1:18: dimension -1 is negative"},
      {"graph @g() -> () {\n}\ngraph @h() -> () {\n}", "test.kir:3:1: expected end of input "
                                                       "after the main graph, found 'graph'"},
      {"graph @g() -> () {\n", "test.kir:2:1: expected a node or '}', found end of input"},
      {"", "test.kir:1:1: expected 'graph', found end of input"},
      {"kiln.model opsets {\"\" = 1, \"\" = 2}\ngraph @g() -> () {\n}",
       "test.kir:1:28: opset \"\" is given twice"},
  };
  for (const ErrorCase &c : cases) EXPECT_EQ(parseError(c.text), c.message) << c.text;
}

TEST(IrText, ClaimedTensorSizesNeedTheDataToBackThem) {
  // Neither allocates: the data is checked against the claimed size first.
  EXPECT_EQ(parseError("graph @g() -> () {\n  %y = Constant() {value = dense<f32[1000000000,"
                       "1000]> hex\"00\"} : f32[1]\n}"),
            "test.kir:2:59: hex data has 2 digits, expected 8000000000000");
  EXPECT_EQ(parseError("graph @g() -> () {\n  %y = Constant() {value = dense<u8[1000000000,"
                       "1000000000]> []} : f32[1]\n}"),
            "test.kir:2:48: tensor has too many elements");
}

// Every accepted text prints to a fixed point, and no text crashes the parser.
void checkParsesSafely(std::string_view text) {
  Expected<Model> m = parseModel(text, "fuzz.kir");
  if (!m.ok()) return;
  std::string printed = printModel(*m);
  Expected<Model> again = parseModel(printed, "fuzz.kir");
  ASSERT_TRUE(again.ok()) << again.error().message << "\n" << printed;
  EXPECT_EQ(printModel(*again), printed);
  (void)verifyModel(*m);
}

TEST(IrText, ParserSurvivesEveryTruncationAndRandomMutationsOfValidText) {
  std::string text = kNestedRegions;
  for (size_t n = 0; n <= text.size(); ++n) checkParsesSafely(std::string_view(text).substr(0, n));
  std::mt19937 rng(1234);
  const std::string alphabet = "%@\"\\{}[]()<>,=:-_?*/ 0123456789abcxyzfinhe.\n\x01\xff";
  for (int round = 0; round < 3000; ++round) {
    std::string mutated = text;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % mutated.size();
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
      case 0:
        mutated[at] = c;
        break;
      case 1:
        mutated.insert(mutated.begin() + at, c);
        break;
      default:
        mutated.erase(at, 1);
      }
    }
    checkParsesSafely(mutated);
  }
}

// ---- Golden files --------------------------------------------------------------------

std::filesystem::path litDir() {
#ifdef KILN_SOURCE_DIR
  return std::filesystem::path(KILN_SOURCE_DIR) / "tests" / "lit" / "ir";
#else
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "lit" / "ir";
#endif
}

// The file's text after its leading `//` comment lines.
std::string withoutLeadingComments(const std::string &text) {
  size_t pos = 0;
  while (text.compare(pos, 2, "//") == 0) {
    size_t eol = text.find('\n', pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
  }
  return text.substr(pos);
}

TEST(IrText, GoldenFilesPrintBackToTheirOwnText) {
  int files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(litDir())) {
    if (entry.path().extension() != ".kir") continue;
    ++files;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = withoutLeadingComments(ss.str());
    Expected<Model> m = parseModel(ss.str(), entry.path().string());
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(printModel(*m), text) << entry.path();
    EXPECT_TRUE(verifyModel(*m).ok()) << entry.path() << ": " << verifyModel(*m).message();
  }
  EXPECT_GE(files, 3) << "no golden files found in " << litDir();
}

// ---- Verifier: one test per rule -------------------------------------------------------

TEST(Verifier, AcceptsAWellFormedModel) {
  Model m = parse(kNestedRegions);
  EXPECT_TRUE(verifyModel(m).ok()) << verifyModel(m).message();
}

TEST(Verifier, RejectsTooFewInputs) {
  Model m = parse("graph @g(%x: f32[2]) -> () {\n  %y = Add(%x) name \"add\" : f32[2]\n}");
  EXPECT_EQ(verifyError(m), "node 'add' (Add): has 1 input, expected 2");
}

TEST(Verifier, RejectsTooManyInputs) {
  Model m =
      parse("graph @g(%x: f32[2]) -> () {\n  %y = Conv(%x, %x, %x, %x) name \"conv1\" : f32[2]\n}");
  EXPECT_EQ(verifyError(m), "node 'conv1' (Conv): has 4 inputs, expected 2 to 3");
}

TEST(Verifier, RejectsWrongNumberOfOutputs) {
  Model m =
      parse("graph @g(%x: f32[2]) -> () {\n  %a, %b = Relu(%x) name \"r\" : f32[2], f32[2]\n}");
  EXPECT_EQ(verifyError(m), "node 'r' (Relu): has 2 outputs, expected 1");
}

TEST(Verifier, RejectsUndeclaredAttribute) {
  Model m =
      parse("graph @g(%x: f32[2]) -> () {\n  %y = Relu(%x) {alpha = 1.0} name \"r\" : f32[2]\n}");
  EXPECT_EQ(verifyError(m), "node 'r' (Relu): attribute 'alpha' is not an attribute of Relu");
}

TEST(Verifier, RejectsAttributeOfTheWrongKind) {
  Model m =
      parse("graph @g(%x: f32[2]) -> () {\n  %y = Concat(%x) {axis = 1.5} name \"c\" : f32[2]\n}");
  EXPECT_EQ(verifyError(m), "node 'c' (Concat): attribute 'axis' is float, expected int");
}

TEST(Verifier, RejectsMissingRequiredAttribute) {
  Model m = parse("graph @g(%x: f32[2]) -> () {\n  %y = Concat(%x) name \"c\" : f32[2]\n}");
  EXPECT_EQ(verifyError(m), "node 'c' (Concat): missing required attribute 'axis'");
}

TEST(Verifier, RejectsAttributeHoldingNoTensor) {
  Model m = modelWithAttrs(OpKind::ConstantOfShape, {{"value", Attribute::ofTensor(Tensor())}});
  EXPECT_EQ(verifyError(m), "node 'n' (ConstantOfShape): attribute 'value' holds no tensor");
}

TEST(Verifier, RejectsUseBeforeDefinition) {
  Model m;
  Value *x = m.graph->addInput("x", Type::tensor(DType::F32, Shape({2})));
  Node *first = m.graph->addNode(OpKind::Relu, {x}, 1, "first");
  Node *second = m.graph->addNode(OpKind::Neg, {x}, 1, "second");
  second->output(0)->setName("late");
  first->setInput(0, second->output(0));
  EXPECT_EQ(verifyError(m), "node 'first' (Relu): input 0 'late' is used before it is defined");
  ASSERT_TRUE(m.graph->sortTopologically().ok());
  EXPECT_TRUE(verifyModel(m).ok());
}

// main(%c, %x) { %r = If(%c) {then_branch, else_branch} name "if" } with each
// branch computing Relu(%x) into a value named after the branch.
struct IfModel {
  Model m;
  Value *c, *x;
  Node *iff;
  Graph *thenBranch, *elseBranch;

  IfModel() {
    Graph &g = *m.graph;
    c = g.addInput("c", Type::tensor(DType::Bool, Shape()));
    x = g.addInput("x", Type::tensor(DType::F32, Shape({2})));
    iff = g.addNode(OpKind::If, {c}, 1, "if");
    thenBranch = branch("then_branch");
    elseBranch = branch("else_branch");
    g.addOutput(iff->output(0));
  }
  Graph *branch(const char *name) {
    auto region = std::make_shared<Graph>(name, m.graph.get());
    Node *n = region->addNode(OpKind::Relu, {x}, 1, std::string(name) + "_relu");
    n->output(0)->setName(std::string(name) + "_value");
    region->addOutput(n->output(0));
    iff->setAttr(name, Attribute::ofGraph(region));
    return region.get();
  }
};

TEST(Verifier, AcceptsRegionReadingAValueOfAnEnclosingGraph) {
  IfModel f;
  EXPECT_TRUE(verifyModel(f.m).ok()) << verifyModel(f.m).message();
  EXPECT_TRUE(verifyGraph(*f.thenBranch).ok()) << verifyGraph(*f.thenBranch).message();
}

TEST(Verifier, RejectsRegionReadingAnOuterValueDefinedAfterItsNode) {
  IfModel f;
  Node *late = f.m.graph->addNode(OpKind::Neg, {f.x}, 1, "late");
  late->output(0)->setName("late");
  f.thenBranch->nodes()[0]->setInput(0, late->output(0));
  EXPECT_EQ(verifyError(f.m), "node 'if' (If): region then_branch: node 'then_branch_relu' (Relu): "
                              "input 0 'late' is used before it is defined");
}

TEST(Verifier, RejectsUseOfAValueFromASiblingRegion) {
  IfModel f;
  f.thenBranch->nodes()[0]->setInput(0, f.elseBranch->nodes()[0]->output(0));
  EXPECT_EQ(verifyError(f.m), "node 'if' (If): region then_branch: node 'then_branch_relu' (Relu): "
                              "input 0 'else_branch_value' is defined in graph 'else_branch', "
                              "which does not enclose this node");
}

TEST(Verifier, RejectsUseOfAValueFromAnInnerRegion) {
  IfModel f;
  Node *after = f.m.graph->addNode(OpKind::Neg, {f.thenBranch->outputs()[0]}, 1, "after");
  (void)after;
  EXPECT_EQ(verifyError(f.m), "node 'after' (Neg): input 0 'then_branch_value' is defined in graph "
                              "'then_branch', which does not enclose this node");
}

TEST(Verifier, RejectsValueWhoseProducerWasErased) {
  Model m;
  Value *x = m.graph->addInput("x", Type::tensor(DType::F32, Shape({2})));
  Node *gone = m.graph->addNode(OpKind::Neg, {x}, 1, "gone");
  gone->output(0)->setName("orphan");
  m.graph->addNode(OpKind::Relu, {gone->output(0)}, 1, "user");
  m.graph->eraseNode(gone);
  EXPECT_EQ(verifyError(m),
            "node 'user' (Relu): input 0 'orphan' has no producer (was its node erased?)");
}

TEST(Verifier, RejectsValueDefinedTwice) {
  IfModel f;
  // A second If holding the very same region objects defines their values again.
  Node *copy = f.m.graph->addNode(OpKind::If, {f.c}, 1, "copy");
  for (const auto &[name, a] : f.iff->attrs()) copy->setAttr(name, a);
  EXPECT_EQ(verifyError(f.m), "node 'copy' (If): region else_branch: node 'else_branch_relu' "
                              "(Relu): output 0 'else_branch_value' is defined more than once (is "
                              "a region held by two nodes?)");
}

TEST(Verifier, RejectsUndefinedGraphOutput) {
  IfModel f;
  f.m.graph->addOutput(f.thenBranch->outputs()[0]);
  EXPECT_EQ(verifyError(f.m), "graph 'main': output 1 'then_branch_value' is not defined");
}

TEST(Verifier, RejectsRegionWhoseParentIsNotTheNodesGraph) {
  IfModel f;
  f.thenBranch->setParent(nullptr);
  EXPECT_EQ(verifyError(f.m),
            "node 'if' (If): region then_branch does not have the node's graph as its parent");
}

TEST(Verifier, ChecksRegionsRecursivelyAndNamesThePathToTheFault) {
  Model m = parse(kNestedRegions);
  Graph *body = m.graph->nodes()[1]->getGraph("body");
  Graph *elseBranch = body->nodes()[1]->getGraph("else_branch");
  elseBranch->nodes()[0]->setName("add");
  elseBranch->nodes()[0]->setAttr("axis", Attribute::ofInt(0));
  EXPECT_EQ(verifyError(m), "node 'loop' (Loop): region body: node 'if' (If): region else_branch: "
                            "node 'add' (Add): attribute 'axis' is not an attribute of Add");
}

} // namespace
} // namespace kiln
