// Portable (scalar C++) convolution pieces: the im2col micro-panel packer
// and the depthwise plane kernel. The fallback for CPUs without AVX2 and the
// cross-check for the vector versions; clarity over speed.
#include "kernels/conv_kernels.h"

#include <algorithm>
#include <vector>

namespace kiln::kernels::detail {

void im2colPackPortable(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
                        float *dst) {
  const Im2colSource &s = *static_cast<const Im2colSource *>(ctx);
  // Per column: the top-left input position of its window (huge when the
  // column is past `cols`, so every tap is out of range and packs 0).
  constexpr int64_t kFar = int64_t(1) << 40;
  std::vector<int64_t> ih0(size_t(nr), kFar), iw0(size_t(nr), kFar);
  for (int64_t q = 0; q * nr < cols; ++q, dst += nr * kc) {
    for (int j = 0; j < nr; ++j) {
      const int64_t p = j0 + q * nr + j;
      const bool in = q * nr + j < cols;
      ih0[size_t(j)] = in ? (p / s.outW) * s.strideH - s.padTop : kFar;
      iw0[size_t(j)] = in ? (p % s.outW) * s.strideW - s.padLeft : kFar;
    }
    for (int64_t k = 0; k < kc; ++k) {
      const int64_t row = p0 + k;
      const int64_t c = row / (s.R * s.S), r = row / s.S % s.R, t = row % s.S;
      const float *plane = s.x + c * s.H * s.W;
      for (int j = 0; j < nr; ++j) {
        const int64_t ih = ih0[size_t(j)] + r * s.dilationH, iw = iw0[size_t(j)] + t * s.dilationW;
        const bool in = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
        dst[k * nr + j] = in ? plane[ih * s.W + iw] : 0.0f;
      }
    }
  }
}

void depthwisePortable(const DepthwiseArgs &a) {
  int64_t batchStart = a.oh0;
  for (int64_t oh = a.oh0; oh < a.oh1; ++oh) {
    int64_t rBegin, rEnd;
    validTapRows(a, oh, rBegin, rEnd);
    float *yrow = a.y + oh * a.outW;
    for (int64_t ow = 0; ow < a.outW; ++ow) {
      float acc = a.bias;
      const int64_t iw0 = ow * a.strideW - a.padLeft;
      for (int64_t r = rBegin; r < rEnd; ++r) {
        const float *xrow = a.x + (oh * a.strideH - a.padTop + r * a.dilationH) * a.W;
        for (int64_t t = 0; t < a.S; ++t) {
          const int64_t iw = iw0 + t * a.dilationW;
          if (iw >= 0 && iw < a.W) acc += a.w[r * a.S + t] * xrow[iw];
        }
      }
      yrow[ow] = acc;
    }
    if (a.opCount && ((oh + 1 - batchStart) * a.outW >= kEpilogueBatch || oh + 1 == a.oh1)) {
      a.epilogue(a.ops, a.opCount, a.y + batchStart * a.outW, 0, a.channel, batchStart * a.outW, 1,
                 (oh + 1 - batchStart) * a.outW);
      batchStart = oh + 1;
    }
  }
}

} // namespace kiln::kernels::detail
