// The Vulkan target's code generator: Kernel IR -> GLSL -> SPIR-V, every
// module validated by SPIRV-Tools. The kernels are the ones kiln really
// generates: every Kernel IR file of tests/lit/kernel, and every kernel the
// compiler lowers for the ONNX node test cases (all ops, dtypes and forms
// the conformance suite covers). Running them on a device is
// vulkan_device_test.cpp's job.
#include "backend/cpu/compiler.h"
#include "codegen/vulkan/emit_glsl.h"
#include "codegen/vulkan/loop_count.h"
#include "codegen/vulkan/spirv.h"
#include "frontend/onnx/importer.h"
#include "kernel/parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace kiln {
namespace {

namespace fs = std::filesystem;

// GLSL -> SPIR-V -> validated, or the first error (with the shader).
Status toValidSpirv(const kir::Kernel &k) {
  KILN_ASSIGN_OR_RETURN(std::string glsl, codegen::emitGlsl(k));
  auto words = codegen::compileGlslCompute(glsl);
  if (!words.ok()) return makeError(words.error().message, "\n", glsl);
  Status valid = codegen::validateSpirv(*words);
  if (!valid.ok()) return makeError(valid.error().message, "\n", glsl);
  return Status::success();
}

std::string readFile(const fs::path &p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(VulkanCodegen, EveryLitKernelBecomesValidSpirv) {
  int kernels = 0;
  for (const auto &entry : fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "tests/lit/kernel")) {
    if (entry.path().extension() != ".kir") continue;
    auto parsed = parseKernels(readFile(entry.path()), entry.path().string());
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    for (const kir::Kernel &k : *parsed) {
      Status s = toValidSpirv(k);
      EXPECT_TRUE(s.ok()) << entry.path() << ": " << s.error().message;
      ++kernels;
    }
  }
  EXPECT_GE(kernels, 7);
}

TEST(VulkanCodegen, EveryKernelOfTheOnnxNodeTestsBecomesValidSpirv) {
  const fs::path node = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(node)) GTEST_SKIP() << node << " not installed (libonnx-testdata)";
  std::vector<fs::path> cases;
  for (const auto &entry : fs::directory_iterator(node))
    if (fs::exists(entry.path() / "model.onnx")) cases.push_back(entry.path());
  std::sort(cases.begin(), cases.end());
  int compiled = 0, kernels = 0;
  std::vector<std::string> failures;
  cpu::CompileOptions options;
  options.cpuCode = false;
  for (const fs::path &c : cases) {
    auto model = importOnnxFile((c / "model.onnx").string());
    if (!model.ok()) continue; // the importer's own tests cover these
    auto cm = cpu::CompiledModel::compile(std::move(*model), options);
    if (!cm.ok()) continue; // not compilable for any target yet (conformance lists them)
    ++compiled;
    for (const kir::Kernel &k : (*cm)->kernels()) {
      ++kernels;
      Status s = toValidSpirv(k);
      if (s.ok()) continue;
      if (failures.size() < 5)
        failures.push_back(c.filename().string() + " / " + k.name + ": " + s.error().message);
      else
        failures.push_back(c.filename().string() + " / " + k.name);
    }
  }
  EXPECT_GT(compiled, 900);
  EXPECT_GT(kernels, 1000);
  std::string list;
  for (const std::string &f : failures) list += "\n" + f;
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << kernels
                                << " kernels did not become valid SPIR-V:" << list;
  std::printf("%d node test cases, %d kernels\n", compiled, kernels);
}

// The iteration count drivers with a loop budget are checked against: the
// parallel loop is one iteration per invocation, nested loops multiply,
// sibling loops add, an If's body counts.
TEST(VulkanCodegen, CountsLoopIterationsPerInvocation) {
  kir::KernelBuilder b("nest");
  const int y = b.addBuffer("y", DType::F32, true);
  const int n = b.addParam("n"), m = b.addParam("m");
  const int i = b.beginLoop(kir::Affine::param(n), {kir::Schedule::Kind::Parallel, 1});
  const int j = b.beginLoop(kir::Affine::param(m, 2)); // 2m trips
  b.beginLoop(kir::Affine::constant(3));               // 3 per j
  b.endLoop();
  b.endLoop();
  b.beginIf(b.compare(kir::Opcode::Lt, DType::I64, b.index(kir::Affine{}.add(1, -1, i)),
                      b.intConstant(DType::I64, 1)));
  b.beginLoop(kir::Affine::param(n)); // n trips
  b.endLoop();
  b.endIf();
  kir::Affine at;
  at.add(1, -1, i);
  b.store(y, at, b.constant(DType::F32, 1.0));
  b.endLoop();
  (void)j;
  const kir::Kernel k = b.finish();
  // 2m * (1 + 3) + n, with n = 10, m = 5.
  EXPECT_EQ(codegen::loopIterationsPerInvocation(k, {10, 5}), 2 * 5 * 4 + 10);
  EXPECT_EQ(codegen::loopIterationsPerInvocation(k, {10, 0}), 10);
  EXPECT_EQ(codegen::loopIterationsPerInvocation(k, {int64_t(1) << 62, int64_t(1) << 62}),
            std::numeric_limits<int64_t>::max());
}

} // namespace
} // namespace kiln
