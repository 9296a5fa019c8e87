// kiln verify's pieces without running a model: the metrics and their
// tolerance rule, the per-layer bisection over a small graph, and the JSON
// and HTML a result turns into.
#include "ir/parser.h"
#include "verify/report.h"
#include "verify/verify.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;
using namespace kiln::verify;

namespace {

Tensor f32(std::vector<float> v) {
  Shape64 shape{static_cast<int64_t>(v.size())};
  return Tensor::fromVector(v, shape);
}

} // namespace

TEST(VerifyMetrics, IdenticalTensorsPassWithZeroError) {
  Metrics m = compareTensors(f32({1, -2, 3}), f32({1, -2, 3}), defaultTolerance(DType::F32));
  EXPECT_TRUE(m.pass);
  EXPECT_EQ(m.maxAbsErr, 0);
  EXPECT_EQ(m.relL2, 0);
  EXPECT_DOUBLE_EQ(m.cosine, 1);
  EXPECT_EQ(m.outsideTolerance, 0);
}

TEST(VerifyMetrics, ComputesEveryFigure) {
  Metrics m = compareTensors(f32({1, 2, 3, 4}), f32({1, 2, 3, 2}), {0, 0.5});
  EXPECT_FALSE(m.pass);
  EXPECT_EQ(m.outsideTolerance, 1);
  EXPECT_DOUBLE_EQ(m.maxAbsErr, 2);
  EXPECT_DOUBLE_EQ(m.mae, 0.5);
  EXPECT_DOUBLE_EQ(m.rmse, 1);
  EXPECT_NEAR(m.relL2, 2 / std::sqrt(18.0), 1e-12);
  EXPECT_NEAR(m.cosine, 22 / (std::sqrt(30.0) * std::sqrt(18.0)), 1e-12);
}

TEST(VerifyMetrics, ToleranceIsRelativeToTheReference) {
  // |1001 - 1000| = 1 <= 1e-3 * 1000: inside; |1.1 - 1| > 1e-3 * 1: outside.
  EXPECT_TRUE(compareTensors(f32({1001}), f32({1000}), {1e-3, 0}).pass);
  EXPECT_FALSE(compareTensors(f32({1.1f}), f32({1}), {1e-3, 0}).pass);
}

TEST(VerifyMetrics, SmallElementsAreJudgedAtTheTensorsScale) {
  // rms of the reference ~707: an error of 1e-3 on an element that cancelled
  // to 0.002 is rounding at that scale, not a relative error of 50%.
  EXPECT_TRUE(compareTensors(f32({1000, 0.001f}), f32({1000, 0.002f}), {1e-4, 1e-5}).pass);
  EXPECT_FALSE(compareTensors(f32({1000, 1}), f32({1000, 0.002f}), {1e-4, 1e-5}).pass);
}

TEST(VerifyMetrics, NanAndInfAgreeOnlyWithTheirLikes) {
  float nan = NAN, inf = INFINITY;
  Metrics same = compareTensors(f32({nan, inf, 1}), f32({nan, inf, 1}), {1e-4, 1e-5});
  EXPECT_TRUE(same.pass);
  EXPECT_EQ(same.nanGot, 1);
  EXPECT_EQ(same.nanRef, 1);
  EXPECT_EQ(same.infGot, 1);
  Metrics differ = compareTensors(f32({nan, -inf, 1}), f32({0, inf, 1}), {1e-4, 1e-5});
  EXPECT_FALSE(differ.pass);
  EXPECT_EQ(differ.outsideTolerance, 2);
  EXPECT_EQ(differ.nanRef, 0);
  EXPECT_EQ(differ.maxAbsErr, 0); // only the finite pair counts for the error figures
}

TEST(VerifyMetrics, IntegersCompareExactlyByDefault) {
  Tensor a = Tensor::fromVector<int64_t>({1, 2, int64_t(1) << 60}, {3});
  Tensor b = Tensor::fromVector<int64_t>({1, 2, (int64_t(1) << 60) + 1}, {3});
  EXPECT_EQ(defaultTolerance(DType::I64).rtol, 0);
  Metrics m = compareTensors(a, b, defaultTolerance(DType::I64));
  EXPECT_FALSE(m.pass);
  EXPECT_EQ(m.outsideTolerance, 1); // 2^60 and 2^60+1 are one double apart only as ints
}

TEST(VerifyMetrics, ShapeOrDtypeMismatchIsAnErrorThatFails) {
  Metrics m = compareTensors(f32({1, 2}), f32({1, 2, 3}), {1, 1});
  EXPECT_FALSE(m.pass);
  EXPECT_NE(m.error.find("shape [2] vs reference [3]"), std::string::npos);
  Metrics d = compareTensors(f32({1}), Tensor::fromVector<int64_t>({1}, {1}), {1, 1});
  EXPECT_FALSE(d.pass);
  EXPECT_NE(d.error.find("dtype"), std::string::npos);
}

