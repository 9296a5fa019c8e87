// Type and shape inference for the ops of ir/ops/signal.def: DFT, STFT, the
// window functions, MelWeightMatrix and the text ops. Lengths that come from
// inputs (dft_length, frame_step, window size...) are static only when a
// Constant produces them; otherwise those dims are unknown.
#include "ir/infer/families.h"
#include "ir/infer/infer.h"

#include <algorithm>

namespace kiln {

namespace {

// A one-element constant integer input, if there is one.
std::optional<int64_t> constantScalar(const InferContext &ctx, int i) {
  if (!ctx.has(i)) return std::nullopt;
  auto v = ctx.constantInts(i);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

// The dtype named by the output_datatype attribute.
Expected<DType> outputDType(const InferContext &ctx) {
  int64_t code = ctx.node().getInt("output_datatype");
  auto d = dtypeFromOnnx(static_cast<int>(code));
  if (!d || !isNumeric(*d)) return ctx.error("output_datatype ", code, " is not a numeric dtype");
  return *d;
}

Dim dimOf(std::optional<int64_t> v) {
  return v ? Dim(*v) : Dim::unknown();
}

// ---- DFT and STFT ------------------------------------------------------------------

// The output extent along the transformed axis, from the DFT length `n`
// (a dim: static, symbolic or unknown).
Dim dftOutputDim(const Dim &n, bool onesided, bool irfft) {
  if (irfft || !onesided) return n;
  return n.isStatic() ? Dim(n.value() / 2 + 1) : Dim::unknown();
}

Status inferDft(InferContext &ctx) {
  const Shape &s = ctx.inputShape(0);
  const DType d = ctx.inputDType(0);
  if (!s.rankKnown || s.rank() < 2) {
    ctx.setOutput(0, d, Shape::unranked());
    return Status::success();
  }
  const bool inverse = ctx.node().getInt("inverse") != 0;
  const bool onesided = ctx.node().getInt("onesided") != 0;
  const bool irfft = inverse && onesided;
  const int64_t rank = s.rank();
  Shape out = s;
  out.dims.back() = Dim(irfft ? 1 : 2);

  std::optional<int64_t> axis = ctx.node().getInt("axis");
  if (ctx.has(2)) axis = constantScalar(ctx, 2);
  if (!axis) { // axis only known at run time: any dim but the last may change
    for (int64_t i = 0; i + 1 < rank; ++i) out.dims[i] = Dim::unknown();
    ctx.setOutput(0, d, out);
    return Status::success();
  }
  int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (a < 0 || a >= rank - 1)
    return ctx.error("axis ", *axis, " is out of range for an input of rank ", rank);

  Dim n = s.dims[a];
  if (ctx.has(1))
    n = dimOf(constantScalar(ctx, 1));
  else if (irfft)
    n = n.isStatic() ? Dim(2 * (n.value() - 1)) : Dim::unknown();
  out.dims[a] = dftOutputDim(n, onesided, irfft);
  ctx.setOutput(0, d, out);
  return Status::success();
}

// [batch, length, 1|2] -> [batch, frames, bins, 2].
Status inferStft(InferContext &ctx) {
  const Shape &s = ctx.inputShape(0);
  const DType d = ctx.inputDType(0);
  Dim batch = s.rankKnown && s.rank() == 3 ? s.dims[0] : Dim::unknown();
  Dim frameLength = ctx.has(3) ? dimOf(constantScalar(ctx, 3)) : Dim::unknown();
  if (!ctx.has(3) && ctx.has(2) && ctx.inputShape(2).rankKnown && ctx.inputShape(2).rank() == 1)
    frameLength = ctx.inputShape(2).dims[0];
  std::optional<int64_t> step = constantScalar(ctx, 1);

  Dim frames = Dim::unknown();
  if (s.rankKnown && s.rank() == 3 && s.dims[1].isStatic() && frameLength.isStatic() && step &&
      *step > 0 && s.dims[1].value() >= frameLength.value())
    frames = Dim(1 + (s.dims[1].value() - frameLength.value()) / *step);
  const bool onesided = ctx.node().getInt("onesided") != 0;
  ctx.setOutput(0, d, Shape({batch, frames, dftOutputDim(frameLength, onesided, false), Dim(2)}));
  return Status::success();
}

// ---- windows and mel matrix ------------------------------------------------------------

Status inferWindow(InferContext &ctx) {
  KILN_ASSIGN_OR_RETURN(DType d, outputDType(ctx));
  ctx.setOutput(0, d, Shape({dimOf(constantScalar(ctx, 0))}));
  return Status::success();
}

Status inferMelWeightMatrix(InferContext &ctx) {
  KILN_ASSIGN_OR_RETURN(DType d, outputDType(ctx));
  std::optional<int64_t> dftLength = constantScalar(ctx, 1);
  Dim bins = dftLength ? Dim(*dftLength / 2 + 1) : Dim::unknown();
  ctx.setOutput(0, d, Shape({bins, dimOf(constantScalar(ctx, 0))}));
  return Status::success();
}

// ---- text ------------------------------------------------------------------------

// [C] or [1, C]; the kept count depends on the strings unless there are no
// stopwords (then only an empty input changes shape, to one empty string).
Status inferStringNormalizer(InferContext &ctx) {
  const Shape &s = ctx.inputShape(0);
  if (!s.rankKnown || s.rank() < 1 || s.rank() > 2) {
    ctx.setOutput(0, DType::String, Shape::unranked());
    return Status::success();
  }
  const Dim &c = s.dims.back();
  const bool unchanged =
      ctx.node().getStrings("stopwords").empty() && c.isStatic() && c.value() > 0;
  Dim kept = unchanged ? c : Dim::unknown();
  ctx.setOutput(0, DType::String, s.rank() == 1 ? Shape({kept}) : Shape({Dim(1), kept}));
  return Status::success();
}

// [C] -> [size], [N, C] -> [N, size], size = max(ngram_indexes) + 1.
Status inferTfIdfVectorizer(InferContext &ctx) {
  int64_t size = 0;
  for (int64_t c : ctx.node().getInts("ngram_indexes")) size = std::max(size, c + 1);
  const Shape &s = ctx.inputShape(0);
  if (!s.rankKnown || s.rank() < 1 || s.rank() > 2) {
    ctx.setOutput(0, DType::F32, Shape::unranked());
    return Status::success();
  }
  ctx.setOutput(0, DType::F32, s.rank() == 1 ? Shape({Dim(size)}) : Shape({s.dims[0], Dim(size)}));
  return Status::success();
}

} // namespace

void registerSignalInference(InferTable &t) {
  t.add(OpKind::DFT, inferDft);
  t.add(OpKind::STFT, inferStft);
  t.add(OpKind::HannWindow, inferWindow);
  t.add(OpKind::HammingWindow, inferWindow);
  t.add(OpKind::BlackmanWindow, inferWindow);
  t.add(OpKind::MelWeightMatrix, inferMelWeightMatrix);
  t.add(OpKind::StringNormalizer, inferStringNormalizer);
  t.add(OpKind::TfIdfVectorizer, inferTfIdfVectorizer);
}

} // namespace kiln
