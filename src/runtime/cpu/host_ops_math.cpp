// Host ops that compute values too irregular or too small for generated
// kernels (host_ops.h): Det (LU decomposition per matrix, in f64) and the
// random ops RandomUniformLike, RandomNormalLike and Bernoulli, which draw
// from the reference interpreter's engine and distributions so that a
// compiled run gives its numbers.
#include "runtime/cpu/host_ops.h"

#include "runtime/cpu/host_ops_util.h"

#include <cmath>
#include <cstring>
#include <random>

namespace kiln::runtime::host {

namespace {

using namespace detail;

// Determinant by LU decomposition with partial pivoting.
double determinant(std::vector<double> a, int64_t n) {
  double det = 1;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (std::fabs(a[r * n + col]) > std::fabs(a[pivot * n + col])) pivot = r;
    if (a[pivot * n + col] == 0) return 0;
    if (pivot != col) {
      for (int64_t c = 0; c < n; ++c) std::swap(a[col * n + c], a[pivot * n + c]);
      det = -det;
    }
    const double p = a[col * n + col];
    det *= p;
    for (int64_t r = col + 1; r < n; ++r) {
      const double f = a[r * n + col] / p;
      for (int64_t c = col; c < n; ++c) a[r * n + c] -= f * a[col * n + c];
    }
  }
  return det;
}

// The seed attribute's bits, as the interpreter uses them.
std::mt19937_64 makeEngine(const RandomParams &p) {
  if (!p.hasSeed) return std::mt19937_64(0);
  uint32_t bits;
  std::memcpy(&bits, &p.seed, sizeof bits);
  return std::mt19937_64(bits);
}

} // namespace

Expected<Tensor> det(const Tensor &x) {
  if (!isFloat(x.dtype())) return makeError("expects a float input, got ", dtypeName(x.dtype()));
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    return makeError("input has shape ", shapeToString(x.shape()),
                     ", expected [..., M, M] square matrices");
  const int64_t n = x.dim(x.rank() - 1);
  KILN_ASSIGN_OR_RETURN(Tensor y,
                        newTensor(x.dtype(), Shape64(x.shape().begin(), x.shape().end() - 2)));
  std::vector<double> m(n * n);
  for (int64_t i = 0; i < y.numel(); ++i) {
    for (int64_t e = 0; e < n * n; ++e) m[e] = x.getDouble(i * n * n + e);
    y.setDouble(i, determinant(m, n));
  }
  return y;
}

Expected<Tensor> randomLike(const Tensor &x, const RandomParams &p) {
  const DType dtype = p.hasDType ? p.dtype : x.dtype();
  if (dtype == DType::String) return makeError("dtype must not be string");
  if (p.kind == RandomKind::Bernoulli && !isFloat(x.dtype()))
    return makeError("probabilities must be floats");
  KILN_ASSIGN_OR_RETURN(Tensor out, newTensor(dtype, x.shape()));
  std::mt19937_64 engine = makeEngine(p);
  switch (p.kind) {
  case RandomKind::Uniform: {
    std::uniform_real_distribution<double> dist(p.low, p.high);
    for (int64_t i = 0; i < out.numel(); ++i) out.setDouble(i, dist(engine));
    break;
  }
  case RandomKind::Normal: {
    std::normal_distribution<double> dist(p.mean, p.scale);
    for (int64_t i = 0; i < out.numel(); ++i) out.setDouble(i, dist(engine));
    break;
  }
  case RandomKind::Bernoulli: {
    std::uniform_real_distribution<double> dist(0.0, 1.0);
    for (int64_t i = 0; i < out.numel(); ++i)
      out.setDouble(i, dist(engine) < x.getDouble(i) ? 1.0 : 0.0);
    break;
  }
  }
  return out;
}

} // namespace kiln::runtime::host
