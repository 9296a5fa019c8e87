// Portable integer microkernels (any CPU): scalar loops over the packed
// layout of igemm.h, mr = 4 rows by nr = 8 columns.
#include "kernels/igemm_microkernel.h"

namespace kiln::kernels::detail {
namespace {

constexpr int kMr = 4;
constexpr int kNr = 8;

template <int H>
void kernel(int64_t k4, const void *pav, const void *pbv, int32_t *c, int64_t ldc, int64_t cols) {
  const uint8_t *pa = static_cast<const uint8_t *>(pav);
  const int8_t *pb = static_cast<const int8_t *>(pbv);
  uint32_t acc[H][kNr] = {}; // wrapping sums, as the vector kernels' i32 lanes
  for (int64_t g = 0; g < k4; ++g, pa += 4 * H, pb += 4 * kNr)
    for (int i = 0; i < H; ++i)
      for (int j = 0; j < kNr; ++j)
        for (int t = 0; t < 4; ++t)
          acc[i][j] += uint32_t(int32_t(pa[4 * i + t]) * int32_t(pb[4 * j + t]));
  for (int i = 0; i < H; ++i)
    for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = int32_t(acc[i][j]);
}

} // namespace

IgemmKernelInfo igemmKernelPortable() {
  return {kMr, kNr, {4, 1}, {nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>}};
}

} // namespace kiln::kernels::detail
