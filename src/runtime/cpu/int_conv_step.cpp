#include "runtime/cpu/int_conv_step.h"

#include "kernels/igemm_conv.h"
#include "runtime/cpu/steps.h"

namespace kiln::cpu {

Status IntConvStep::prepare() {
  const kernels::ConvShape &cs = shape_;
  if (!cs.valid() || cs.C % cs.groups != 0 || cs.K % cs.groups != 0 || (oneD_ && cs.R != 1))
    return makeError(label_, ": invalid conv shape");
  const int64_t cg = cs.C / cs.groups, kg = cs.K / cs.groups, depth = cg * cs.R * cs.S;
  if (!weights_.defined() || !is8Bit(weights_.dtype()) || weights_.numel() != cs.K * depth)
    return makeError(label_, ": weights do not match the conv shape");
  if (in_.size() < size_t(qlinear_ ? 8 : 2) || out_ < 0 || in_[0] < 0)
    return makeError(label_, ": corrupt slots");
  packed_.clear();
  const auto *w = static_cast<const uint8_t *>(weights_.raw());
  for (int64_t g = 0; g < cs.groups; ++g)
    packed_.push_back(kernels::PackedInt8::packA(
        kg, depth, {w + g * kg * depth, depth, weights_.dtype() == DType::I8, false}));
  // Every input, weights included: the general variant reads them all.
  reads = presentSlots(in_);
  writes = {out_};
  return Status::success();
}

Status IntConvStep::run(Frame &frame, ExecContext &ctx) const {
  auto fallback = [&](const std::string &why) {
    return runFallback(generalVariant.get(), frame, ctx, label_, why);
  };
  const RtValue &xv = frame.slots[size_t(in_[0])];
  if (!xv.isTensor() || !is8Bit(xv.tensor.dtype())) return fallback("x must be a u8 or i8 tensor");
  const Tensor &x = xv.tensor;
  const int64_t rank = oneD_ ? 3 : 4;
  if (x.rank() != rank || x.dim(1) != shape_.C)
    return fallback("input of shape " + shapeToString(x.shape()) + " does not match " +
                    std::to_string(shape_.C) + " input channels (rank " + std::to_string(rank) +
                    ")");
  kernels::ConvShape s = shape_;
  s.N = x.dim(0);
  s.H = oneD_ ? 1 : x.dim(2);
  s.W = x.dim(rank - 1);
  kernels::ConvShape one = s;
  one.N = 1;
  if (!one.valid()) return fallback("input of shape " + shapeToString(x.shape()) + " is too small");
  const int64_t kg = s.K / s.groups, cg = s.C / s.groups, P = s.outH() * s.outW();
  const int64_t depth = cg * s.R * s.S;

  int32_t xZp = 0;
  if (const Tensor *z = optionalTensor(frame, in_, 2)) {
    if (z->numel() != 1) return fallback("x's zero point is not one value");
    xZp = int32_t(z->getInt(0));
  }
  thread_local std::vector<int32_t> wZp, bias;
  thread_local std::vector<float> scales;
  wZp.assign(size_t(s.K), 0);
  if (const Tensor *z = optionalTensor(frame, in_, wZpInput())) {
    if (z->numel() != 1 && z->numel() != s.K)
      return fallback("w's zero point is neither one value nor one per output channel");
    for (int64_t k = 0; k < s.K; ++k) wZp[size_t(k)] = int32_t(z->getInt(z->numel() == 1 ? 0 : k));
  }
  DType outType = DType::I32;
  int32_t yZp = 0;
  if (qlinear_) {
    const Tensor *xs = optionalTensor(frame, in_, 1), *ws = optionalTensor(frame, in_, 4);
    const Tensor *ys = optionalTensor(frame, in_, 6), *yz = optionalTensor(frame, in_, 7);
    const Tensor *b = optionalTensor(frame, in_, 8);
    if (!xs || !ws || !ys || xs->numel() != 1 || ys->numel() != 1 ||
        (ws->numel() != 1 && ws->numel() != s.K) || !isFloat(xs->dtype()) ||
        !isFloat(ws->dtype()) || !isFloat(ys->dtype()) ||
        (yz && (yz->numel() != 1 || !is8Bit(yz->dtype()))) || (b && b->numel() != s.K))
      return fallback("scales, output zero point or bias of a form the kernel does not take");
    outType = yz ? yz->dtype() : x.dtype();
    yZp = yz ? int32_t(yz->getInt(0)) : 0;
    // quantize.h's combinedScale, per output channel.
    const float fx = float(xs->getDouble(0)), fy = float(ys->getDouble(0));
    scales.resize(size_t(s.K));
    for (int64_t k = 0; k < s.K; ++k)
      scales[size_t(k)] = float(fx * float(ws->getDouble(ws->numel() == 1 ? 0 : k)) / fy);
    bias.assign(size_t(s.K), 0);
    if (b)
      for (int64_t k = 0; k < s.K; ++k) bias[size_t(k)] = int32_t(b->getInt(k));
  }
  Tensor y = frame.allocate(out_, outType,
                            oneD_ ? Shape64{s.N, s.K, s.outW()} : Shape64{s.N, s.K, s.outH(), s.outW()});
  const size_t outElem = dtypeSize(outType);
  // A padded copy of each image makes every tap of the im2col panels an
  // in-bounds strided copy (the padding checks per tap and panel were most
  // of a small conv's time); a conv without padding reads x in place.
  const bool padding = s.padTop + s.padLeft + s.padBottom + s.padRight > 0;
  thread_local std::vector<uint8_t> paddedImage;
  if (padding) paddedImage.resize(kernels::int8ConvPaddedBytes(one));
  for (int64_t n = 0; n < s.N; ++n) {
    const uint8_t *image = static_cast<const uint8_t *>(x.raw()) + n * s.C * s.H * s.W;
    if (padding) kernels::int8ConvPadImage(one, image, uint8_t(xZp), paddedImage.data());
    for (int64_t g = 0; g < s.groups; ++g) {
      const kernels::Int8ConvSource src =
          kernels::int8ConvSourceFor(one, image, padding ? paddedImage.data() : nullptr, g,
                                     x.dtype() == DType::I8, uint8_t(xZp));
      kernels::IgemmProblem p;
      p.M = kg, p.N = P, p.K = depth;
      p.packedA = &packed_[size_t(g)];
      p.bSource = kernels::int8ConvPanels(&src);
      p.bSourceSigned = src.isSigned;
      p.za.values = wZp.data() + g * kg;
      p.zb.scalar = xZp;
      p.pool = ctx.pool;
      uint8_t *out = static_cast<uint8_t *>(y.mutableRaw()) + size_t((n * s.K + g * kg) * P) * outElem;
      kernels::StoreI32 store{reinterpret_cast<int32_t *>(out), P};
      kernels::Requantize rq{out,
                             P,
                             1,
                             outType == DType::I8,
                             yZp,
                             scales.data() + g * kg,
                             true,
                             kg,
                             bias.data() + g * kg,
                             true};
      p.finish = qlinear_ ? kernels::requantize(&rq) : kernels::storeI32(&store);
      kernels::igemm(p);
    }
  }
  frame.slots[size_t(out_)] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::cpu
