// Interpreter kernels for signal processing: DFT (forward, inverse, one-sided
// and its inverse), STFT, the Hann/Hamming/Blackman windows and the mel
// filter bank matrix. Complex values are a trailing dim of 2 (real,
// imaginary); a trailing dim of 1 is a real signal.
//
// Transforms are the plain O(n^2) sum, computed in double whatever the
// tensor dtype (numpy's FFT, which produced the reference outputs, works in
// double too), with twiddle factors taken from one table indexed by
// (k * j) mod n so every angle is exact to one rounding.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <complex>
#include <numbers>

namespace kiln {

namespace {

using Complex = std::complex<double>;

// An n-point DFT (or inverse DFT, scaled by 1/n).
class DftPlan {
public:
  DftPlan(int64_t n, bool inverse) : n_(n), inverse_(inverse), twiddles_(n) {
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t m = 0; m < n; ++m) {
      double angle =
          sign * 2.0 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n);
      twiddles_[m] = Complex(std::cos(angle), std::sin(angle));
    }
  }

  // out[k] for k < outCount <= n from in[j] for j < inCount; inputs past
  // inCount (up to n) are zeros, as when a signal is padded to the DFT
  // length. The twiddle index (k * j) mod n is stepped, not recomputed.
  void run(const Complex *in, int64_t inCount, Complex *out, int64_t outCount) const {
    for (int64_t k = 0; k < outCount; ++k) {
      Complex sum = 0;
      int64_t index = 0;
      for (int64_t j = 0; j < inCount; ++j) {
        sum += in[j] * twiddles_[index];
        index += k;
        if (index >= n_) index -= n_;
      }
      out[k] = inverse_ ? sum / static_cast<double>(n_) : sum;
    }
  }

private:
  int64_t n_;
  bool inverse_;
  std::vector<Complex> twiddles_;
};

// A one-element integer input (a length, a step, an axis).
Expected<int64_t> readScalarInt(const KernelContext &ctx, int i, const char *what) {
  const Tensor &t = ctx.in(i);
  if (!isInt(t.dtype()) || t.numel() != 1)
    return ctx.error(what, " (input ", i, ") must be a one-element integer tensor, got ",
                     dtypeName(t.dtype()), shapeToString(t.shape()));
  return t.getInt(0);
}

// A one-element numeric input read as double.
Expected<double> readScalarNumber(const KernelContext &ctx, int i, const char *what) {
  const Tensor &t = ctx.in(i);
  if (!isNumeric(t.dtype()) || t.numel() != 1)
    return ctx.error(what, " (input ", i, ") must be a one-element numeric tensor, got ",
                     dtypeName(t.dtype()), shapeToString(t.shape()));
  return t.getDouble(0);
}

// Doubles computed for the output, stored as `dtype`.
Tensor fromDoubles(const std::vector<double> &v, Shape64 shape, DType dtype) {
  return convertTensor(Tensor::fromVector(v, std::move(shape)), dtype);
}

// The dtype an output_datatype attribute names; must be numeric.
Expected<DType> outputDType(const KernelContext &ctx) {
  int64_t code = ctx.node().getInt("output_datatype");
  auto d = dtypeFromOnnx(static_cast<int>(code));
  if (!d || !isNumeric(*d)) return ctx.error("output_datatype ", code, " is not a numeric dtype");
  return *d;
}

// ---- DFT -------------------------------------------------------------------------

struct DftSetup {
  int64_t axis = 0;     // the transformed axis
  int64_t inLength = 0; // input extent along it
  int64_t n = 0;        // DFT length
  int64_t outLength = 0;
  bool inverse = false, onesided = false, irfft = false;
};

// The axis: input 2 (opset 20) when given, else the attribute. Negative
// values count from the back; the last dim (real/imaginary) is not an axis.
Expected<int64_t> dftAxis(const KernelContext &ctx, int64_t rank) {
  int64_t axis = ctx.node().getInt("axis");
  if (ctx.has(2)) {
    KILN_ASSIGN_OR_RETURN(axis, readScalarInt(ctx, 2, "axis"));
  }
  int64_t resolved = axis < 0 ? axis + rank : axis;
  if (resolved < 0 || resolved >= rank - 1)
    return ctx.error("axis ", axis, " is out of range for rank ", rank,
                     " (the last dim holds real and imaginary parts)");
  return resolved;
}