TEST(VerifyTolerance, OverridesApplyToFloatsOnly) {
  VerifyOptions o;
  o.rtol = 0.5;
  o.atol = 2;
  EXPECT_EQ(toleranceFor(DType::F32, o).rtol, 0.5);
  EXPECT_EQ(toleranceFor(DType::F16, o).atol, 2);
  EXPECT_EQ(toleranceFor(DType::I32, o).atol, 0);
}

namespace {

// x -> a = Relu(x) -> b = Neg(a) -> c = Add(b, x) -> y = Neg(c)
Model chain() {
  auto m = parseModel(R"(kiln.model
graph @main(%x: f32[4]) -> (%y) {
  %a = Relu(%x) name "relu" : f32[4]
  %b = Neg(%a) name "neg" : f32[4]
  %c = Add(%b, %x) name "add" : f32[4]
  %y = Neg(%c) name "out" : f32[4]
}
)",
                      "chain");
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return std::move(*m);
}

ValueResult value(const std::string &name, bool pass, double relL2) {
  ValueResult v;
  v.name = name;
  v.metrics.pass = pass;
  v.metrics.relL2 = relL2;
  return v;
}

} // namespace

TEST(VerifyBisect, NamesTheFirstNodeThatDivergesWhileItsInputsAgree) {
  Model m = chain();
  std::unordered_map<std::string, ValueResult> compared = {
      {"a", value("a", true, 1e-8)},
      {"b", value("b", false, 0.3)}, // the culprit
      {"c", value("c", false, 0.2)}, // inherits b's error
      {"y", value("y", false, 0.2)}};
  BisectResult r = bisect(*m.graph, compared);
  ASSERT_EQ(r.layers.size(), 4u);
  ASSERT_EQ(r.firstDivergence, 1);
  EXPECT_EQ(r.layers[1].node, "neg");
  EXPECT_EQ(r.layers[1].op, "Neg");
  EXPECT_EQ(r.layers[1].sourceNodes, std::vector<std::string>{"neg"});
  EXPECT_FALSE(r.layers[2].inputsAgree);
  EXPECT_EQ(r.layers[2].badInputs, std::vector<std::string>{"b"});
}

TEST(VerifyBisect, ValuesMissingFromTheReferenceAreUncheckedNotBlamed) {
  Model m = chain();
  std::unordered_map<std::string, ValueResult> compared = {
      {"a", value("a", true, 0)}, {"c", value("c", false, 0.5)}, {"y", value("y", false, 0.5)}};
  BisectResult r = bisect(*m.graph, compared);
  ASSERT_EQ(r.layers.size(), 3u);
  ASSERT_EQ(r.firstDivergence, 1);
  EXPECT_EQ(r.layers[1].node, "add");
  EXPECT_EQ(r.layers[1].uncheckedInputs, std::vector<std::string>{"b"});
}

TEST(VerifyBisect, AgreementEverywhereHasNoDivergence) {
  Model m = chain();
  std::unordered_map<std::string, ValueResult> compared = {{"a", value("a", true, 0)},
                                                           {"y", value("y", true, 0)}};
  BisectResult r = bisect(*m.graph, compared);
  EXPECT_EQ(r.firstDivergence, -1);
  EXPECT_EQ(r.layers.size(), 2u);
}

namespace {

VerifyResult sampleResult() {
  Model m = chain();
  VerifyResult r;
  r.model = "m\"odel.onnx";
  r.target = "cpu";
  r.reference = "interp";
  r.seed = 7;
  r.inputs.push_back({"x", "f32", "random", {4}});
  ValueResult out = value("y", false, 0.25);
  out.dtype = "f32";
  out.shape = out.refShape = {4};
  out.metrics.cosine = NAN; // not finite: null in JSON
  r.outputs.push_back(out);
  r.bisect = bisect(
      *m.graph,
      {{"a", value("a", true, 0)}, {"b", value("b", false, 0.3)}, {"y", value("y", false, 0.25)}});
  return r;
}

} // namespace

TEST(VerifyReport, JsonHasTheDocumentedFields) {
  std::string json = toJson(sampleResult());
  for (const char *field :
       {"\"schema\": \"kiln-verify/1\"", "\"model\": \"m\\\"odel.onnx\"", "\"pass\": false",
        "\"seed\": 7", "\"rtol\": null", "\"cosine\":null", "\"first_divergence\": {\"index\":1",
        "\"node\":\"neg\"", "\"source_nodes\":[\"neg\"]", "\"layers\": [", "\"nan\":{\"target\":0"})
    EXPECT_NE(json.find(field), std::string::npos) << field << "\n" << json;
}

TEST(VerifyReport, HtmlIsSelfContainedWithTheCurve) {
  std::string page = toHtml(sampleResult());
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("<polyline"), std::string::npos);
  EXPECT_NE(page.find("first divergence: neg"), std::string::npos);
  EXPECT_NE(page.find("m&quot;odel.onnx"), std::string::npos);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg")); // no fetches
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
}
