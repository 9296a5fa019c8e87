// Pooling kernels (see pool.h for the semantics and the row scheme). The
// driver and the portable row loops; the row loops of each vector ISA are in
// pool_avx2.cpp and pool_avx512.cpp (pool_rows.h), picked per call.
#include "kernels/pool.h"

#include "kernels/pool_rows.h"
#include "runtime/thread_pool.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace kiln::kernels {
namespace {

// Below this many window taps a pool runs on the calling thread.
constexpr double kParallelWork = 2e5;

// One spatial axis of a pooling window.
struct Axis {
  int64_t in, out, kernel, stride, dilation, padBegin, padEnd;

  // Taps [begin, end) of output o that fall inside the input.
  void taps(int64_t o, int64_t &begin, int64_t &end) const {
    const int64_t start = o * stride - padBegin;
    begin = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
    end = start >= in ? 0 : std::min(kernel, (in - 1 - start) / dilation + 1);
    begin = std::min(begin, end);
  }
  int64_t inputCount(int64_t o) const {
    int64_t b, e;
    taps(o, b, e);
    return e - b;
  }
  // Taps inside the padded input [-padBegin, in + padEnd); windows never
  // start before -padBegin.
  int64_t paddedCount(int64_t o) const {
    const int64_t room = in + padEnd - (o * stride - padBegin);
    return room <= 0 ? 0 : std::min(kernel, (room + dilation - 1) / dilation);
  }
};

enum class Reduce { kMax, kSum };

template <Reduce R> constexpr float identity() {
  return R == Reduce::kMax ? std::numeric_limits<float>::lowest() : 0.0f;
}

// max lets a NaN win (like the reference interpreter and numpy).
template <Reduce R> inline float combine(float a, float b) {
  if constexpr (R == Reduce::kMax)
    return (b > a || b != b) ? b : a;
  else
    return a + b;
}

struct Plan {
  PoolShape s;
  Axis h, w;
  int64_t bufFloats; // row buffer: padLeft + W + right overhang
};

// y[ow] = reduce_s buf[ow*SW + s*dw] for ow < outW (SW = 0: any stride).
template <Reduce R, int SW>
void horizontal(const float *buf, float *y, int64_t outW, int64_t kernel, int64_t sw, int64_t dw) {
  const int64_t stride = SW ? SW : sw;
  for (int64_t ow = 0; ow < outW; ++ow) y[ow] = buf[ow * stride];
  for (int64_t t = 1; t < kernel; ++t) {
    const float *b = buf + t * dw;
    for (int64_t ow = 0; ow < outW; ++ow) y[ow] = combine<R>(y[ow], b[ow * stride]);
  }
}

template <Reduce R>
void reduceRowsPortable(float *v, const float *x, int64_t stride, int64_t rows, int64_t n) {
  std::copy(x, x + n, v);
  for (int64_t r = 1; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) v[i] = combine<R>(v[i], x[r * stride + i]);
}

template <Reduce R, int SW>
void windowsPortable(const float *buf, float *y, int64_t outW, int64_t kernel, int64_t dw) {
  horizontal<R, SW>(buf, y, outW, kernel, SW, dw);
}

detail::PoolRowKernels rowKernelsFor(GemmIsa isa) {
  switch (resolveGemmIsa(isa)) {
#if defined(__x86_64__)
  case GemmIsa::kAvx512:
    return detail::poolRowsAvx512();
  case GemmIsa::kAvx2:
    return detail::poolRowsAvx2();
#endif
  default:
    return {reduceRowsPortable<Reduce::kMax>,
            reduceRowsPortable<Reduce::kSum>,
            {windowsPortable<Reduce::kMax, 1>, windowsPortable<Reduce::kMax, 2>},
            {windowsPortable<Reduce::kSum, 1>, windowsPortable<Reduce::kSum, 2>}};
  }
}

template <Reduce R>
void poolRows(const Plan &p, const detail::PoolRowKernels &k, bool countIncludePad, const float *x,
              float *y, int64_t oh0, int64_t oh1) {
  thread_local std::vector<float> rowBuf, scale;
  const PoolShape &s = p.s;
  rowBuf.assign(size_t(p.bufFloats), identity<R>());
  float *v = rowBuf.data() + s.padLeft; // v[iw], iw in [-padLeft, W + overhang)
  if constexpr (R == Reduce::kSum) {
    scale.resize(size_t(s.outW));
    for (int64_t ow = 0; ow < s.outW; ++ow)
      scale[size_t(ow)] = float(countIncludePad ? p.w.paddedCount(ow) : p.w.inputCount(ow));
  }
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    int64_t rBegin, rEnd;
    p.h.taps(oh, rBegin, rEnd);
    const int64_t ih0 = oh * s.strideH - s.padTop;
    if (rBegin == rEnd)
      std::fill(v, v + s.W, identity<R>());
    else
      (R == Reduce::kMax ? k.maxRows : k.sumRows)(v, x + (ih0 + rBegin * s.dilationH) * s.W,
                                                  s.dilationH * s.W, rEnd - rBegin, s.W);
    float *yrow = y + oh * s.outW;
    if (s.strideW == 1 || s.strideW == 2)
      (R == Reduce::kMax ? k.maxWindows : k.sumWindows)[s.strideW - 1](rowBuf.data(), yrow, s.outW,
                                                                       s.kernelW, s.dilationW);
    else
      horizontal<R, 0>(rowBuf.data(), yrow, s.outW, s.kernelW, s.strideW, s.dilationW);
    if constexpr (R == Reduce::kSum) {
      const float rows = float(countIncludePad ? p.h.paddedCount(oh) : rEnd - rBegin);
      for (int64_t ow = 0; ow < s.outW; ++ow) {
        const float count = rows * scale[size_t(ow)];
        yrow[ow] = count > 0 ? yrow[ow] / count : 0.0f;
      }
    }
  }
}

