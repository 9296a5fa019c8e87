// The decompose pass (passes/decompose.cpp) on every form of the ops it
// rewrites: the interpreter runs the model before and after the pass on
// random inputs and must agree (the pass's own lit tests in
// tests/lit/passes/decompose show the rewrites); then the decomposed model
// runs through the artifact where its ops compile.
#include "op_check.h"

#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln {
namespace {

using testing::randomTensor;

DType dt(const std::string &name) {
  return *dtypeFromName(name);
}

// Runs the model's graph on the interpreter.
std::vector<RtValue> interpret(const Model &m, const std::vector<Tensor> &inputs) {
  std::vector<RtValue> in;
  for (const Tensor &t : inputs) in.emplace_back(t);
  Interpreter interp;
  auto out = interp.run(*m.graph, std::move(in));
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? *out : std::vector<RtValue>{};
}

// The interpreter's outputs before and after decompose agree, and no node
// of `op` is left.
void expectDecomposed(const std::string &text, const std::vector<Tensor> &inputs, OpKind op,
                      double tol = 1e-5) {
  auto before = parseModel(text, "t.kir");
  ASSERT_TRUE(before.ok()) << before.error().message;
  auto after = parseModel(text, "t.kir");
  ASSERT_TRUE(runPipeline(*after, {"decompose"}).ok());
  after->graph->walk([&](Graph &g) {
    for (const auto &n : g.nodes()) EXPECT_NE(n->op(), op) << "left:\n" << printModel(*after);
  });
  std::vector<RtValue> want = interpret(*before, inputs), got = interpret(*after, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor &w = want[i].tensor, &g = got[i].tensor;
    ASSERT_EQ(shapeToString(g.shape()), shapeToString(w.shape())) << "output " << i;
    ASSERT_EQ(g.dtype(), w.dtype()) << "output " << i;
    for (int64_t k = 0; k < w.numel(); ++k) {
      const double a = g.getDouble(k), b = w.getDouble(k);
      if (std::isnan(a) && std::isnan(b)) continue;
      EXPECT_LE(std::fabs(a - b), tol * (1 + std::fabs(b)))
          << "output " << i << " element " << k << "\n"
          << printModel(*after);
    }
  }
}

std::string model(const std::string &inputs, const std::string &outputs, const std::string &body) {
  return "kiln.model opsets {\"\" = 21}\ngraph @g(" + inputs + ") -> (" + outputs + ") {\n" + body +
         "}";
}

// ---- Gemm ------------------------------------------------------------------------

TEST(DecomposeNumerics, GemmInEveryTransposeScaleAndBiasForm) {
  struct Case {
    int transA, transB;
    float alpha, beta;
    std::string c; // C's shape, "" for none
  };
  for (const Case &k :
       {Case{0, 0, 1, 1, "[5]"}, Case{1, 0, 1, 1, "[3,5]"}, Case{0, 1, 0.5, 2, "[3,1]"},
        Case{1, 1, 2, 0.25, "[]"}, Case{0, 0, 1, 1, ""}, Case{0, 1, 1.5, 0, "[5]"}}) {
    for (const char *t : {"f32", "f64", "f16", "i32"}) {
      SCOPED_TRACE(::testing::Message()
                   << t << " transA=" << k.transA << " transB=" << k.transB << " alpha=" << k.alpha
                   << " beta=" << k.beta << " C=" << k.c);
      const std::string s(t);
      const std::string a = k.transA ? "[4,3]" : "[3,4]", b = k.transB ? "[5,4]" : "[4,5]";
      std::string inputs = "%a: " + s + a + ", %b: " + s + b;
      if (!k.c.empty()) inputs += ", %c: " + s + k.c;
      const std::string attrs =
          "{alpha = " + std::to_string(k.alpha) + ", beta = " + std::to_string(k.beta) +
          ", transA = " + std::to_string(k.transA) + ", transB = " + std::to_string(k.transB) + "}";
      const std::string text = model(inputs, "%y",
                                     "  %y = Gemm(%a, %b" + std::string(k.c.empty() ? "" : ", %c") +
                                         ") " + attrs + " : " + s + "[3,5]\n");
      std::vector<Tensor> in{
          randomTensor(dt(t), k.transA ? Shape64{4, 3} : Shape64{3, 4}, 1, -4, 4),
          randomTensor(dt(t), k.transB ? Shape64{5, 4} : Shape64{4, 5}, 2, -4, 4)};
      if (!k.c.empty()) {
        Shape64 cs;
        if (k.c == "[5]") cs = {5};
        if (k.c == "[3,5]") cs = {3, 5};
        if (k.c == "[3,1]") cs = {3, 1};
        in.push_back(randomTensor(dt(t), cs, 3, -4, 4));
      }
      expectDecomposed(text, in, OpKind::Gemm, s == "f16" ? 2e-3 : 1e-5);
      if (s == "f32") testing::expectArtifactMatchesInterpreter(text, in);
    }
  }
}

TEST(DecomposeNumerics, GemmWithConstantWeightsThroughTheArtifact) {
  // torch's Linear: x @ W^T + b with W and b constants.
  const std::string text =
      model("%x: f32[n,4]", "%y",
            "  %w = Constant() {value = dense<f32[3,4]> [1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.25, 2.0, "
            "0.0, 1.0, -2.0, 3.0]} : f32[3,4]\n"
            "  %bias = Constant() {value = dense<f32[3]> [0.5, -1.0, 2.0]} : f32[3]\n"
            "  %y = Gemm(%x, %w, %bias) {transB = 1} : f32[n,3]\n");
  for (int64_t n : {1, 6}) {
    expectDecomposed(text, {randomTensor(DType::F32, {n, 4}, 4)}, OpKind::Gemm);
    for (int level : {0, 3}) {
      testing::OpCheckOptions o;
      o.optLevel = level;
      testing::expectArtifactMatchesInterpreter(text, {randomTensor(DType::F32, {n, 4}, 4)}, o);
    }
  }
}

TEST(DecomposeNumerics, GemmInsideIfBranches) {
  const std::string text = model("%c: bool[], %a: f32[2,3], %b: f32[3,4]", "%y",
                                 "  %y = If(%c) {else_branch = graph @e() -> (%r) {\n"
                                 "    %r = Gemm(%a, %b) {alpha = 2.0} : f32[2,4]\n"
                                 "  }, then_branch = graph @t() -> (%s) {\n"
                                 "    %s = Gemm(%a, %b) : f32[2,4]\n"
                                 "  }} : f32[2,4]\n");
  for (bool c : {false, true})
    expectDecomposed(text,
                     {Tensor::scalar(c), randomTensor(DType::F32, {2, 3}, 1),
                      randomTensor(DType::F32, {3, 4}, 2)},
                     OpKind::Gemm);
}

// ---- Einsum -----------------------------------------------------------------------

void expectEinsum(const std::string &equation, const std::vector<Shape64> &shapes,
                  const std::string &outType, const std::string &dtype = "f32") {
  SCOPED_TRACE(equation);
  std::string inputs, args;
  std::vector<Tensor> in;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::string shape = "[";
    for (size_t k = 0; k < shapes[i].size(); ++k)
      shape += (k ? "," : "") + std::to_string(shapes[i][k]);
    shape += "]";
    inputs += (i ? ", " : "") + std::string("%x") + std::to_string(i) + ": " + dtype + shape;
    args += (i ? ", " : "") + std::string("%x") + std::to_string(i);
    in.push_back(randomTensor(dt(dtype), shapes[i], 10 + i, -3, 3));
  }
  const std::string text =
      model(inputs, "%y",
            "  %y = Einsum(" + args + ") {equation = \"" + equation + "\"} : " + outType + "\n");
  expectDecomposed(text, in, OpKind::Einsum, dtype == "f16" ? 3e-3 : 1e-5);
}