Expected<DftSetup> dftSetup(const KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (x.rank() < 2 || (x.dim(x.rank() - 1) != 1 && x.dim(x.rank() - 1) != 2))
    return ctx.error("input must end in a dim of 1 (real) or 2 (complex), got shape ",
                     shapeToString(x.shape()));
  DftSetup s;
  KILN_ASSIGN_OR_RETURN(s.axis, dftAxis(ctx, x.rank()));
  s.inverse = ctx.node().getInt("inverse") != 0;
  s.onesided = ctx.node().getInt("onesided") != 0;
  // onesided + inverse is the inverse of a one-sided spectrum: real output.
  s.irfft = s.inverse && s.onesided;
  if (s.irfft && x.dim(x.rank() - 1) != 2)
    return ctx.error("inverse one-sided DFT needs a complex input");
  s.inLength = x.dim(s.axis);
  s.n = s.irfft ? 2 * (s.inLength - 1) : s.inLength;
  if (ctx.has(1)) {
    KILN_ASSIGN_OR_RETURN(s.n, readScalarInt(ctx, 1, "dft_length"));
  }
  if (s.n <= 0) return ctx.error("dft length must be positive, got ", s.n);
  s.outLength = s.irfft ? s.n : s.onesided ? s.n / 2 + 1 : s.n;
  return s;
}

// Rebuilds the full spectrum of a real signal of length n from its first
// `count` bins (conjugate symmetry), so the inverse can run as usual.
void hermitianExtend(std::vector<Complex> &line, int64_t count, int64_t n) {
  std::vector<Complex> full(n);
  int64_t kept = std::min(count, n / 2 + 1);
  for (int64_t k = 0; k < kept; ++k) full[k] = line[k];
  for (int64_t k = n / 2 + 1; k < n; ++k)
    if (n - k < kept) full[k] = std::conj(line[n - k]);
  line = std::move(full);
}

Status dftKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (!isFloat(x.dtype()))
    return ctx.error("input must be a float tensor, got ", dtypeName(x.dtype()));
  KILN_ASSIGN_OR_RETURN(DftSetup s, dftSetup(ctx));
  const int64_t channels = x.dim(x.rank() - 1), outChannels = s.irfft ? 1 : 2;
  Shape64 outShape = x.shape();
  outShape[s.axis] = s.outLength;
  outShape.back() = outChannels;
  // Lines along the axis: `outer` blocks before it, `inner` positions after
  // it (excluding the real/imaginary dim).
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < s.axis; ++d) outer *= x.dim(d);
  for (int64_t d = s.axis + 1; d < x.rank() - 1; ++d) inner *= x.dim(d);

  const std::vector<double> in = toDoubles(x);
  std::vector<double> out(numelOf(outShape));
  const DftPlan plan(s.n, s.inverse);
  const int64_t count = std::min(s.inLength, s.n); // input values that enter the sum
  std::vector<Complex> line(std::max(count, s.n)), result(s.outLength);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < count; ++j) {
        int64_t at = ((o * s.inLength + j) * inner + i) * channels;
        line[j] = Complex(in[at], channels == 2 ? in[at + 1] : 0.0);
      }
      int64_t used = count;
      if (s.irfft) {
        hermitianExtend(line, count, s.n);
        used = s.n;
      }
      plan.run(line.data(), used, result.data(), s.outLength);
      for (int64_t k = 0; k < s.outLength; ++k) {
        int64_t at = ((o * s.outLength + k) * inner + i) * outChannels;
        out[at] = result[k].real();
        if (outChannels == 2) out[at + 1] = result[k].imag();
      }
    }
  }
  ctx.setOutput(0, fromDoubles(out, std::move(outShape), x.dtype()));
  return Status::success();
}

// ---- STFT ------------------------------------------------------------------------

