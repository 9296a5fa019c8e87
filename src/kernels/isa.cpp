#include "kernels/isa.h"

namespace kiln::kernels {

const char *gemmIsaName(GemmIsa isa) {
  switch (isa) {
  case GemmIsa::kAuto:
    return "auto";
  case GemmIsa::kPortable:
    return "portable";
  case GemmIsa::kAvx2:
    return "avx2";
  case GemmIsa::kAvx512:
    return "avx512";
  }
  return "?";
}

bool gemmIsaSupported(GemmIsa isa) {
  switch (isa) {
  case GemmIsa::kAuto:
  case GemmIsa::kPortable:
    return true;
#if defined(__x86_64__)
  // libgcc's checks include the OS enabling the ymm/zmm state (XGETBV).
  case GemmIsa::kAvx2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case GemmIsa::kAvx512:
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma");
#else
  default:
    return false;
#endif
  }
  return false;
}

GemmIsa bestGemmIsa() {
  static const GemmIsa best = gemmIsaSupported(GemmIsa::kAvx512) ? GemmIsa::kAvx512
                              : gemmIsaSupported(GemmIsa::kAvx2) ? GemmIsa::kAvx2
                                                                 : GemmIsa::kPortable;
  return best;
}

GemmIsa resolveGemmIsa(GemmIsa isa) {
  return isa == GemmIsa::kAuto || !gemmIsaSupported(isa) ? bestGemmIsa() : isa;
}

} // namespace kiln::kernels
