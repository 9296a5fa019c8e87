// AVX2+FMA vector traits for the code written once over a vector type
// (epilogue_simd.h): 8 floats per vector; partial vectors use
// maskload/maskstore. Included only by files compiled with -mavx2 -mfma;
// everything is in an unnamed namespace, so no inline function compiled with
// AVX2 is shared with other files (see gemm_microkernel.h).
#pragma once

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

// Lane masks for maskload/maskstore: kMaskTable + 8 - lanes enables `lanes`.
alignas(32) const int kMaskTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

struct Avx2 {
  using T = __m256;
  static constexpr int kLanes = 8;
  static __m256i laneMask(int lanes) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kMaskTable + 8 - lanes));
  }
  static T load(const float *p, int lanes) {
    return lanes >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, laneMask(lanes));
  }
  static T loadFull(const float *p) { return _mm256_loadu_ps(p); }
  static void storeFull(float *p, T v) { _mm256_storeu_ps(p, v); }
  static void store(float *p, T v, int lanes) {
    if (lanes >= 8)
      _mm256_storeu_ps(p, v);
    else
      _mm256_maskstore_ps(p, laneMask(lanes), v);
  }
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T div(T a, T b) { return _mm256_div_ps(a, b); }
  static T min(T a, T b) { return _mm256_min_ps(a, b); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  static T abs(T a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T fnmadd(T a, T b, T c) { return _mm256_fnmadd_ps(a, b, c); }
  static T round(T a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // a * 2^n for integral n in [-126, 127] (exp's clamp guarantees it).
  static T ldexp(T a, T n) {
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(a, _mm256_castsi256_ps(e));
  }
  // rcpps returns 0, not a denormal, for |a| >= 2^126: sigmoid(-100) == 0.
  static T rcp(T a) { return _mm256_rcp_ps(a); }
  static T lessThan(T a, T b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static T select(T m, T a, T b) { return _mm256_blendv_ps(b, a, m); }
  static T isNaN(T a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  // p[0], p[2], ..., p[2 * (lanes - 1)]: two masked loads reading nothing
  // past the last; the shuffle interleaves the halves' evens per 128-bit
  // lane (lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6), the permute puts them in order.
  static T evens(const float *p, int lanes) {
    const int n = 2 * lanes - 1;
    const T lo = load(p, n), hi = n > 8 ? load(p + 8, n - 8) : _mm256_setzero_ps();
    const T mixed = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(mixed), _MM_SHUFFLE(3, 1, 2, 0)));
  }
};

} // namespace
} // namespace kiln::kernels::detail