// signal [batch, length, 1 or 2], frame_step, window [frame_length]?,
// frame_length? -> [batch, frames, bins, 2].
Status stftKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (!isFloat(x.dtype()))
    return ctx.error("signal must be a float tensor, got ", dtypeName(x.dtype()));
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
    return ctx.error("signal must have shape [batch, length, 1 or 2], got ",
                     shapeToString(x.shape()));
  KILN_ASSIGN_OR_RETURN(int64_t step, readScalarInt(ctx, 1, "frame_step"));
  if (step <= 0) return ctx.error("frame_step must be positive, got ", step);
  std::vector<double> window;
  if (ctx.has(2)) {
    if (ctx.in(2).rank() != 1)
      return ctx.error("window must be 1-d, got ", shapeToString(ctx.in(2).shape()));
    window = toDoubles(ctx.in(2));
  }
  int64_t frameLength = static_cast<int64_t>(window.size());
  if (ctx.has(3)) {
    KILN_ASSIGN_OR_RETURN(frameLength, readScalarInt(ctx, 3, "frame_length"));
  }
  if (!ctx.has(2) && !ctx.has(3)) return ctx.error("needs a window or a frame_length");
  if (ctx.has(2) && frameLength != static_cast<int64_t>(window.size()))
    return ctx.error("frame_length ", frameLength, " differs from the window length ",
                     window.size());
  const int64_t batch = x.dim(0), length = x.dim(1), channels = x.dim(2);
  if (frameLength <= 0 || frameLength > length)
    return ctx.error("frame_length ", frameLength, " does not fit a signal of length ", length);
  if (window.empty()) window.assign(frameLength, 1.0);

  const int64_t frames = 1 + (length - frameLength) / step;
  const int64_t bins = ctx.node().getInt("onesided") != 0 ? frameLength / 2 + 1 : frameLength;
  const std::vector<double> in = toDoubles(x);
  std::vector<double> out(batch * frames * bins * 2);
  const DftPlan plan(frameLength, false);
  std::vector<Complex> frame(frameLength), spectrum(bins);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t j = 0; j < frameLength; ++j) {
        int64_t at = (b * length + f * step + j) * channels;
        frame[j] = Complex(in[at], channels == 2 ? in[at + 1] : 0.0) * window[j];
      }
      plan.run(frame.data(), frameLength, spectrum.data(), bins);
      double *dst = out.data() + ((b * frames + f) * bins) * 2;
      for (int64_t k = 0; k < bins; ++k) {
        dst[2 * k] = spectrum[k].real();
        dst[2 * k + 1] = spectrum[k].imag();
      }
    }
  }
  ctx.setOutput(0, fromDoubles(out, {batch, frames, bins, 2}, x.dtype()));
  return Status::success();
}

// ---- window functions ----------------------------------------------------------------

// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size when
// periodic, size - 1 when symmetric.
Status cosineWindow(KernelContext &ctx, double a0, double a1, double a2) {
  KILN_ASSIGN_OR_RETURN(int64_t size, readScalarInt(ctx, 0, "size"));
  if (size < 0) return ctx.error("window size must not be negative, got ", size);
  KILN_ASSIGN_OR_RETURN(DType dtype, outputDType(ctx));
  const bool periodic = ctx.node().getInt("periodic") != 0;
  const double denom = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> w(size);
  // A symmetric window of one point divides 0 by 0: NaN, as the ONNX
  // formula (and ONNX Runtime) give.
  for (int64_t n = 0; n < size; ++n) {
    double x = 2.0 * std::numbers::pi * static_cast<double>(n) / denom;
    w[n] = a0 - a1 * std::cos(x) + a2 * std::cos(2.0 * x);
  }
  ctx.setOutput(0, fromDoubles(w, {size}, dtype));
  return Status::success();
}

