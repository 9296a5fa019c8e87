// Portable microkernels: plain C++ for any CPU (the compiler vectorizes the
// j loop with the baseline ISA). The fallback and the cross-check for the
// ISA-specific kernels.
#include "kernels/gemm_microkernel.h"

namespace kiln::kernels::detail {
namespace {

constexpr int kMr = 4;
constexpr int kNr = 16;

template <int H>
void kernel(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc, float beta,
            int64_t cols, const float *rowBias) {
  float acc[H][kNr] = {};
  if (rowBias)
    for (int i = 0; i < H; ++i)
      for (int j = 0; j < kNr; ++j) acc[i][j] = rowBias[i];
  for (int64_t k = 0; k < kc; ++k) {
    for (int i = 0; i < H; ++i) {
      float a = pa[i];
      for (int j = 0; j < kNr; ++j) acc[i][j] += a * pb[j];
    }
    pa += H;
    pb += kNr;
  }
  for (int i = 0; i < H; ++i) {
    float *ci = c + i * ldc;
    for (int64_t j = 0; j < cols; ++j) ci[j] = beta != 0.0f ? acc[i][j] + beta * ci[j] : acc[i][j];
  }
}

} // namespace

GemmKernelInfo gemmKernelPortable() {
  return {kMr, kNr, 256, 256, 4096, {nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>}};
}

} // namespace kiln::kernels::detail
