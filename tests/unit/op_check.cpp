#include "op_check.h"

#include "interp/interpreter.h"
#include "ir/parser.h"
#include "package/package.h"
#include "runtime/api/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kiln::testing {

Tensor randomTensor(DType dtype, const Shape64 &shape, uint64_t seed, double lo, double hi) {
  Tensor t(dtype, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::Bool)
      t.setInt(i, rng() & 1);
    else if (isFloat(dtype))
      t.setDouble(i, u(rng));
    else
      t.setInt(i, static_cast<int64_t>(std::floor(u(rng))));
  }
  return t;
}

namespace {

Expected<std::string> compileToBytes(const std::string &model, int optLevel,
                                     bool specializedSteps = true) {
  KILN_ASSIGN_OR_RETURN(Model m, parseModel(model, "test.kir"));
  package::PackageOptions po;
  po.optLevel = optLevel;
  po.specializedSteps = specializedSteps;
  return package::packageModel(std::move(m), po);
}

void compareTensors(const Tensor &got, const Tensor &want, const OpCheckOptions &o,
                    const std::string &what) {
  ASSERT_EQ(dtypeName(got.dtype()), dtypeName(want.dtype())) << what;
  ASSERT_EQ(shapeToString(got.shape()), shapeToString(want.shape())) << what;
  int reported = 0;
  for (int64_t i = 0; i < want.numel() && reported < 10; ++i) {
    if (want.dtype() == DType::String) continue;
    if (!isFloat(want.dtype())) {
      if (got.getInt(i) != want.getInt(i)) {
        ADD_FAILURE() << what << " element " << i << ": got " << got.getInt(i) << ", want "
                      << want.getInt(i);
        ++reported;
      }
      continue;
    }
    const double g = got.getDouble(i), w = want.getDouble(i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::fabs(g - w) <= o.atol + o.rtol * std::fabs(w))) {
      ADD_FAILURE() << what << " element " << i << ": got " << g << ", want " << w;
      ++reported;
    }
  }
}

} // namespace

void expectArtifactMatchesInterpreter(const std::string &model, const std::vector<Tensor> &inputs,
                                      const OpCheckOptions &options) {
  auto bytes = compileToBytes(model, options.optLevel, options.specializedSteps);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto loaded = rt::LoadedModel::fromMemory(bytes->data(), bytes->size());
  ASSERT_FALSE(loaded.error) << loaded.error->message;
  rt::Session session(*loaded.value, options.threads);
  auto got = session.run(inputs);
  ASSERT_TRUE(got.ok()) << got.error().message;

  auto parsed = parseModel(model, "test.kir");
  ASSERT_TRUE(parsed.ok());
  std::vector<RtValue> in;
  for (const Tensor &t : inputs) in.emplace_back(t);
  Interpreter interp;
  auto want = interp.run(*parsed->graph, std::move(in));
  ASSERT_TRUE(want.ok()) << want.error().message;
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    ASSERT_TRUE((*got)[i].isTensor() && (*want)[i].isTensor());
    compareTensors((*got)[i].tensor, (*want)[i].tensor, options, "output " + std::to_string(i));
  }
}

std::string artifactCompileError(const std::string &model) {
  auto bytes = compileToBytes(model, 3);
  return bytes.ok() ? "" : bytes.error().message;
}

std::string artifactRunError(const std::string &model, const std::vector<Tensor> &inputs) {
  auto bytes = compileToBytes(model, 3);
  if (!bytes.ok()) {
    ADD_FAILURE() << "does not compile: " << bytes.error().message;
    return "";
  }
  auto loaded = rt::LoadedModel::fromMemory(bytes->data(), bytes->size());
  if (loaded.error) {
    ADD_FAILURE() << "does not load: " << loaded.error->message;
    return "";
  }
  rt::Session session(*loaded.value, 1);
  auto got = session.run(inputs);
  return got.ok() ? "" : got.error().message;
}

} // namespace kiln::testing
