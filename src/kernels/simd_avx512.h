// AVX-512 vector traits for the code written once over a vector type
// (epilogue_simd.h): 16 floats per vector; partial vectors use masked loads
// and stores, so edge tiles take no scalar path. Included only by files
// compiled with -mavx512f -mavx512vl -mfma; everything is in an unnamed
// namespace, so no inline function compiled with AVX-512 is shared with
// other files (see gemm_microkernel.h).
#pragma once

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

struct Avx512 {
  using T = __m512;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  static M laneMask(int lanes) { return lanes >= 16 ? M(0xFFFF) : M((1u << lanes) - 1); }
  static T load(const float *p, int lanes) { return _mm512_maskz_loadu_ps(laneMask(lanes), p); }
  // A whole vector: a plain load, which an FMA can take as its memory
  // operand (GCC keeps load(p, 16)'s all-ones mask, an extra instruction).
  static T loadFull(const float *p) { return _mm512_loadu_ps(p); }
  // A whole vector: a plain store, which a later load of the same bytes can
  // take straight from the store buffer (a masked store's cannot).
  static void storeFull(float *p, T v) { _mm512_storeu_ps(p, v); }
  static void store(float *p, T v, int lanes) { _mm512_mask_storeu_ps(p, laneMask(lanes), v); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T div(T a, T b) { return _mm512_div_ps(a, b); }
  static T min(T a, T b) { return _mm512_min_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T abs(T a) { return _mm512_abs_ps(a); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T fnmadd(T a, T b, T c) { return _mm512_fnmadd_ps(a, b, c); }
  static T round(T a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static T ldexp(T a, T n) { return _mm512_scalef_ps(a, n); }
  static T rcp(T a) { return _mm512_rcp14_ps(a); }
  static M lessThan(T a, T b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static T select(M m, T a, T b) { return _mm512_mask_blend_ps(m, b, a); }
  static M isNaN(T a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  // p[0], p[2], ..., p[2 * (lanes - 1)]: two masked loads reading nothing
  // past the last, one permute.
  static T evens(const float *p, int lanes) {
    const int n = 2 * lanes - 1;
    const T lo = load(p, n), hi = n > 16 ? load(p + 16, n - 16) : _mm512_setzero_ps();
    const __m512i idx =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(lo, idx, hi);
  }
};

} // namespace
} // namespace kiln::kernels::detail
