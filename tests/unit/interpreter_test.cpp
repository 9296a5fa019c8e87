// Tests of the interpreter's driver (not of single kernels, which the ONNX
// conformance suite covers): bad values reaching kernels become errors that
// name the node, and regions read outer-scope values.
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

Model parse(const char *text) {
  auto m = parseModel(text, "test.kir");
  EXPECT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(verifyModel(*m).ok());
  return std::move(*m);
}

TEST(Interpreter, SequenceReachingATensorOpIsAnErrorNamingTheNode) {
  Model m = parse(R"(graph @g(%x: f32[2]) -> (%y) {
  %s = SequenceConstruct(%x) : seq<f32[2]>
  %y = Relu(%s) name "relu" : f32[*]
})");
  Interpreter interp;
  auto out = interp.run(*m.graph, {RtValue(Tensor(DType::F32, {2}))});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("node 'relu' (Relu): input 0"), std::string::npos)
      << out.error().message;
  EXPECT_NE(out.error().message.find("expected a tensor"), std::string::npos);
}

TEST(Interpreter, TensorTooLargeToAllocateIsAnErrorNotACrash) {
  Model m = parse(R"(graph @g() -> (%y) {
  %shape = Constant() {value = dense<i64[3]> [4000000000, 4000000000, 4000000000]} : i64[3]
  %y = ConstantOfShape(%shape) name "fill" : f32[*]
})");
  Interpreter interp;
  auto out = interp.run(*m.graph, {});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("node 'fill' (ConstantOfShape)"), std::string::npos)
      << out.error().message;
}

TEST(Interpreter, RegionsReadValuesOfTheEnclosingGraph) {
  Model m = parse(R"(graph @g(%c: bool[], %x: f32[2]) -> (%y) {
  %n = Neg(%x) : f32[2]
  %y = If(%c) {else_branch = graph @e() -> (%r) {
    %r = Relu(%n) : f32[2]
  }, then_branch = graph @t() -> (%a) {
    %a = Abs(%n) : f32[2]
  }} : f32[2]
})");
  Tensor x = Tensor::fromVector<float>({1.5f, -2.0f}, {2});
  Interpreter interp;
  auto thenOut = interp.run(*m.graph, {RtValue(Tensor::scalar<bool>(true)), RtValue(x)});
  ASSERT_TRUE(thenOut.ok()) << thenOut.error().message;
  EXPECT_EQ((*thenOut)[0].tensor.data<float>()[0], 1.5f);
  EXPECT_EQ((*thenOut)[0].tensor.data<float>()[1], 2.0f);
  auto elseOut = interp.run(*m.graph, {RtValue(Tensor::scalar<bool>(false)), RtValue(x)});
  ASSERT_TRUE(elseOut.ok()) << elseOut.error().message;
  EXPECT_EQ((*elseOut)[0].tensor.data<float>()[0], 0.0f);
  EXPECT_EQ((*elseOut)[0].tensor.data<float>()[1], 2.0f);
}

TEST(Interpreter, InputsAreCheckedAgainstDeclaredDTypeShapeAndSymbols) {
  Model m = parse(R"(graph @g(%a: f32[n,2], %b: f32[n,2]) -> (%y) {
  %y = Add(%a, %b) : f32[n,2]
})");
  Interpreter interp;
  auto wrongDType = interp.run(*m.graph, {RtValue(Tensor(DType::I32, {1, 2})),
                                          RtValue(Tensor(DType::F32, {1, 2}))});
  ASSERT_FALSE(wrongDType.ok());
  EXPECT_NE(wrongDType.error().message.find("input 'a' expects dtype f32, got i32"),
            std::string::npos);
  auto symbolClash = interp.run(*m.graph, {RtValue(Tensor(DType::F32, {1, 2})),
                                           RtValue(Tensor(DType::F32, {3, 2}))});
  ASSERT_FALSE(symbolClash.ok());
  EXPECT_NE(symbolClash.error().message.find("symbol 'n'"), std::string::npos)
      << symbolClash.error().message;
}

} // namespace
} // namespace kiln
