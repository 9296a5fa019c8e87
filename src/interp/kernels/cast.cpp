// Interpreter kernels for Cast and CastLike across every dtype, strings
// included. The rules, one per pair of kinds:
//   - int -> int wraps (two's complement, like C++20 and numpy);
//   - float -> int truncates toward zero, NaN gives 0, out-of-range values
//     saturate (ONNX leaves them undefined; see ew::floatToInt);
//   - anything -> f16/bf16 rounds once, to nearest even;
//   - x -> bool is x != 0; bool -> number is 0 or 1;
//   - numbers <-> strings as numpy does (support/string_cast.h, the same
//     code the runtime's host op runs).
#include "interp/kernels/common.h"
#include "interp/kernels/elementwise_helpers.h"
#include "interp/kernels/families.h"
#include "support/string_cast.h"

namespace kiln {

namespace {

using namespace ew;

// ---- kernels --------------------------------------------------------------------------

Expected<Tensor> castTensor(const KernelContext &ctx, const Tensor &x, DType to) {
  if (x.dtype() == to) return x;
  if (to == DType::String) return numbersToStrings(x);
  if (x.dtype() == DType::String) {
    auto y = stringsToNumbers(x, to);
    if (!y.ok()) return ctx.error(y.error().message);
    return y;
  }
  return convertTensor(x, to);
}

Status castKernel(KernelContext &ctx) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  int64_t code = ctx.node().getInt("to");
  std::optional<DType> to = dtypeFromOnnx(static_cast<int>(code));
  if (!to) return ctx.error("cast to ONNX dtype ", code, " is not supported");
  KILN_ASSIGN_OR_RETURN(Tensor y, castTensor(ctx, ctx.in(0), *to));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

Status castLikeKernel(KernelContext &ctx) {
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 0));
  KILN_RETURN_IF_ERROR(requireTensor(ctx, 1));
  KILN_ASSIGN_OR_RETURN(Tensor y, castTensor(ctx, ctx.in(0), ctx.in(1).dtype()));
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

} // namespace

void registerCastKernels(KernelTable &t) {
  t.add(OpKind::Cast, castKernel);
  t.add(OpKind::CastLike, castLikeKernel);
}

} // namespace kiln
