// Kernel IR lowerings of the integer convolutions (quant_lowering.h):
// ConvInteger (i32 result) and QLinearConv (requantized to u8/i8), over any
// number of spatial axes, with pads, auto_pad, strides, dilations and
// groups as the interpreter's window.cpp defines them. Padding acts as the
// x zero point, i.e. contributes 0 once the zero point is subtracted.
//
// The kernel runs the output planes (n, m) in parallel. Per output row
// (every spatial axis but the last) it clears the row, then for each input
// channel of the group and each kernel tap adds w * (x - x_zp) into the row
// in a vector loop over its columns: taps whose input row falls in the
// padding are skipped by an `if`, and columns that fall in the padding read
// a clamped index and contribute 0. The i32 accumulator wraps as the
// interpreter's does when it stores its i64 sum as i32. QLinearConv adds its
// bias first and requantizes each finished row from an i32 scratch.
#include "lower/quant_lowering.h"

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;
using namespace quant;

struct ConvPlan {
  int x = 0, w = 1; // input indices
  size_t rank = 0;  // spatial axes
  int64_t group = 1;
  SVal n, c, m, cg, mg; // batch, channels in, out, in per group, out per group
  std::vector<SVal> in, k, out, padBegin;
  std::vector<int64_t> stride, dilation;
  SVal inPlane, outPlane, kSize;
  std::vector<SVal> outDims; // [N, M, out...]
};

Expected<std::vector<int64_t>> spatialAttr(const Node &node, const char *name, size_t count,
                                           int64_t fill) {
  if (!node.hasAttr(name)) return std::vector<int64_t>(count, fill);
  std::vector<int64_t> v = node.getInts(name);
  if (v.size() != count)
    return makeError("attribute '", name, "' has ", v.size(), " values, expected ", count);
  return v;
}

