// Test helpers for runtime values that are not just tensors (sequences,
// optionals, strings), header-only: running one node on the reference
// interpreter with any values, running IR text through the artifact (compile
// to a `.kiln` in memory, load, run with rt::Session) and comparing every
// output value with the interpreter's, strings and nested values included.
#pragma once

#include "interp/interpreter.h"
#include "ir/parser.h"
#include "package/package.h"
#include "runtime/api/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::testing {

// The static type that describes a run-time value (any shape).
inline Type typeOfValue(const RtValue &v) {
  switch (v.kind) {
  case RtValue::Kind::Sequence:
    return Type::sequence(
        Type::tensor(v.sequence.empty() ? DType::F32 : v.sequence[0].dtype(), Shape::unranked()));
  case RtValue::Kind::Optional:
    return Type::optional(v.inner ? typeOfValue(*v.inner)
                                  : Type::tensor(DType::F32, Shape::unranked()));
  case RtValue::Kind::Tensor: break;
  }
  return Type::tensor(v.tensor.dtype(), Shape::unranked());
}

// Runs one `op` node on the interpreter; an absent input (nullopt) is left
// out. Gives the node's `numOutputs` outputs.
inline Expected<std::vector<RtValue>>
interpretNode(OpKind op, const std::vector<std::optional<RtValue>> &inputs,
              const std::map<std::string, Attribute> &attrs = {}, int numOutputs = 1) {
  Graph g;
  std::vector<Value *> args;
  std::vector<RtValue> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      args.push_back(nullptr);
      continue;
    }
    args.push_back(g.addInput(strCat("in", i), typeOfValue(*inputs[i])));
    values.push_back(*inputs[i]);
  }
  Node *node = g.addNode(op, args, numOutputs, "n");
  for (const auto &[name, a] : attrs) node->setAttr(name, a);
  for (int i = 0; i < numOutputs; ++i) g.addOutput(node->output(i));
  return Interpreter().run(g, std::move(values));
}

// Why `got` differs from `want` ("" when they agree): dtypes, shapes and
// strings exactly, numbers bit for bit unless `rtol` allows floats to differ.
inline std::string valueDiff(const RtValue &got, const RtValue &want, double rtol = 0) {
  if (got.kind != want.kind) return "got " + got.describe() + ", want " + want.describe();
  if (got.isOptional()) {
    if (!got.inner || !want.inner)
      return got.inner || want.inner ? "got " + got.describe() + ", want " + want.describe() : "";
    return valueDiff(*got.inner, *want.inner, rtol);
  }
  if (got.isSequence()) {
    if (got.sequence.size() != want.sequence.size())
      return "got " + got.describe() + ", want " + want.describe();
    for (size_t i = 0; i < got.sequence.size(); ++i)
      if (std::string d = valueDiff(got.sequence[i], want.sequence[i], rtol); !d.empty())
        return "tensor " + std::to_string(i) + ": " + d;
    return "";
  }
  const Tensor &g = got.tensor, &w = want.tensor;
  if (g.dtype() != w.dtype() || g.shape() != w.shape())
    return "got " + got.describe() + ", want " + want.describe();
  if (g.identical(w)) return "";
  for (int64_t i = 0; i < w.numel(); ++i) {
    if (w.dtype() == DType::String) {
      if (g.data<std::string>()[i] != w.data<std::string>()[i])
        return "element " + std::to_string(i) + ": got \"" + g.data<std::string>()[i] +
               "\", want \"" + w.data<std::string>()[i] + "\"";
      continue;
    }
    const size_t size = dtypeSize(w.dtype());
    if (std::memcmp(static_cast<const char *>(g.raw()) + i * size,
                    static_cast<const char *>(w.raw()) + i * size, size) == 0)
      continue;
    const double a = g.getDouble(i), b = w.getDouble(i);
    const bool bothNaN = std::isnan(a) && std::isnan(b);
    const bool close =
        isFloat(w.dtype()) && rtol > 0 && (bothNaN || std::fabs(a - b) <= rtol * std::fabs(b));
    if (!close)
      return "element " + std::to_string(i) + ": got " + std::to_string(a) + ", want " +
             std::to_string(b) + (rtol > 0 ? "" : " (not bit for bit)");
  }
  return "";
}

// Compiles IR text to an artifact, loads it and runs it on `inputs`.
inline Expected<std::vector<RtValue>> runThroughArtifact(const std::string &model,
                                                         std::vector<RtValue> inputs) {
  KILN_ASSIGN_OR_RETURN(Model m, parseModel(model, "test.kir"));
  KILN_ASSIGN_OR_RETURN(std::string bytes, package::packageModel(std::move(m), {}));
  auto loaded = rt::LoadedModel::fromMemory(bytes.data(), bytes.size());
  if (loaded.error) return makeError("load: ", loaded.error->message);
  rt::Session session(*loaded.value, 1);
  return session.run(std::move(inputs));
}

// Every output of the model through the artifact equals the interpreter's
// (or both fail).
inline void expectArtifactMatchesInterpreterValues(const std::string &model,
                                                   const std::vector<RtValue> &inputs,
                                                   double rtol = 0) {
  auto parsed = parseModel(model, "test.kir");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  auto want = Interpreter().run(*parsed->graph, inputs);
  auto got = runThroughArtifact(model, inputs);
  if (!want.ok()) {
    EXPECT_FALSE(got.ok()) << "the interpreter failed (" << want.error().message
                           << ") but the artifact ran";
    return;
  }
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i)
    EXPECT_EQ(valueDiff((*got)[i], (*want)[i], rtol), "") << "output " << i;
}

} // namespace kiln::testing
