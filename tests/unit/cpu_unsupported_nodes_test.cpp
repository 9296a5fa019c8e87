// There is no interpreter at run time: a node that no step of the cpu
// target covers is a compile error, and the error lists every such node of
// the model at once, each with its op, input types and why (as the ONNX
// importer lists every unsupported op at once).
#include "backend/cpu/compiler.h"
#include "ir/parser.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(CpuUnsupportedNodes, EveryUncompilableNodeIsListedInOneCompileError) {
  // Bicubic sampling over five spatial dims needs more taps per output than
  // the GridSample lowering takes: a form it refuses by name.
  auto model = parseModel(R"(graph @g(%x: f32[1,1,2,2,2,2,2], %grid: f32[1,2,2,2,2,2,5]) -> (%y, %z) {
  %y = GridSample(%x, %grid) {mode = "cubic"} name "first" : f32[1,1,2,2,2,2,2]
  %z = GridSample(%x, %grid) {mode = "cubic"} name "second" : f32[1,1,2,2,2,2,2]
})",
                          "unsupported.kir");
  ASSERT_TRUE(model.ok()) << model.error().message;
  ASSERT_TRUE(verifyModel(*model).ok());
  auto compiled = cpu::CompiledModel::compile(std::move(*model), cpu::CompileOptions{});
  ASSERT_FALSE(compiled.ok());
  const std::string &message = compiled.error().message;
  EXPECT_EQ(message.rfind("2 nodes cannot be compiled for the cpu target:", 0), 0u) << message;
  for (const char *name : {"node 'first' (GridSample)", "node 'second' (GridSample)"})
    EXPECT_NE(message.find(name), std::string::npos) << message;
  EXPECT_NE(message.find("(f32[1,1,2,2,2,2,2], f32[1,2,2,2,2,2,5]): "), std::string::npos) << message;
}

} // namespace
} // namespace kiln
