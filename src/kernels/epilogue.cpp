// applyEpilogue's run-time dispatch and the portable implementation (plain
// scalar C++ with the standard library's exp and tanh: the cross-check for
// the vector paths, which are in epilogue_avx512.cpp and epilogue_avx2.cpp).
#include "kernels/epilogue.h"

#include "kernels/epilogue_impl.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace kiln::kernels {

bool epilogueIsElementwise(const EpilogueOp *ops, int count) {
  for (int i = 0; i < count; ++i) switch (ops[i].kind) {
    case EpilogueKind::kAddRowBias:
    case EpilogueKind::kAddColBias:
    case EpilogueKind::kMulRowScale:
    case EpilogueKind::kMulColScale:
      return false;
    default:
      break;
    }
  return true;
}

const char *epilogueKindName(EpilogueKind kind) {
  switch (kind) {
  case EpilogueKind::kAddRowBias:
    return "add_row_bias";
  case EpilogueKind::kAddColBias:
    return "add_col_bias";
  case EpilogueKind::kMulRowScale:
    return "mul_row_scale";
  case EpilogueKind::kMulColScale:
    return "mul_col_scale";
  case EpilogueKind::kGelu:
    return "gelu";
  case EpilogueKind::kGeluTanh:
    return "gelu_tanh";
  case EpilogueKind::kAddTensor:
    return "add_tensor";
  case EpilogueKind::kRelu:
    return "relu";
  case EpilogueKind::kClip:
    return "clip";
  case EpilogueKind::kLeakyRelu:
    return "leaky_relu";
  case EpilogueKind::kSigmoid:
    return "sigmoid";
  case EpilogueKind::kSilu:
    return "silu";
  case EpilogueKind::kHardSigmoid:
    return "hard_sigmoid";
  case EpilogueKind::kHardSwish:
    return "hard_swish";
  case EpilogueKind::kTanh:
    return "tanh";
  }
  return "?";
}

void Epilogue::push(EpilogueOp op) {
  assert(count < kMaxOps && "too many epilogue ops");
  if (count < kMaxOps) ops[count++] = op;
}

namespace detail {
namespace {

float hardSigmoid(float x, float a, float b) {
  return std::max(0.0f, std::min(1.0f, a * x + b));
}

float applyOp(const EpilogueOp &op, float v, int64_t row, int64_t col) {
  switch (op.kind) {
  case EpilogueKind::kAddRowBias:
    return v + op.data[row];
  case EpilogueKind::kAddColBias:
    return v + op.data[col];
  case EpilogueKind::kMulRowScale:
    return v * op.data[row];
  case EpilogueKind::kMulColScale:
    return v * op.data[col];
  case EpilogueKind::kAddTensor:
    return v + op.data[row * op.ld + col];
  case EpilogueKind::kRelu:
    return std::max(v, 0.0f);
  case EpilogueKind::kClip:
    return std::min(std::max(v, op.a), op.b);
  case EpilogueKind::kLeakyRelu:
    return v < 0.0f ? v * op.a : v;
  case EpilogueKind::kSigmoid:
    return 1.0f / (1.0f + std::exp(-v));
  case EpilogueKind::kSilu:
    return v / (1.0f + std::exp(-v));
  case EpilogueKind::kHardSigmoid:
    return hardSigmoid(v, op.a, op.b);
  case EpilogueKind::kHardSwish:
    return v * hardSigmoid(v, op.a, op.b);
  case EpilogueKind::kTanh:
    return std::tanh(v);
  case EpilogueKind::kGelu:
    return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
  case EpilogueKind::kGeluTanh:
    return 0.5f * v * (1.0f + std::tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
  return v;
}

void applyPortable(const EpilogueOp *ops, int count, float *c, int64_t ldc, int64_t row0,
                   int64_t col0, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float v = c[i * ldc + j];
      for (int o = 0; o < count; ++o) v = applyOp(ops[o], v, row0 + i, col0 + j);
      c[i * ldc + j] = v;
    }
}

} // namespace

EpilogueFn epiloguePortable() {
  return applyPortable;
}

EpilogueFn epilogueFor(GemmIsa isa) {
  switch (resolveGemmIsa(isa)) {
#if defined(__x86_64__)
  case GemmIsa::kAvx512:
    return epilogueAvx512();
  case GemmIsa::kAvx2:
    return epilogueAvx2();
#endif
  default:
    return epiloguePortable();
  }
}

} // namespace detail

void applyEpilogue(const Epilogue &ep, float *c, int64_t ldc, int64_t row0, int64_t col0,
                   int64_t rows, int64_t cols) {
  if (ep.count == 0 || rows <= 0 || cols <= 0) return;
  static const detail::EpilogueFn fn = detail::epilogueFor(GemmIsa::kAuto);
  fn(ep.ops, ep.count, c, ldc, row0, col0, rows, cols);
}

} // namespace kiln::kernels
