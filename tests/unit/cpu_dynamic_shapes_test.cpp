// Symbolic dims stay symbolic through code generation (DESIGN.md principle
// 5): a model compiled once runs at several sizes without recompiling, and
// every size matches the interpreter. PP-OCR rec runs at widths 160, 320 and
// 640, and PP-OCR cls (symbolic batch) at batch 1, 3 and 8, each from one
// compilation.
#include "backend/cpu/compiler.h"
#include "frontend/onnx/importer.h"
#include "artifact_runner.h"
#include "interp/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

namespace kiln {
namespace {

std::string corpusPath(const std::string &file) {
  const char *dir = std::getenv("KILN_CORPUS_DIR");
  std::string base = dir ? dir : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") +
                                     "/.cache/kiln/corpus";
  return base + "/" + file;
}

Tensor randomImage(Shape64 shape, uint64_t seed) {
  Tensor t(DType::F32, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float &v : t.span<float>()) v = u(rng);
  return t;
}

double relativeL2(const Tensor &a, const Tensor &b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.getDouble(i) - b.getDouble(i);
    num += d * d;
    den += b.getDouble(i) * b.getDouble(i);
  }
  return std::sqrt(num) / (den > 0 ? std::sqrt(den) : 1.0);
}

// Compiles `file` once and runs it on each shape, then on each shape again
// in reverse order (so later runs reuse activation memory planned for other
// sizes), comparing every run with the interpreter on the same input.
void runAtSizes(const std::string &file, std::vector<Shape64> shapes) {
  const size_t n = shapes.size();
  for (size_t i = n; i-- > 0;) shapes.push_back(shapes[i]);
  const std::string path = corpusPath(file);
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run scripts/fetch_corpus.sh";
  auto reference = importOnnxFile(path);
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  auto model = importOnnxFile(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto compiled = testing::ArtifactRunner::compile(std::move(*model), {}, 2);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const int kernels = (*compiled)->stats().generatedKernels;
  Interpreter interp;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor x = randomImage(shapes[i], 100 + i);
    auto want = interp.run(*reference->graph, {RtValue(x)});
    ASSERT_TRUE(want.ok()) << want.error().message;
    auto got = (*compiled)->run({RtValue(x)});
    ASSERT_TRUE(got.ok()) << shapeToString(shapes[i]) << ": " << got.error().message;
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < got->size(); ++o) {
      const Tensor &g = (*got)[o].tensor, &w = (*want)[o].tensor;
      ASSERT_EQ(g.shape(), w.shape()) << "input " << shapeToString(shapes[i]);
      EXPECT_LE(relativeL2(g, w), 1e-4) << "input " << shapeToString(shapes[i]);
    }
  }
  // Nothing was compiled after the first compilation.
  EXPECT_EQ((*compiled)->stats().generatedKernels, kernels);
}

TEST(CpuDynamicShapes, RecognizerRunsAtThreeWidthsFromOneCompilation) {
  runAtSizes("ch_PP-OCRv4_rec_infer.onnx", {{1, 3, 48, 160}, {1, 3, 48, 320}, {1, 3, 48, 640}});
}

TEST(CpuDynamicShapes, ClassifierRunsAtThreeBatchSizesFromOneCompilation) {
  runAtSizes("ch_ppocr_mobile_v2.0_cls_infer.onnx",
             {{1, 3, 48, 192}, {3, 3, 48, 192}, {8, 3, 48, 192}});
}

} // namespace
} // namespace kiln