TEST(DecomposeNumerics, EinsumMatrixProductsAndBatches) {
  expectEinsum("ij,jk->ik", {{3, 4}, {4, 5}}, "f32[3,5]");
  expectEinsum("ij,jk", {{3, 4}, {4, 5}}, "f32[3,5]");
  expectEinsum("bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, "f32[2,3,5]");
  expectEinsum("bij,bkj->bik", {{2, 3, 4}, {2, 5, 4}}, "f32[2,3,5]");
  expectEinsum("abc,cd->abd", {{2, 3, 4}, {4, 5}}, "f32[2,3,5]");
  expectEinsum("abcd,cdef->abef", {{2, 2, 3, 4}, {3, 4, 2, 3}}, "f32[2,2,2,3]");
  expectEinsum("ij,jk->ik", {{3, 4}, {4, 5}}, "i32[3,5]", "i32");
  expectEinsum("ij,jk->ik", {{3, 4}, {4, 5}}, "f16[3,5]", "f16");
}

TEST(DecomposeNumerics, EinsumTransposesSumsAndOuterProducts) {
  expectEinsum("ij->ji", {{3, 4}}, "f32[4,3]");
  expectEinsum("ij->i", {{3, 4}}, "f32[3]");
  expectEinsum("ij->", {{3, 4}}, "f32[]");
  expectEinsum("ij", {{3, 4}}, "f32[3,4]");
  expectEinsum("ba", {{3, 4}}, "f32[4,3]");
  expectEinsum("i,i", {{5}, {5}}, "f32[]");
  expectEinsum("i,j->ij", {{3}, {4}}, "f32[3,4]");
  expectEinsum("ij,ij->ij", {{3, 4}, {3, 4}}, "f32[3,4]");
  expectEinsum("ij,ij->", {{3, 4}, {3, 4}}, "f32[]");
  expectEinsum("i,i->i", {{1}, {4}}, "f32[4]");
  expectEinsum("i,i->", {{1}, {4}}, "f32[]");
}

TEST(DecomposeNumerics, EinsumDiagonalsAndTraces) {
  expectEinsum("ii->i", {{4, 4}}, "f32[4]");
  expectEinsum("ii", {{4, 4}}, "f32[]");
  expectEinsum("iij->ij", {{3, 3, 2}}, "f32[3,2]");
  expectEinsum("bii->bi", {{2, 3, 3}}, "f32[2,3]");
  expectEinsum("ii,ij->j", {{3, 3}, {3, 4}}, "f32[4]");
  expectEinsum("iii->i", {{3, 3, 3}}, "f32[3]");
}

TEST(DecomposeNumerics, EinsumEllipsisBroadcastingAndManyOperands) {
  expectEinsum("...ij,...jk->...ik", {{2, 3, 4}, {4, 5}}, "f32[2,3,5]");
  expectEinsum("...ij,...jk->...ik", {{2, 1, 3, 4}, {3, 4, 5}}, "f32[2,3,3,5]");
  expectEinsum("...ii->...i", {{2, 3, 3}}, "f32[2,3]");
  expectEinsum("i...->...", {{3, 2, 4}}, "f32[2,4]");
  expectEinsum("...", {{2, 3}}, "f32[2,3]");
  expectEinsum("bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}, "f32[2,4]");
  expectEinsum("ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}, "f32[2,5]");
  expectEinsum("a,b,c->abc", {{2}, {3}, {4}}, "f32[2,3,4]");
  expectEinsum("ij,kj,ik->", {{2, 3}, {4, 3}, {2, 4}}, "f32[]");
}

TEST(DecomposeNumerics, EinsumWithSymbolicDims) {
  const std::string text =
      model("%a: f32[n,4,m], %b: f32[n,m,k]", "%y, %z",
            "  %y = Einsum(%a, %b) {equation = \"bij,bjk->bik\"} : f32[n,4,k]\n"
            "  %z = Einsum(%a, %b) {equation = \"bij,bjk->ik\"} : f32[4,k]\n");
  expectDecomposed(text,
                   {randomTensor(DType::F32, {2, 4, 3}, 5), randomTensor(DType::F32, {2, 3, 6}, 6)},
                   OpKind::Einsum);
  const std::string diag =
      model("%x: f32[b,k,k]", "%y", "  %y = Einsum(%x) {equation = \"bii->bi\"} : f32[b,k]\n");
  for (int64_t k : {1, 4})
    expectDecomposed(diag, {randomTensor(DType::F32, {2, k, k}, 9)}, OpKind::Einsum);
  const std::string text2 =
      model("%a: f32[n,m,4], %b: f32[n,m,4]", "%y",
            "  %y = Einsum(%a, %b) {equation = \"abc,abd->cd\"} : f32[4,4]\n");
  expectDecomposed(text2,
                   {randomTensor(DType::F32, {2, 3, 4}, 7), randomTensor(DType::F32, {2, 3, 4}, 8)},
                   OpKind::Einsum);
}

// ---- losses ------------------------------------------------------------------------

void expectLoss(const std::string &op, const std::string &attrs, const Shape64 &x, bool weights,
                const std::string &dtype = "f32", bool logProb = false) {
  SCOPED_TRACE(::testing::Message()
               << op << " " << attrs << " weights=" << weights << " " << dtype);
  std::string xs = "[", ts = "[", outShape = "[";
  for (size_t i = 0; i < x.size(); ++i) {
    xs += (i ? "," : "") + std::to_string(x[i]);
    if (i != 1) ts += (ts.size() > 1 ? "," : "") + std::to_string(x[i]);
  }
  xs += "]";
  ts += "]";
  const bool none = attrs.find("none") != std::string::npos;
  const std::string lossType = dtype + (none ? ts : "[]");
  std::string inputs = "%x: " + dtype + xs + ", %t: i64" + ts;
  if (weights) inputs += ", %w: " + dtype + "[" + std::to_string(x[1]) + "]";
  const std::string outs = logProb ? "%loss, %lp" : "%loss";
  const std::string results = logProb ? "%loss, %lp" : "%loss";
  const std::string types = logProb ? lossType + ", " + dtype + xs : lossType;
  const std::string text = model(inputs, outs,
                                 "  " + results + " = " + op + "(%x, %t" + (weights ? ", %w" : "") +
                                     ") " + attrs + " : " + types + "\n");
  Shape64 t = x;
  t.erase(t.begin() + 1);
  Tensor target = randomTensor(DType::I64, t, 9, 0, double(x[1]));
  if (attrs.find("ignore_index") != std::string::npos)
    for (int64_t i = 0; i < target.numel(); i += 3) target.setInt(i, -1);
  std::vector<Tensor> in{randomTensor(dt(dtype), x, 10, -3, 0), target};
  if (weights) in.push_back(randomTensor(dt(dtype), {x[1]}, 11, 0.1, 2));
  expectDecomposed(text, in,
                   op == "NegativeLogLikelihoodLoss" ? OpKind::NegativeLogLikelihoodLoss
                                                     : OpKind::SoftmaxCrossEntropyLoss,
                   dtype == "f16" ? 3e-3 : 1e-5);
}

TEST(DecomposeNumerics, LossesInEveryReductionWithWeightsAndIgnoredTargets) {
  for (const char *op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"})
    for (const char *attrs :
         {"{reduction = \"none\"}", "{reduction = \"sum\"}", "{}", "{ignore_index = -1}",
          "{ignore_index = -1, reduction = \"sum\"}", "{ignore_index = -1, reduction = \"none\"}"})
      for (bool weights : {false, true}) {
        expectLoss(op, attrs, {3, 5}, weights);
        expectLoss(op, attrs, {2, 4, 3, 2}, weights);
      }
  expectLoss("SoftmaxCrossEntropyLoss", "{}", {3, 5, 2}, true, "f32", true);
  expectLoss("SoftmaxCrossEntropyLoss", "{ignore_index = -1}", {3, 5}, false, "f64", true);
  expectLoss("NegativeLogLikelihoodLoss", "{}", {3, 5}, true, "f16");
}

// ---- Dropout ------------------------------------------------------------------------

TEST(DecomposeNumerics, DropoutWithConstantTrainingModeAndZeroRatioCopies) {
  const std::string text = model("%x: f32[3,4]", "%y, %m",
                                 "  %r = Constant() {value = dense<f32[]> [0.0]} : f32[]\n"
                                 "  %on = Constant() {value = dense<bool[]> [true]} : bool[]\n"
                                 "  %y, %m = Dropout(%x, %r, %on) : f32[3,4], bool[3,4]\n");
  expectDecomposed(text, {randomTensor(DType::F32, {3, 4}, 12)}, OpKind::Dropout);
  testing::OpCheckOptions o0;
  o0.optLevel = 0;
  testing::expectArtifactMatchesInterpreter(text, {randomTensor(DType::F32, {3, 4}, 12)}, o0);
}

} // namespace
} // namespace kiln