// The window of each spatial axis (window.cpp's makeWindow, without
// ceil_mode) as shape values.
Status planWindow(DispatchBuilder &d, ConvPlan &p) {
  const Node &node = d.node();
  const size_t s = p.rank;
  KILN_ASSIGN_OR_RETURN(p.stride, spatialAttr(node, "strides", s, 1));
  KILN_ASSIGN_OR_RETURN(p.dilation, spatialAttr(node, "dilations", s, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, spatialAttr(node, "pads", 2 * s, 0));
  for (size_t i = 0; i < s; ++i)
    if (p.stride[i] <= 0 || p.dilation[i] <= 0)
      return makeError("strides and dilations must be > 0");
  const std::string autoPad = node.getString("auto_pad");
  const bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  if (!same && autoPad != "VALID" && autoPad != "NOTSET")
    return makeError("unknown auto_pad '", autoPad, "'");
  for (size_t i = 0; i < s; ++i) {
    const SVal in = p.in[i], st = d.c(p.stride[i]);
    d.check(d.lt(d.c(0), p.k[i]), "kernel dims must be > 0, got {}", {p.k[i]});
    const SVal span = d.add(d.mul(d.sub(p.k[i], d.c(1)), d.c(p.dilation[i])), d.c(1));
    if (same) {
      const SVal out = d.ceilDiv(in, st);
      const SVal total = d.max(d.c(0), d.sub(d.add(d.mul(d.sub(out, d.c(1)), st), span), in));
      const SVal small = d.floorDiv(total, d.c(2));
      p.out.push_back(out);
      p.padBegin.push_back(autoPad == "SAME_UPPER" ? small : d.sub(total, small));
      continue;
    }
    int64_t pb = pads[i], pe = pads[i + s];
    if (autoPad == "VALID") pb = pe = 0;
    if (pb < 0 || pe < 0) return makeError("pads must not be negative");
    const SVal room = d.sub(d.add(in, d.c(pb + pe)), span);
    d.check(d.le(d.c(0), room),
            "spatial axis " + std::to_string(i) +
                ": the padded input ({}) is smaller than the dilated kernel ({})",
            {d.add(in, d.c(pb + pe)), span});
    p.out.push_back(d.add(d.floorDiv(room, st), d.c(1)));
    p.padBegin.push_back(d.c(pb));
  }
  return Status::success();
}

Expected<ConvPlan> convPlan(DispatchBuilder &d, int x, int w) {
  ConvPlan p;
  p.x = x;
  p.w = w;
  const int rank = d.inputRank(x);
  if (rank < 3) return makeError("needs an input X of known rank >= 3 ([N, C, spatial...])");
  if (d.inputRank(w) != rank) return makeError("the weight must have the rank of input X");
  const DType xt = d.inputType(x), wt = d.inputType(w);
  if (!is8Bit(xt) || !is8Bit(wt))
    return makeError("expects u8 or i8 inputs, got ", dtypeName(xt), " and ", dtypeName(wt));
  p.rank = size_t(rank - 2);
  p.group = d.node().getInt("group");
  if (p.group <= 0) return makeError("group must be > 0, got ", p.group);
  const std::vector<SVal> xd = d.dims(x), wd = d.dims(w);
  p.n = xd[0];
  p.c = xd[1];
  p.m = wd[0];
  p.cg = wd[1];
  p.mg = d.floorDiv(p.m, d.c(p.group));
  d.check(d.eq(d.mul(p.cg, d.c(p.group)), p.c),
          "weight has {} input channels per group, expected {} / group " + std::to_string(p.group),
          {p.cg, p.c});
  d.check(d.eq(d.floorMod(p.m, d.c(p.group)), d.c(0)),
          "group " + std::to_string(p.group) + " does not divide the {} output channels", {p.m});
  p.in.assign(xd.begin() + 2, xd.end());
  p.k.assign(wd.begin() + 2, wd.end());
  if (d.node().hasAttr("kernel_shape")) {
    const std::vector<int64_t> ks = d.node().getInts("kernel_shape");
    if (ks.size() != p.rank) return makeError("kernel_shape has the wrong number of values");
    for (size_t i = 0; i < p.rank; ++i)
      d.check(d.eq(p.k[i], d.c(ks[i])), "kernel_shape does not match the weight's spatial dims");
  }
  KILN_RETURN_IF_ERROR(planWindow(d, p));
  p.inPlane = d.product(p.in);
  p.outPlane = d.product(p.out);
  p.kSize = d.product(p.k);
  p.outDims = {p.n, p.m};
  p.outDims.insert(p.outDims.end(), p.out.begin(), p.out.end());
  return p;
}

// What the conv of one output plane needs beyond the plan: the zero point
// inputs and strides, the bias input (-1: none), where rows accumulate.
struct ConvParts {
  int xZp = -1, wZp = -1, bias = -1;
  SVal wZpStride;
  int acc = -1; // buffer, laid out like the output
};

// Emits, inside the parallel loop over planes t = n * M + m, the loops of
// every output row of the plane; `finishRow(rowAffine)` emits what follows
// a row's accumulation (rowAffine: the row's first element).
template <class FinishRow>
void convolvePlane(DispatchBuilder &d, const ConvPlan &p, const ConvParts &parts, int t,
                   FinishRow finishRow) {
  kir::KernelBuilder &b = d.kb();
  const size_t s = p.rank, last = s - 1;
  const int tv = b.index(kir::Affine{}.add(1, -1, t));
  const int mIdx = imod(b, tv, d.value(p.m));
  const int nIdx = idiv(b, tv, d.value(p.m));
  const int g = idiv(b, mIdx, d.value(p.mg));
  const int xBase =
      imul(b, iadd(b, imul(b, nIdx, d.value(p.c)), imul(b, g, d.value(p.cg))), d.value(p.inPlane));
  const int wBase = imul(b, mIdx, d.value(d.mul(p.cg, p.kSize)));
  const int xz = zeroPointAt(d, parts.xZp, {});
  const int wz = zeroPointAt(d, parts.wZp, {}, imul(b, mIdx, d.value(parts.wZpStride)));
  const int bias = parts.bias >= 0 ? convert(b, DType::I32, d.inputType(parts.bias),
                                             b.load(d.in(parts.bias), {}, mIdx))
                                   : b.intConstant(DType::I32, 0);

  // Strides of the input and output spatial axes (elements).
  std::vector<SVal> inStride(s), outStride(s);
  SVal si = d.c(1), so = d.c(1);
  for (size_t i = s; i-- > 0;) {
    inStride[i] = si;
    outStride[i] = so;
    si = d.mul(si, p.in[i]);
    so = d.mul(so, p.out[i]);
  }
  // The output rows.
  kir::Affine row = d.term(p.outPlane, t);
  std::vector<int> o(s, -1);
  for (size_t i = 0; i < last; ++i) {
    o[i] = d.loop(p.out[i]);
    d.addTerm(row, outStride[i], o[i]);
  }
  const SVal cols = p.out[last];
  {
    const int j = d.loop(cols, {Schedule::Kind::Vector, 8});
    kir::Affine at = row;
    b.store(parts.acc, at.add(1, -1, j), bias);
    b.endLoop();
  }
  const int c = d.loop(p.cg);
  kir::Affine wAt = d.term(p.kSize, c);
  kir::Affine xAt = d.term(p.inPlane, c);
  int rowValid = -1;
  std::vector<int> k(s, -1);
  for (size_t i = 0; i < last; ++i) {
    k[i] = d.loop(p.k[i]);
    d.addTerm(wAt, d.product(std::vector<SVal>(p.k.begin() + i + 1, p.k.end())), k[i]);
    // input row position o * stride + k * dilation - padBegin
    kir::Affine pos = d.term(d.c(1), o[i], p.stride[i]);
    pos.add(p.dilation[i], -1, k[i]);
    d.addTerm(pos, p.padBegin[i], -1, -1);
    const int pv = b.index(pos);
    const int inside =
        b.binary(Opcode::And, DType::Bool, b.compare(Opcode::Ge, DType::I64, pv, i64(b, 0)),
                 b.compare(Opcode::Lt, DType::I64, pv, d.value(p.in[i])));
    rowValid = rowValid < 0 ? inside : b.binary(Opcode::And, DType::Bool, rowValid, inside);
    d.addTerm(xAt, inStride[i], o[i], p.stride[i]);
    d.addTerm(xAt, inStride[i], k[i], p.dilation[i]);
    d.addTerm(xAt, d.mul(inStride[i], p.padBegin[i]), -1, -1);
  }
  if (rowValid >= 0) b.beginIf(rowValid);
  k[last] = d.loop(p.k[last]);
  wAt.add(1, -1, k[last]);
  const int wv =
      b.binary(Opcode::Sub, DType::I32,
               convert(b, DType::I32, d.inputType(p.w), b.load(d.in(p.w), wAt, wBase)), wz);
  const int j = d.loop(cols, {Schedule::Kind::Vector, 8});
  kir::Affine pos = d.term(d.c(1), j, p.stride[last]);
  pos.add(p.dilation[last], -1, k[last]);
  d.addTerm(pos, p.padBegin[last], -1, -1);
  const int pv = b.index(pos);
  const int inside =
      b.binary(Opcode::And, DType::Bool, b.compare(Opcode::Ge, DType::I64, pv, i64(b, 0)),
               b.compare(Opcode::Lt, DType::I64, pv, d.value(p.in[last])));
  const int col = b.select(DType::I64, inside, pv, i64(b, 0));
  const int xv =
      convert(b, DType::I32, d.inputType(p.x), b.load(d.in(p.x), xAt, iadd(b, xBase, col)));
  const int xs = b.select(DType::I32, inside, b.binary(Opcode::Sub, DType::I32, xv, xz),
                          b.intConstant(DType::I32, 0));
  kir::Affine at = row;
  at.add(1, -1, j);
  b.store(parts.acc, at,
          b.binary(Opcode::Add, DType::I32, b.load(parts.acc, at),
                   b.binary(Opcode::Mul, DType::I32, wv, xs)));
  b.endLoop(); // j
  b.endLoop(); // k[last]
  if (rowValid >= 0) b.endIf();
  for (size_t i = last; i-- > 0;) b.endLoop(); // k[0..last)
  b.endLoop();                                 // c
  finishRow(row);
  for (size_t i = last; i-- > 0;) b.endLoop(); // o[0..last)
}

} // namespace

