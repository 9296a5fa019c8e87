// Portable microkernel: plain C++ for any CPU (the compiler vectorizes the
// j loop with the baseline ISA). The fallback and the cross-check for the
// ISA-specific kernels.
#include "kernels/gemm_microkernel.h"

namespace kiln::kernels::detail {
namespace {

constexpr int kMr = 4;
constexpr int kNr = 16;

void kernel4x16(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc, float beta,
                const float *bias, bool relu) {
  float acc[kMr][kNr] = {};
  for (int64_t k = 0; k < kc; ++k) {
    for (int i = 0; i < kMr; ++i) {
      float a = pa[i];
      for (int j = 0; j < kNr; ++j) acc[i][j] += a * pb[j];
    }
    pa += kMr;
    pb += kNr;
  }
  for (int i = 0; i < kMr; ++i) {
    float *ci = c + i * ldc;
    for (int j = 0; j < kNr; ++j) {
      float v = acc[i][j];
      if (beta != 0.0f) v += beta * ci[j];
      if (bias) v += bias[j];
      if (relu && v < 0.0f) v = 0.0f;
      ci[j] = v;
    }
  }
}

} // namespace

GemmKernelInfo gemmKernelPortable() {
  return {kMr, kNr, 256, 256, 4096, kernel4x16};
}

} // namespace kiln::kernels::detail
