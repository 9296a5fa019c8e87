// Kernel IR lowerings of signal processing: DFT, STFT, the Hann / Hamming /
// Blackman windows and MelWeightMatrix (lower/ops.h), following the
// interpreter (interp/kernels/signal.cpp): transforms are the plain O(n^2)
// sum in double, with twiddle factors from one table indexed by (k * j)
// mod n (filled by a first kernel with the interpreter's angle formula),
// so each output matches the oracle to rounding. Complex values are a
// trailing dim of 2 (real, imaginary); a trailing dim of 1 is a real signal.
// Every output bin is one parallel iteration, so a single long signal still
// spreads over the pool.
#include "lower/kernel_expr.h"
#include "lower/ops.h"

#include <cmath>
#include <numbers>

namespace kiln::lower {

namespace {

using kir::Opcode;
using kir::Schedule;
constexpr DType F64 = DType::F64, I64 = DType::I64;

Status lowerDft(DispatchBuilder &d);
Status lowerStft(DispatchBuilder &d);
Status lowerHann(DispatchBuilder &d);
Status lowerHamming(DispatchBuilder &d);
Status lowerBlackman(DispatchBuilder &d);
Status lowerMelWeightMatrix(DispatchBuilder &d);

} // namespace

LowerFn signalLowering(OpKind op) {
  switch (op) {
  case OpKind::DFT:
    return lowerDft;
  case OpKind::STFT:
    return lowerStft;
  case OpKind::HannWindow:
    return lowerHann;
  case OpKind::HammingWindow:
    return lowerHamming;
  case OpKind::BlackmanWindow:
    return lowerBlackman;
  case OpKind::MelWeightMatrix:
    return lowerMelWeightMatrix;
  default:
    return nullptr;
  }
}

namespace {

// A one-element integer input read by the shape program, with its check.
Expected<SVal> scalarInt(DispatchBuilder &d, int i, const char *what) {
  if (!isInt(d.inputType(i))) return makeError(what, " (input ", i, ") must be an integer tensor");
  d.check(d.eq(d.numel(i), d.c(1)), std::string(what) + " must have one element, got {}",
          {d.numel(i)});
  return d.elem(i, 0);
}

// An element of a float buffer as f64 (16-bit floats through f32, exact).
int loadF64(KExpr &e, DType t, int value) {
  if (t == DType::F16 || t == DType::BF16) value = e.cast(DType::F32, t, value), t = DType::F32;
  return e.cast(F64, t, value);
}

// Kernel: the n-point twiddle table (cos, sin) of angle sign * 2 pi m / n,
// as the interpreter's DftPlan computes it.
void twiddleKernel(DispatchBuilder &d, SVal n, bool inverse, int table) {
  kir::KernelBuilder &b = d.beginKernel(n, d.c(1));
  KExpr e{b};
  const int m = d.loop(n, {Schedule::Kind::Parallel, 1});
  const double c = (inverse ? 1.0 : -1.0) * 2.0 * std::numbers::pi;
  const int angle =
      e.div(F64, e.mul(F64, e.f(F64, c), e.cast(F64, I64, e.var(m))), e.cast(F64, I64, d.value(n)));
  b.store(d.scratch(table), kir::Affine{}.add(2, -1, m), e.un(Opcode::Cos, F64, angle));
  b.store(d.scratch(table), kir::Affine{}.add(2, -1, m).add(1, -1, -1),
          e.un(Opcode::Sin, F64, angle));
  b.endLoop();
  d.endKernel();
}

// The complex sum over j < used of value(j) * twiddle[(k * j) mod n] into
// vars (re, im); `value` appends the loads of term j and returns (re, im).
template <class Value>
void dftSum(DispatchBuilder &d, KExpr &e, SVal used, int n, int k, int table, int reVar, int imVar,
            int indexVar, Value &&value) {
  kir::KernelBuilder &b = e.b;
  b.varWrite(reVar, e.f(F64, 0));
  b.varWrite(imVar, e.f(F64, 0));
  b.varWrite(indexVar, e.i64(0));
  const int j = d.loop(used);
  const auto [a, bb] = value(e.var(j));
  const int index = b.varRead(indexVar);
  const int c = b.load(d.scratch(table), {}, e.mul(I64, index, e.i64(2)));
  const int s = b.load(d.scratch(table), kir::Affine::constant(1), e.mul(I64, index, e.i64(2)));
  // (a + bi)(c + si) = (ac - bs) + (as + bc)i
  b.varWrite(reVar, e.add(F64, b.varRead(reVar), e.sub(F64, e.mul(F64, a, c), e.mul(F64, bb, s))));
  b.varWrite(imVar, e.add(F64, b.varRead(imVar), e.add(F64, e.mul(F64, a, s), e.mul(F64, bb, c))));
  // The index steps by k and wraps once (k < n).
  const int next = e.add(I64, index, k);
  b.varWrite(indexVar, e.sel(I64, e.ge(I64, next, n), e.sub(I64, next, n), next));
  b.endLoop();
}

// ---- DFT ---------------------------------------------------------------------------

// `values[a]` for a run-time axis: the entry at `axis` (folds when known).
SVal pick(DispatchBuilder &d, SVal axis, const std::vector<SVal> &values) {
  SVal out = values.back();
  for (int a = int(values.size()) - 2; a >= 0; --a)
    out = d.select(d.eq(axis, d.c(a)), values[size_t(a)], out);
  return out;
}

// A DFT's sizes (shape program): lines along the axis are `outer` blocks
// before it by `inner` positions after it (the last dim excluded).
struct DftShape {
  bool inverse = false, onesided = false, irfft = false;
  SVal channels, inLength, outer, inner;
  SVal n;         // the DFT length (at least 1; checked positive)
  SVal outLength; // bins per output line
  int64_t outChannels = 2;
};

Expected<DftShape> dftShape(DispatchBuilder &d) {
  const int rank = d.inputRank(0);
  DftShape s;
  s.inverse = d.node().getInt("inverse") != 0;
  s.onesided = d.node().getInt("onesided") != 0;
  s.irfft = s.inverse && s.onesided; // the inverse of a one-sided spectrum: real output
  const bool irfft = s.irfft;
  const std::vector<SVal> dims = d.dims(0);
  const SVal channels = dims.back();
  s.channels = channels;
  d.check(d.lor(d.eq(channels, d.c(1)), d.eq(channels, d.c(2))),
          "input must end in a dim of 1 (real) or 2 (complex), got {}", {channels});
  if (irfft) d.check(d.eq(channels, d.c(2)), "inverse one-sided DFT needs a complex input");

  // The axis: input 2 (opset 20) when given, else the attribute.
  SVal axis = d.c(d.node().getInt("axis"));
  if (d.input(2)) {
    KILN_ASSIGN_OR_RETURN(axis, scalarInt(d, 2, "axis"));
  }
  const SVal resolved = d.select(d.lt(axis, d.c(0)), d.add(axis, d.c(rank)), axis);
  d.check(d.land(d.le(d.c(0), resolved), d.lt(resolved, d.c(rank - 1))),
          "axis {} is out of range (the last dim holds real and imaginary parts)", {axis});
  std::vector<SVal> outerOf, innerOf;
  for (int a = 0; a < rank - 1; ++a) {
    outerOf.push_back(d.product(std::vector<SVal>(dims.begin(), dims.begin() + a)));
    innerOf.push_back(d.product(std::vector<SVal>(dims.begin() + a + 1, dims.end() - 1)));
  }
  s.outer = pick(d, resolved, outerOf);
  s.inner = pick(d, resolved, innerOf);
  const SVal inLength = pick(d, resolved, std::vector<SVal>(dims.begin(), dims.end() - 1));
  s.inLength = inLength;

  SVal n = irfft ? d.mul(d.c(2), d.sub(inLength, d.c(1))) : inLength;
  if (d.input(1)) {
    KILN_ASSIGN_OR_RETURN(n, scalarInt(d, 1, "dft_length"));
  }
  d.check(d.lt(d.c(0), n), "dft length must be positive, got {}", {n});
  s.n = d.max(n, d.c(1));
  s.outLength = irfft ? s.n : s.onesided ? d.add(d.floorDiv(s.n, d.c(2)), d.c(1)) : s.n;
  s.outChannels = irfft ? 1 : 2;
  std::vector<SVal> outDims;
  for (int a = 0; a < rank - 1; ++a)
    outDims.push_back(d.select(d.eq(resolved, d.c(a)), s.outLength, dims[size_t(a)]));
  outDims.push_back(d.c(s.outChannels));
  d.setOutput(0, outDims);
  return s;
}

// One output bin per parallel iteration: p = (line, k), line = (o, i),
// each the sum over the line's inputs times the twiddle table.
Status lowerDft(DispatchBuilder &d) {
  const DType t = d.inputType(0);
  if (!isFloat(t)) return makeError("DFT input must be a float tensor");
  if (d.inputRank(0) < 2) return makeError("DFT needs an input of known rank 2 or more");
  KILN_ASSIGN_OR_RETURN(DftShape s, dftShape(d));
  const bool inverse = s.inverse, irfft = s.irfft;
  const SVal safeN = s.n, outLength = s.outLength, outer = s.outer, inner = s.inner;
  const SVal inLength = s.inLength, channels = s.channels;
  const int64_t outChannels = s.outChannels;
  const int table = d.addScratch(F64, d.mul(safeN, d.c(2)));
  twiddleKernel(d, safeN, inverse, table);

  const SVal count = d.min(inLength, safeN); // input values that enter the sum
  const SVal used = irfft ? safeN : count;
  const SVal bins = d.mul(d.mul(outer, inner), outLength);
  kir::KernelBuilder &b = d.beginKernel(bins, used);
  KExpr e{b};
  const int reVar = b.addVar("re", F64), imVar = b.addVar("im", F64);
  const int indexVar = b.addVar("index", I64);
  const int nv = d.value(safeN);
  const int p = d.loop(bins, {Schedule::Kind::Parallel, 1});
  const int outLen = d.value(outLength), innerV = d.value(inner);
  const int line = e.div(I64, e.var(p), outLen);
  const int k = e.sub(I64, e.var(p), e.mul(I64, line, outLen));
  const int o = e.div(I64, line, innerV), i = e.sub(I64, line, e.mul(I64, o, innerV));
  const int chans = d.value(channels);
  const int imagOffset = e.sub(I64, chans, e.i64(1)); // 0 for a real input: read, then zeroed
  const int complex = e.eq(I64, chans, e.i64(2));
  // x[o, j, i, :] at ((o * inLength + j) * inner + i) * channels
  const int lineBase =
      e.mul(I64, e.add(I64, e.mul(I64, e.mul(I64, o, d.value(inLength)), innerV), i), chans);
  const int jStride = e.mul(I64, innerV, chans);
  auto load = [&](int j, bool conj) -> std::pair<int, int> {
    const int at = e.add(I64, lineBase, e.mul(I64, j, jStride));
    const int re = loadF64(e, t, b.load(d.in(0), {}, at));
    int im = loadF64(e, t, b.load(d.in(0), {}, e.add(I64, at, imagOffset)));
    im = e.sel(F64, complex, im, e.f(F64, 0));
    return {re, conj ? e.neg(F64, im) : im};
  };
  dftSum(d, e, used, nv, k, table, reVar, imVar, indexVar, [&](int j) -> std::pair<int, int> {
    if (!irfft) return load(j, false);
    // The full spectrum of a real signal from its first bins: bin j < kept
    // as given, bin j > n/2 the conjugate of bin n - j when that is kept.
    const int kept = e.min(I64, d.value(count), e.add(I64, e.div(I64, nv, e.i64(2)), e.i64(1)));
    const int direct = e.lt(I64, j, kept);
    const int mirror = e.sub(I64, nv, j);
    const int mirrored = e.land(e.ge(I64, j, e.add(I64, e.div(I64, nv, e.i64(2)), e.i64(1))),
                                e.lt(I64, mirror, kept));
    const int src = e.sel(I64, direct, j, e.sel(I64, mirrored, mirror, e.i64(0)));
    const auto [re, im] = load(src, false);
    const int zero = e.f(F64, 0);
    const int any = e.lor(direct, mirrored);
    return {e.sel(F64, any, re, zero),
            e.sel(F64, direct, im, e.sel(F64, mirrored, e.neg(F64, im), zero))};
  });
  int re = b.varRead(reVar), im = b.varRead(imVar);
  if (inverse) {
    const int nf = e.cast(F64, I64, nv);
    re = e.div(F64, re, nf);
    im = e.div(F64, im, nf);
  }
  // y[o, k, i, :] at ((o * outLength + k) * inner + i) * outChannels
  const int outAt =
      e.mul(I64, e.add(I64, e.mul(I64, e.add(I64, e.mul(I64, o, outLen), k), innerV), i),
            e.i64(outChannels));
  b.store(d.out(0), {}, e.cast(t, F64, re), outAt);
  if (outChannels == 2) b.store(d.out(0), kir::Affine::constant(1), e.cast(t, F64, im), outAt);
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// ---- STFT --------------------------------------------------------------------------

// signal [batch, length, 1 or 2], frame_step, window [frame_length]?,
// frame_length? -> [batch, frames, bins, 2].
Status lowerStft(DispatchBuilder &d) {
  const DType t = d.inputType(0);
  if (!isFloat(t)) return makeError("STFT signal must be a float tensor");
  if (d.inputRank(0) != 3) return makeError("STFT signal must have rank 3");
  const bool hasWindow = d.input(2) != nullptr, hasLength = d.input(3) != nullptr;
  if (!hasWindow && !hasLength) return makeError("STFT needs a window or a frame_length");
  if (hasWindow && d.inputRank(2) != 1) return makeError("STFT window must be 1-d");
  if (hasWindow && !isFloat(d.inputType(2)) && !isInt(d.inputType(2)))
    return makeError("STFT window must be numeric");
  const SVal batch = d.dim(0, 0), length = d.dim(0, 1), channels = d.dim(0, 2);
  d.check(d.lor(d.eq(channels, d.c(1)), d.eq(channels, d.c(2))),
          "signal must have shape [batch, length, 1 or 2]");
  KILN_ASSIGN_OR_RETURN(SVal step, scalarInt(d, 1, "frame_step"));
  d.check(d.lt(d.c(0), step), "frame_step must be positive, got {}", {step});
  SVal frameLength = hasWindow ? d.dim(2, 0) : SVal{};
  if (hasLength) {
    KILN_ASSIGN_OR_RETURN(SVal given, scalarInt(d, 3, "frame_length"));
    if (hasWindow)
      d.check(d.eq(given, frameLength), "frame_length {} differs from the window length {}",
              {given, frameLength});
    frameLength = given;
  }
  d.check(d.land(d.lt(d.c(0), frameLength), d.le(frameLength, length)),
          "frame_length {} does not fit a signal of length {}", {frameLength, length});
  const SVal safeLength = d.max(frameLength, d.c(1));
  const SVal frames =
      d.add(d.c(1), d.floorDiv(d.max(d.sub(length, safeLength), d.c(0)), d.max(step, d.c(1))));
  const bool onesided = d.node().getInt("onesided") != 0;
  const SVal bins = onesided ? d.add(d.floorDiv(safeLength, d.c(2)), d.c(1)) : safeLength;
  d.setOutput(0, {batch, frames, bins, d.c(2)});
  const int table = d.addScratch(F64, d.mul(safeLength, d.c(2)));
  twiddleKernel(d, safeLength, false, table);

  const SVal total = d.mul(d.mul(batch, frames), bins);
  kir::KernelBuilder &b = d.beginKernel(total, safeLength);
  KExpr e{b};
  const int reVar = b.addVar("re", F64), imVar = b.addVar("im", F64);
  const int indexVar = b.addVar("index", I64);
  const int p = d.loop(total, {Schedule::Kind::Parallel, 1});
  const int binsV = d.value(bins), framesV = d.value(frames);
  const int frame = e.div(I64, e.var(p), binsV); // batch * frames + f
  const int k = e.sub(I64, e.var(p), e.mul(I64, frame, binsV));
  const int bi = e.div(I64, frame, framesV), f = e.sub(I64, frame, e.mul(I64, bi, framesV));
  const int chans = d.value(channels);
  const int complex = e.eq(I64, chans, e.i64(2));
  // x[b, f * step + j, :] at (b * length + f * step + j) * channels
  const int start =
      e.mul(I64, e.add(I64, e.mul(I64, bi, d.value(length)), e.mul(I64, f, d.value(step))), chans);
  dftSum(d, e, safeLength, d.value(safeLength), k, table, reVar, imVar, indexVar,
         [&](int j) -> std::pair<int, int> {
           const int at = e.add(I64, start, e.mul(I64, j, chans));
           const int re = loadF64(e, t, b.load(d.in(0), {}, at));
           int im = loadF64(e, t, b.load(d.in(0), {}, e.add(I64, at, e.sub(I64, chans, e.i64(1)))));
           im = e.sel(F64, complex, im, e.f(F64, 0));
           if (!hasWindow) return {re, im};
           const int w = loadF64(e, d.inputType(2), b.load(d.in(2), {}, j));
           return {e.mul(F64, re, w), e.mul(F64, im, w)};
         });
  const int outAt = e.mul(I64, e.var(p), e.i64(2));
  b.store(d.out(0), {}, e.cast(t, F64, b.varRead(reVar)), outAt);
  b.store(d.out(0), kir::Affine::constant(1), e.cast(t, F64, b.varRead(imVar)), outAt);
  b.endLoop();
  d.endKernel();
  return Status::success();
}

// ---- window functions --------------------------------------------------------------

// The dtype an output_datatype attribute names; must be numeric.
Expected<DType> outputDType(const Node &node) {
  const int64_t code = node.getInt("output_datatype");
  auto t = dtypeFromOnnx(static_cast<int>(code));
  if (!t || !isNumeric(*t)) return makeError("output_datatype ", code, " is not a numeric dtype");
  return *t;
}

// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size when
// periodic, size - 1 when symmetric (a one-point symmetric window is 0/0:
// NaN, as the interpreter).
Status cosineWindow(DispatchBuilder &d, double a0, double a1, double a2) {
  KILN_ASSIGN_OR_RETURN(SVal size, scalarInt(d, 0, "size"));
  KILN_ASSIGN_OR_RETURN(DType t, outputDType(d.node()));
  d.check(d.le(d.c(0), size), "window size must not be negative, got {}", {size});
  const bool periodic = d.node().getInt("periodic") != 0;
  d.setOutput(0, {size}, t);
  kir::KernelBuilder &b = d.beginKernel(size, d.c(1));
  KExpr e{b};
  const int denom = e.cast(F64, I64, periodic ? d.value(size) : d.value(d.sub(size, d.c(1))));
  const int n = d.loop(size, {Schedule::Kind::Parallel, 1});
  const int x =
      e.div(F64, e.mul(F64, e.f(F64, 2.0 * std::numbers::pi), e.cast(F64, I64, e.var(n))), denom);
  const int w =
      e.add(F64, e.sub(F64, e.f(F64, a0), e.mul(F64, e.f(F64, a1), e.un(Opcode::Cos, F64, x))),
            e.mul(F64, e.f(F64, a2), e.un(Opcode::Cos, F64, e.mul(F64, e.f(F64, 2.0), x))));
  b.store(d.out(0), kir::Affine{}.add(1, -1, n), e.cast(t, F64, w));
  b.endLoop();
  d.endKernel();
  return Status::success();
}

Status lowerHann(DispatchBuilder &d) {
  return cosineWindow(d, 0.5, 0.5, 0.0);
}
Status lowerHamming(DispatchBuilder &d) {
  return cosineWindow(d, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}
Status lowerBlackman(DispatchBuilder &d) {
  return cosineWindow(d, 0.42, 0.5, 0.08);
}

// ---- MelWeightMatrix ---------------------------------------------------------------

// A one-element numeric input as a double (shape program).
Expected<SVal> scalarNumber(DispatchBuilder &d, int i, const char *what) {
  if (!isNumeric(d.inputType(i))) return makeError(what, " (input ", i, ") must be numeric");
  d.check(d.eq(d.numel(i), d.c(1)), std::string(what) + " must have one element");
  return d.elemF(i, d.c(0));
}

// hz -> mel: 2595 log10(1 + hz / 700). The Kernel IR has no log10: it is
// log(v) / log(10), within an ulp of the interpreter's.
int hertzToMel(KExpr &e, int hz) {
  const int v = e.add(F64, e.f(F64, 1), e.div(F64, hz, e.f(F64, 700)));
  const int log10 = e.div(F64, e.un(Opcode::Log, F64, v), e.f(F64, std::log(10.0)));
  return e.mul(F64, e.f(F64, 2595), log10);
}
int melToHertz(KExpr &e, int mel) {
  const int p = e.b.binary(Opcode::Pow, F64, e.f(F64, 10), e.div(F64, mel, e.f(F64, 2595)));
  return e.mul(F64, e.f(F64, 700), e.sub(F64, p, e.f(F64, 1)));
}

// [dft_length / 2 + 1, num_mel_bins]: triangular filters with peak 1 whose
// corners are num_mel_bins + 2 points evenly spaced on the mel scale, each
// rounded down to a DFT bin. A serial kernel computes the corners; a
// parallel one fills the matrix row by row.
Status lowerMelWeightMatrix(DispatchBuilder &d) {
  KILN_ASSIGN_OR_RETURN(SVal numMel, scalarInt(d, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(SVal dftLength, scalarInt(d, 1, "dft_length"));
  KILN_ASSIGN_OR_RETURN(SVal sampleRate, scalarInt(d, 2, "sample_rate"));
  KILN_ASSIGN_OR_RETURN(SVal lower, scalarNumber(d, 3, "lower_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(SVal upper, scalarNumber(d, 4, "upper_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(DType t, outputDType(d.node()));
  d.check(d.land(d.land(d.lt(d.c(0), numMel), d.lt(d.c(0), dftLength)), d.lt(d.c(0), sampleRate)),
          "num_mel_bins, dft_length and sample_rate must be positive, got {}, {}, {}",
          {numMel, dftLength, sampleRate});
  const SVal inf = d.cf(INFINITY);
  auto finite = [&](SVal v) { return d.land(d.flt(d.fsub(d.cf(0), inf), v), d.flt(v, inf)); };
  d.check(d.land(d.land(finite(lower), finite(upper)),
                 d.land(d.lnot(d.flt(lower, d.cf(0))), d.lnot(d.flt(upper, lower)))),
          "edges must be finite and satisfy 0 <= lower_edge_hertz <= upper_edge_hertz");
  const SVal numBins = d.add(d.floorDiv(d.max(dftLength, d.c(0)), d.c(2)), d.c(1));
  d.check(d.le(d.mul(numBins, numMel), d.c(int64_t{1} << 31)),
          "output of {} x {} elements is too large", {numBins, numMel});
  // The bin of the upper edge: floor((dft_length + 1) * hz / sample_rate).
  const SVal upperBin = d.ffloor(
      d.fdiv(d.fmul(d.toF(d.add(dftLength, d.c(1))), upper), d.toF(d.max(sampleRate, d.c(1)))));
  d.check(d.land(d.lnot(d.flt(upperBin, d.cf(0))), d.flt(upperBin, d.toF(numBins))),
          "upper_edge_hertz maps past the last DFT bin ({})", {d.sub(numBins, d.c(1))});
  d.setOutput(0, {numBins, numMel}, t);
  const int corners = d.addScratch(I64, d.add(numMel, d.c(2)));
  const int badCorner = d.statusCode("a mel corner falls outside the DFT bins");

  {
    kir::KernelBuilder &b = d.beginKernel();
    KExpr e{b};
    const DType lt = d.inputType(3), ut = d.inputType(4);
    const int lo = e.cast(F64, lt, b.load(d.in(3), {}));
    const int hi = e.cast(F64, ut, b.load(d.in(4), {}));
    const int lowMel = hertzToMel(e, lo);
    const int count = d.value(d.add(numMel, d.c(2)));
    const int step = e.div(F64, e.sub(F64, hertzToMel(e, hi), lowMel), e.cast(F64, I64, count));
    const int scale = e.cast(F64, I64, d.value(d.add(dftLength, d.c(1))));
    const int rate = e.cast(F64, I64, d.value(sampleRate));
    const int bins = d.value(numBins);
    const int i = d.loop(d.add(numMel, d.c(2)));
    const int hz = melToHertz(e, e.add(F64, e.mul(F64, e.cast(F64, I64, e.var(i)), step), lowMel));
    const int bin = e.un(Opcode::Floor, F64, e.div(F64, e.mul(F64, scale, hz), rate));
    const int ok = e.land(e.ge(F64, bin, e.f(F64, 0)), e.lt(F64, bin, e.cast(F64, I64, bins)));
    d.raise(e.lnot(ok), badCorner);
    b.store(d.scratch(corners), kir::Affine{}.add(1, -1, i),
            e.sel(I64, ok, e.cast(I64, F64, bin), e.i64(-1)));
    b.endLoop();
    d.endKernel();
  }
  kir::KernelBuilder &b = d.beginKernel(numBins, numMel);
  KExpr e{b};
  const int j = d.loop(numBins, {Schedule::Kind::Parallel, 1});
  const int m = d.loop(numMel);
  const kir::Affine at = kir::Affine{}.add(1, -1, m);
  const int left = b.load(d.scratch(corners), at);
  const int center = b.load(d.scratch(corners), kir::Affine(at).add(1, -1, -1));
  const int right = b.load(d.scratch(corners), kir::Affine(at).add(2, -1, -1));
  const int jv = e.var(j);
  auto f = [&](int v) { return e.cast(F64, I64, v); };
  // The rising edge (or 1 at a zero-width one), then the falling edge,
  // which overwrites the center as the interpreter's second loop does.
  const int rising = e.sel(
      F64, e.eq(I64, center, left), e.sel(F64, e.eq(I64, jv, center), e.f(F64, 1), e.f(F64, 0)),
      e.sel(F64, e.land(e.le(I64, left, jv), e.le(I64, jv, center)),
            e.div(F64, f(e.sub(I64, jv, left)), f(e.sub(I64, center, left))), e.f(F64, 0)));
  const int falling = e.land(e.le(I64, center, jv), e.lt(I64, jv, right));
  const int w = e.sel(F64, falling,
                      e.div(F64, f(e.sub(I64, right, jv)), f(e.sub(I64, right, center))), rising);
  kir::Affine outAt = d.term(numMel, j);
  outAt.add(1, -1, m);
  b.store(d.out(0), outAt, e.cast(t, F64, w));
  b.endLoop();
  b.endLoop();
  d.endKernel();
  return Status::success();
}

} // namespace
} // namespace kiln::lower