// ConvInteger(x, w, x_zero_point, w_zero_point) -> i32.
Status lowerConvInteger(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(ConvPlan p, convPlan(d, 0, 1));
  ConvParts parts;
  parts.xZp = 2;
  parts.wZp = 3;
  channelStride(d, 2, d.c(1), "x zero point");
  parts.wZpStride = channelStride(d, 3, p.m, "w zero point");
  d.setOutput(0, p.outDims, DType::I32);
  parts.acc = d.out(0);
  const SVal planes = d.mul(p.n, p.m);
  d.beginKernel(planes, d.mul(p.outPlane, d.mul(p.cg, p.kSize)));
  const int t = d.loop(planes, {Schedule::Kind::Parallel, 1});
  convolvePlane(d, p, parts, t, [](const kir::Affine &) {});
  d.kb().endLoop();
  d.endKernel();
  return Status::success();
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B): the
// integer conv plus bias, requantized with the f32 scale x_scale *
// w_scale[m] / y_scale.
Status lowerQLinearConv(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(ConvPlan p, convPlan(d, 0, 3));
  ConvParts parts;
  parts.xZp = 2;
  parts.wZp = 5;
  channelStride(d, 2, d.c(1), "x zero point");
  parts.wZpStride = channelStride(d, 5, p.m, "w zero point");
  for (int s : {1, 4, 6})
    if (!isFloat(d.inputType(s)))
      return makeError("scales must be float tensors, got ", dtypeName(d.inputType(s)));
  channelStride(d, 1, d.c(1), "x scale");
  const SVal wsStride = channelStride(d, 4, p.m, "w scale");
  channelStride(d, 6, d.c(1), "y scale");
  channelStride(d, 7, d.c(1), "y zero point");
  if (d.input(8)) {
    if (!isInt(d.inputType(8)))
      return makeError("bias must be an integer tensor, got ", dtypeName(d.inputType(8)));
    d.check(d.eq(d.numel(8), p.m), "bias has {} values, expected {}", {d.numel(8), p.m});
    parts.bias = 8;
  }
  const DType out = d.input(7) ? d.inputType(7) : d.inputType(0);
  if (!is8Bit(out)) return makeError("y zero point must be u8 or i8");
  d.setOutput(0, p.outDims, out);
  const SVal planes = d.mul(p.n, p.m);
  const int acc = d.addScratch(DType::I32, d.mul(planes, p.outPlane));
  parts.acc = d.scratch(acc);

  kir::KernelBuilder &b = d.beginKernel(planes, d.mul(p.outPlane, d.mul(p.cg, p.kSize)));
  const int t = d.loop(planes, {Schedule::Kind::Parallel, 1});
  const int mIdx = imod(b, b.index(kir::Affine{}.add(1, -1, t)), d.value(p.m));
  const int scale = combinedScale(b, d.inputType(1), b.load(d.in(1), {}), d.inputType(4),
                                  b.load(d.in(4), {}, imul(b, mIdx, d.value(wsStride))),
                                  d.inputType(6), b.load(d.in(6), {}));
  const int yz =
      d.input(7) ? b.cast(DType::F64, out, b.load(d.in(7), {})) : b.constant(DType::F64, 0);
  convolvePlane(d, p, parts, t, [&](const kir::Affine &row) {
    const int j = d.loop(p.out.back(), {Schedule::Kind::Vector, 8});
    kir::Affine at = row;
    at.add(1, -1, j);
    b.store(d.out(0), at, requantize(b, out, DType::I32, b.load(parts.acc, at), scale, yz));
    b.endLoop();
  });
  b.endLoop();
  d.endKernel();
  return Status::success();
}

} // namespace kiln::lower
