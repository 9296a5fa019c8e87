// Helpers of the conv-family lowering tests (lower_conv_ops_test.cpp,
// lower_pool_ops_test.cpp, lower_matmul_ops_test.cpp), beside op_check.h:
//
//   * dense(): a tensor as a Constant's IR text, for models with weights;
//   * expectRunError(): the model compiles to an artifact and its run fails
//     with a message containing the given text;
//   * expectGeneralVariantsMatchInterpreter(): compiles the model (JIT),
//     then runs its program with every step that has a general variant
//     (program.h: the dispatch a microkernel step falls back to) replaced
//     by that variant, and compares with the interpreter. That is how the
//     f32 forms the microkernels take are checked: the artifact path never
//     reaches their lowering unless a run does not fit the microkernel.
#pragma once

#include "op_check.h"

#include "backend/cpu/compiler.h"
#include "artifact_runner.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "package/package.h"
#include "runtime/api/model.h"
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace kiln::testing {

// `t` as the value of a Constant: dense<f32[2,3]> [...].
inline std::string dense(const Tensor &t) {
  std::string s = "dense<" + std::string(dtypeName(t.dtype())) + "[";
  for (size_t i = 0; i < t.shape().size(); ++i) s += (i ? "," : "") + std::to_string(t.dim(i));
  s += "]> [";
  char buf[64];
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isFloat(t.dtype())) {
      std::snprintf(buf, sizeof buf, "%.9e", t.getDouble(i));
    } else {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(t.getInt(i)));
    }
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + "]";
}

// The IR type text of a tensor: f32[2,3].
inline std::string typeText(DType d, const Shape64 &shape) {
  std::string s = std::string(dtypeName(d)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

inline void expectRunError(const std::string &model, const std::vector<Tensor> &inputs,
                           const std::string &needle) {
  auto parsed = parseModel(model, "test.kir");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  package::PackageOptions po;
  auto bytes = package::packageModel(std::move(*parsed), po);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto loaded = rt::LoadedModel::fromMemory(bytes->data(), bytes->size());
  ASSERT_FALSE(loaded.error) << loaded.error->message;
  rt::Session session(*loaded.value, 1);
  auto got = session.run(inputs);
  ASSERT_FALSE(got.ok()) << "the run should fail with '" << needle << "'";
  EXPECT_NE(got.error().message.find(needle), std::string::npos) << got.error().message;
}

inline void expectClose(const Tensor &got, const Tensor &want, const OpCheckOptions &o) {
  ASSERT_EQ(dtypeName(got.dtype()), dtypeName(want.dtype()));
  ASSERT_EQ(shapeToString(got.shape()), shapeToString(want.shape()));
  int reported = 0;
  for (int64_t i = 0; i < want.numel() && reported < 10; ++i) {
    const double g = got.getDouble(i), w = want.getDouble(i);
    if (std::isnan(g) && std::isnan(w)) continue;
    if (!isFloat(want.dtype()) ? got.getInt(i) == want.getInt(i)
                               : (g == w || std::fabs(g - w) <= o.atol + o.rtol * std::fabs(w)))
      continue;
    ADD_FAILURE() << "element " << i << ": got " << g << ", want " << w;
    ++reported;
  }
}

// Returns the number of general variants (dispatches) that ran; the caller
// expects some.
inline int expectGeneralVariantsMatchInterpreter(const std::string &model,
                                                 const std::vector<Tensor> &inputs,
                                                 const OpCheckOptions &o = {}) {
  auto parsed = parseModel(model, "test.kir");
  EXPECT_TRUE(parsed.ok()) << parsed.error().message;
  if (!parsed.ok()) return 0;
  auto compiled = ArtifactRunner::compile(std::move(*parsed), package::PackageOptions{}, 2);
  EXPECT_TRUE(compiled.ok()) << compiled.error().message;
  if (!compiled.ok()) return 0;
  const cpu::Program &p = (*compiled)->program();
  cpu::Frame frame;
  frame.slots.resize(size_t(p.numSlots));
  for (size_t i = 0; i < inputs.size(); ++i)
    frame.slots[size_t(p.inputSlots[i])] = RtValue(inputs[i]);
  for (const auto &[slot, value] : p.constants) frame.slots[size_t(slot)] = value;
  runtime::ThreadPool pool(2);
  Interpreter interp;
  cpu::ExecContext ctx{&pool, nullptr, nullptr};
  int variants = 0;
  for (const auto &step : p.steps) {
    const cpu::Step *s = step->generalVariant ? step->generalVariant.get() : step.get();
    variants += s != step.get() && s->kind() == cpu::StepKind::Dispatch;
    Status st = s->run(frame, ctx);
    EXPECT_TRUE(st.ok()) << st.error().message;
    if (!st.ok()) return variants;
  }
  auto again = parseModel(model, "test.kir");
  std::vector<RtValue> in;
  for (const Tensor &t : inputs) in.emplace_back(t);
  auto want = interp.run(*again->graph, std::move(in));
  EXPECT_TRUE(want.ok()) << want.error().message;
  if (!want.ok()) return variants;
  for (size_t i = 0; i < want->size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    expectClose(frame.slots[size_t(p.outputSlots[i])].tensor, (*want)[i].tensor, o);
  }
  return variants;
}

} // namespace kiln::testing
