#include "verify/metrics.h"

#include <algorithm>
#include <cmath>

namespace kiln::verify {

Tolerance defaultTolerance(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return {1e-7, 1e-9};
  // f32: the compiled path reorders sums (GEMM blocking, vectorized
  // reductions, fused epilogues), so every layer carries a few ulps of
  // rounding that grows through deep models: the corpus models show
  // relative L2 errors of 1e-7..1e-5 per layer, and single elements need up
  // to 2e-4 against the float64 oracle (PP-OCRv4 rec). 5e-4 of the scale
  // (about 4000 ulps) leaves a margin for other CPUs' orderings and stays
  // far below what a wrong kernel does.
  case DType::F32:
    return {5e-4, 1e-5};
  case DType::F16:
    return {1e-2, 1e-3};
  case DType::BF16:
    return {2e-2, 1e-2};
  default:
    return {0, 0};
  }
}

namespace {

// One pass over the elements; `get(i)` yields element i as double.
template <class Get> void accumulate(Metrics &m, int64_t n, Get gotAt, Get refAt, Tolerance tol) {
  // The scale of the relative term: the reference element, or the RMS of
  // the reference tensor where that is larger (see metrics.h).
  double scaleSq = 0;
  int64_t scaleCount = 0;
  for (int64_t i = 0; i < n; ++i) {
    double r = refAt(i);
    if (std::isfinite(r)) scaleSq += r * r, ++scaleCount;
  }
  const double rms = scaleCount ? std::sqrt(scaleSq / static_cast<double>(scaleCount)) : 0;
  double sumAbs = 0, sumSq = 0, refSq = 0, gotSq = 0, dot = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    double g = gotAt(i), r = refAt(i);
    bool gNan = std::isnan(g), rNan = std::isnan(r);
    bool gInf = std::isinf(g), rInf = std::isinf(r);
    m.nanGot += gNan;
    m.nanRef += rNan;
    m.infGot += gInf;
    m.infRef += rInf;
    if (gNan || rNan || gInf || rInf) {
      bool same = (gNan && rNan) || (gInf && rInf && g == r);
      m.outsideTolerance += !same;
      continue;
    }
    double d = std::fabs(g - r);
    if (d > m.maxAbsErr) m.maxAbsErr = d;
    sumAbs += d;
    sumSq += d * d;
    refSq += r * r;
    gotSq += g * g;
    dot += g * r;
    ++finite;
    if (!(d <= tol.atol + tol.rtol * std::max(std::fabs(r), rms))) ++m.outsideTolerance;
  }
  if (finite) {
    m.mae = sumAbs / static_cast<double>(finite);
    m.rmse = std::sqrt(sumSq / static_cast<double>(finite));
  }
  m.relL2 = refSq > 0 ? std::sqrt(sumSq / refSq) : std::sqrt(sumSq);
  if (refSq == 0 && gotSq == 0)
    m.cosine = 1;
  else if (refSq == 0 || gotSq == 0)
    m.cosine = 0;
  else
    m.cosine = dot / (std::sqrt(refSq) * std::sqrt(gotSq));
}

} // namespace

Metrics compareTensors(const Tensor &got, const Tensor &ref, Tolerance tol) {
  Metrics m;
  if (got.dtype() != ref.dtype()) {
    m.error = std::string("dtype ") + std::string(dtypeName(got.dtype())) + " vs reference " +
              std::string(dtypeName(ref.dtype()));
    return m;
  }
  if (got.shape() != ref.shape()) {
    m.error = "shape " + shapeToString(got.shape()) + " vs reference " + shapeToString(ref.shape());
    return m;
  }
  m.numel = got.numel();
  if (got.dtype() == DType::String) {
    const std::string *g = got.data<std::string>(), *r = ref.data<std::string>();
    for (int64_t i = 0; i < m.numel; ++i) m.outsideTolerance += g[i] != r[i];
    m.pass = m.outsideTolerance == 0;
    return m;
  }
  if (got.dtype() == DType::F32) {
    const float *g = got.data<float>(), *r = ref.data<float>();
    auto at = [](const float *p) { return [p](int64_t i) { return static_cast<double>(p[i]); }; };
    accumulate(m, m.numel, at(g), at(r), tol);
  } else if (isFloat(got.dtype()) || got.dtype() == DType::Bool) {
    auto at = [](const Tensor &t) { return [&t](int64_t i) { return t.getDouble(i); }; };
    accumulate(m, m.numel, at(got), at(ref), tol);
  } else {
    // Integers compare exactly as int64 (doubles would round above 2^53),
    // by the per-element rule alone; the error figures are still computed
    // in double.
    auto at = [](const Tensor &t) { return [&t](int64_t i) { return t.getDouble(i); }; };
    accumulate(m, m.numel, at(got), at(ref), tol);
    m.outsideTolerance = 0;
    for (int64_t i = 0; i < m.numel; ++i) {
      int64_t g = got.getInt(i), r = ref.getInt(i);
      int64_t d = g > r ? g - r : r - g;
      m.outsideTolerance += static_cast<double>(d) > tol.atol + tol.rtol * std::fabs(double(r));
    }
  }
  m.pass = m.outsideTolerance == 0;
  return m;
}

} // namespace kiln::verify
