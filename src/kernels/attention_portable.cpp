// The attention tile in portable C++: the vector code of attention_simd.h
// over a one-lane "vector" of plain floats, for CPUs without AVX2.
#include "kernels/attention_simd.h"

#include <cmath>

namespace kiln::kernels::detail {
namespace {

struct Scalar {
  using T = float;
  using M = bool;
  static constexpr int kLanes = 1;
  static T load(const float *p, int lanes) { return lanes > 0 ? *p : 0.0f; }
  static void store(float *p, T v, int lanes) {
    if (lanes > 0) *p = v;
  }
  static T set1(float x) { return x; }
  static T add(T a, T b) { return a + b; }
  static T sub(T a, T b) { return a - b; }
  static T mul(T a, T b) { return a * b; }
  static T min(T a, T b) { return b < a ? b : a; }
  static T max(T a, T b) { return a < b ? b : a; }
  static T fmadd(T a, T b, T c) { return std::fma(a, b, c); }
  static T fnmadd(T a, T b, T c) { return std::fma(-a, b, c); }
  static T round(T a) { return std::nearbyint(a); }
  static T ldexp(T a, T n) { return std::ldexp(a, static_cast<int>(n)); }
  static M lessThan(T a, T b) { return a < b; }
  static T select(M m, T a, T b) { return m ? a : b; }
};

} // namespace

AttentionTileFn attentionTilePortable() {
  return simd::attentionTile<Scalar, 4, 4, 1>;
}

} // namespace kiln::kernels::detail
