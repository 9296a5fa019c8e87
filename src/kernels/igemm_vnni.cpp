// AVX-512 VNNI integer microkernels: h x 32 tiles, h = 1..14, in 2h zmm
// accumulators. Per group of 4 k: two B loads (16 columns x 4 i8 each) and,
// per row, one 4-byte broadcast of A (u8) and two vpdpbusd, each 64
// multiply-adds into 16 i32 lanes. The same register budget as the f32
// kernel (28 accumulators + 2 B + 1 A). Compiled with -mavx512f -mavx512bw
// -mavx512vnni; called only after the driver checked the CPU.
#include "kernels/igemm_microkernel.h"

#include <immintrin.h>

namespace kiln::kernels::detail {
namespace {

constexpr int kMr = 14;
constexpr int kNr = 32;

// acc += a (u8) . b (i8), in place. Written as asm because GCC 12 does not
// keep _mm512_dpbusd_epi32's accumulator in its register: with 28 of them
// it copied each through another register and the stack on every k group
// (104 stack accesses per 84 vpdpbusd; the kernel ran at 40 % of oneDNN's).
__attribute__((always_inline)) inline void dpbusd(__m512i &acc, __m512i a, __m512i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
}

template <int H>
void kernel(int64_t k4, const void *pav, const void *pbv, int32_t *c, int64_t ldc, int64_t cols) {
  const uint8_t *pa = static_cast<const uint8_t *>(pav);
  const int8_t *pb = static_cast<const int8_t *>(pbv);
  __m512i acc[H][2];
#pragma GCC unroll 14
  for (int i = 0; i < H; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  for (int64_t g = 0; g < k4; ++g) {
    const __m512i b0 = _mm512_load_si512(pb);
    const __m512i b1 = _mm512_load_si512(pb + 64);
    _mm_prefetch(reinterpret_cast<const char *>(pb + 8 * 4 * kNr), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < H; ++i) {
      int32_t a4;
      __builtin_memcpy(&a4, pa + 4 * i, 4);
      const __m512i a = _mm512_set1_epi32(a4);
      dpbusd(acc[i][0], a, b0);
      dpbusd(acc[i][1], a, b1);
    }
    pa += 4 * H;
    pb += 4 * kNr;
  }
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32   ? __mmask16(0xFFFF)
                       : cols <= 16 ? __mmask16(0)
                                    : __mmask16((1u << (cols - 16)) - 1);
#pragma GCC unroll 14
  for (int i = 0; i < H; ++i) {
    _mm512_mask_storeu_epi32(c + i * ldc, m0, acc[i][0]);
    _mm512_mask_storeu_epi32(c + i * ldc + 16, m1, acc[i][1]);
  }
}

} // namespace

IgemmKernelInfo igemmKernelVnni() {
  return {kMr,
          kNr,
          {4, 1},
          {nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>, kernel<7>,
           kernel<8>, kernel<9>, kernel<10>, kernel<11>, kernel<12>, kernel<13>, kernel<14>},
          requantizeRowAvx2};
}

} // namespace kiln::kernels::detail