Status hannWindowKernel(KernelContext &ctx) {
  return cosineWindow(ctx, 0.5, 0.5, 0.0);
}
Status hammingWindowKernel(KernelContext &ctx) {
  return cosineWindow(ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}
Status blackmanWindowKernel(KernelContext &ctx) {
  return cosineWindow(ctx, 0.42, 0.5, 0.08);
}

// ---- MelWeightMatrix -------------------------------------------------------------

double hertzToMel(double hz) {
  return 2595.0 * std::log10(1.0 + hz / 700.0);
}
double melToHertz(double mel) {
  return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
}

// [dft_length / 2 + 1, num_mel_bins]: triangular filters with peak 1 whose
// corners are num_mel_bins + 2 points evenly spaced on the mel scale from
// lower_edge_hertz, each rounded down to a DFT bin (the ONNX definition:
// bin = floor((dft_length + 1) * hz / sample_rate)).
Status melWeightMatrixKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t numMel, readScalarInt(ctx, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(int64_t dftLength, readScalarInt(ctx, 1, "dft_length"));
  KILN_ASSIGN_OR_RETURN(int64_t sampleRate, readScalarInt(ctx, 2, "sample_rate"));
  KILN_ASSIGN_OR_RETURN(double lowerHz, readScalarNumber(ctx, 3, "lower_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(double upperHz, readScalarNumber(ctx, 4, "upper_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(DType dtype, outputDType(ctx));
  if (numMel <= 0 || dftLength <= 0 || sampleRate <= 0)
    return ctx.error("num_mel_bins, dft_length and sample_rate must be positive, got ", numMel,
                     ", ", dftLength, ", ", sampleRate);
  if (!std::isfinite(lowerHz) || !std::isfinite(upperHz) || lowerHz < 0 || upperHz < lowerHz)
    return ctx.error("edges must be finite and satisfy 0 <= lower_edge_hertz <= "
                     "upper_edge_hertz, got ", lowerHz, " and ", upperHz);

  const int64_t numBins = dftLength / 2 + 1;
  int64_t total = 0;
  if (__builtin_mul_overflow(numBins, numMel, &total) || total > (int64_t{1} << 31))
    return ctx.error("output of ", numBins, " x ", numMel, " elements is too large");
  // The bin of hz, or -1 when it lies outside [0, numBins) (checked in double,
  // before the cast, so a huge value is never converted).
  auto binOf = [&](double hz) -> int64_t {
    double bin =
        std::floor(static_cast<double>(dftLength + 1) * hz / static_cast<double>(sampleRate));
    return bin >= 0 && bin < static_cast<double>(numBins) ? static_cast<int64_t>(bin) : -1;
  };
  if (binOf(upperHz) < 0)
    return ctx.error("upper_edge_hertz ", upperHz, " maps past the last DFT bin (", numBins - 1,
                     ") of dft_length ", dftLength, " at sample_rate ", sampleRate);
  const double lowMel = hertzToMel(lowerHz);
  const double melStep = (hertzToMel(upperHz) - lowMel) / static_cast<double>(numMel + 2);
  std::vector<int64_t> corner(numMel + 2);
  // The corners lie between the edges in exact arithmetic, but the mel round
  // trip can round one past an edge's bin, so each is checked.
  for (int64_t i = 0; i < numMel + 2; ++i) {
    corner[i] = binOf(melToHertz(static_cast<double>(i) * melStep + lowMel));
    if (corner[i] < 0)
      return ctx.error("mel corner ", i, " falls outside the ", numBins, " DFT bins");
  }
  std::vector<double> out(numBins * numMel, 0.0);
  auto set = [&](int64_t bin, int64_t mel, double v) { out[bin * numMel + mel] = v; };
  for (int64_t m = 0; m < numMel; ++m) {
    const int64_t left = corner[m], center = corner[m + 1], right = corner[m + 2];
    if (center == left) {
      set(center, m, 1.0);
    } else {
      for (int64_t j = left; j <= center; ++j)
        set(j, m, static_cast<double>(j - left) / static_cast<double>(center - left));
    }
    for (int64_t j = center; j < right; ++j)
      set(j, m, static_cast<double>(right - j) / static_cast<double>(right - center));
  }
  ctx.setOutput(0, fromDoubles(out, {numBins, numMel}, dtype));
  return Status::success();
}

} // namespace

void registerSignalKernels(KernelTable &t) {
  t.add(OpKind::DFT, dftKernel);
  t.add(OpKind::STFT, stftKernel);
  t.add(OpKind::HannWindow, hannWindowKernel);
  t.add(OpKind::HammingWindow, hammingWindowKernel);
  t.add(OpKind::BlackmanWindow, blackmanWindowKernel);
  t.add(OpKind::MelWeightMatrix, melWeightMatrixKernel);
}

} // namespace kiln