Plan makePlan(const PoolShape &s) {
  Plan p{s,
         {s.H, s.outH, s.kernelH, s.strideH, s.dilationH, s.padTop, s.padBottom},
         {s.W, s.outW, s.kernelW, s.strideW, s.dilationW, s.padLeft, s.padRight},
         0};
  const int64_t reach = (s.outW - 1) * s.strideW + (s.kernelW - 1) * s.dilationW + 1;
  p.bufFloats = std::max(reach, s.padLeft + s.W);
  return p;
}

// rows(plane, oh0, oh1) over planes x row blocks on the pool; row blocks
// only when the planes alone are fewer than two per thread.
template <class F>
void forPlaneRows(const PoolShape &s, double work, runtime::ThreadPool *pool, F &&rows) {
  runtime::ThreadPool &tp = pool ? *pool : runtime::ThreadPool::global();
  const int64_t planes = s.N * s.C;
  const int64_t threads = work < kParallelWork ? 1 : tp.threads();
  const int64_t blocks =
      planes < 2 * threads ? std::min(s.outH, (2 * threads + planes - 1) / planes) : 1;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t blk = t % blocks, base = s.outH / blocks, extra = s.outH % blocks;
      const int64_t oh0 = blk * base + std::min(blk, extra);
      const int64_t oh1 = oh0 + base + (blk < extra ? 1 : 0);
      if (oh1 > oh0) rows(t / blocks, oh0, oh1);
    }
  };
  if (threads == 1)
    body(0, planes * blocks);
  else
    tp.parallelFor(planes * blocks, body);
}

template <Reduce R>
void windowPool(const PoolShape &s, bool countIncludePad, const float *x, float *y,
                runtime::ThreadPool *pool, GemmIsa isa) {
  if (s.N * s.C <= 0 || s.outH <= 0 || s.outW <= 0) return;
  const Plan p = makePlan(s);
  const detail::PoolRowKernels k = rowKernelsFor(isa);
  const double work = double(s.N * s.C) * double(s.outH * s.outW) * double(s.kernelH + s.kernelW);
  forPlaneRows(s, work, pool, [&](int64_t plane, int64_t oh0, int64_t oh1) {
    poolRows<R>(p, k, countIncludePad, x + plane * s.H * s.W, y + plane * s.outH * s.outW, oh0,
                oh1);
  });
}

template <Reduce R>
void globalPool(int64_t N, int64_t C, int64_t spatial, const float *x, float *y,
                runtime::ThreadPool *pool) {
  if (N * C <= 0) return;
  runtime::ThreadPool &tp = pool ? *pool : runtime::ThreadPool::global();
  const int64_t planes = N * C;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const float *src = x + plane * spatial;
      // 16 independent partial results, so the loop vectorizes without
      // reassociating one accumulator.
      float acc[16];
      std::fill(acc, acc + 16, identity<R>());
      int64_t i = 0;
      for (; i + 16 <= spatial; i += 16)
        for (int l = 0; l < 16; ++l) acc[l] = combine<R>(acc[l], src[i + l]);
      for (; i < spatial; ++i) acc[0] = combine<R>(acc[0], src[i]);
      float total = acc[0];
      for (int l = 1; l < 16; ++l) total = combine<R>(total, acc[l]);
      if constexpr (R == Reduce::kSum) total = spatial > 0 ? total / float(spatial) : 0.0f;
      y[plane] = total;
    }
  };
  if (double(planes) * double(spatial) < kParallelWork || tp.threads() == 1)
    body(0, planes);
  else
    tp.parallelFor(planes, body);
}

} // namespace

bool PoolShape::valid() const {
  return N >= 0 && C >= 0 && H >= 1 && W >= 1 && outH >= 1 && outW >= 1 && kernelH >= 1 &&
         kernelW >= 1 && strideH >= 1 && strideW >= 1 && dilationH >= 1 && dilationW >= 1 &&
         padTop >= 0 && padLeft >= 0 && padBottom >= 0 && padRight >= 0;
}

void maxPool2d(const PoolShape &s, const float *x, float *y, runtime::ThreadPool *pool,
               GemmIsa isa) {
  windowPool<Reduce::kMax>(s, false, x, y, pool, isa);
}

void averagePool2d(const PoolShape &s, bool countIncludePad, const float *x, float *y,
                   runtime::ThreadPool *pool, GemmIsa isa) {
  windowPool<Reduce::kSum>(s, countIncludePad, x, y, pool, isa);
}

void globalAveragePool(int64_t N, int64_t C, int64_t spatial, const float *x, float *y,
                       runtime::ThreadPool *pool) {
  globalPool<Reduce::kSum>(N, C, spatial, x, y, pool);
}

void globalMaxPool(int64_t N, int64_t C, int64_t spatial, const float *x, float *y,
                   runtime::ThreadPool *pool) {
  globalPool<Reduce::kMax>(N, C, spatial, x, y, pool);
}

} // namespace kiln::kernels
