// The integer GEMM driver (igemm.h): packing with the 128 shifts, the loop
// nest around the per-ISA microkernels, the zero-point correction and the
// finishers. K is not sliced: 8-bit panels are a quarter of f32 ones, so a
// whole-depth A group (<= kAGroupBytes) stays in L2 and a B panel of depth
// 2048 is 64 KiB, and every tile leaves the microkernel complete, ready to
// be corrected and finished while it is in L1.
#include "kernels/igemm.h"

#include "kernels/gemm_driver.h"
#include "kernels/igemm_microkernel.h"
#include "runtime/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace kiln::kernels {

using detail::ceilDiv;
using detail::roundUp;
using detail::RowPanels;

// ---- ISA selection ------------------------------------------------------------

const char *igemmIsaName(IgemmIsa isa) {
  switch (isa) {
  case IgemmIsa::kAuto:
    return "auto";
  case IgemmIsa::kPortable:
    return "portable";
  case IgemmIsa::kAvx2:
    return "avx2";
  case IgemmIsa::kAvx512Vnni:
    return "avx512vnni";
  }
  return "?";
}

bool igemmIsaSupported(IgemmIsa isa) {
  switch (isa) {
  case IgemmIsa::kAuto:
  case IgemmIsa::kPortable:
    return true;
  case IgemmIsa::kAvx2:
    return gemmIsaSupported(GemmIsa::kAvx2);
  case IgemmIsa::kAvx512Vnni:
#if defined(__x86_64__)
    return gemmIsaSupported(GemmIsa::kAvx512) && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
  }
  return false;
}

IgemmIsa resolveIgemmIsa(IgemmIsa isa) {
  if (isa != IgemmIsa::kAuto && igemmIsaSupported(isa)) return isa;
  static const IgemmIsa best = igemmIsaSupported(IgemmIsa::kAvx512Vnni) ? IgemmIsa::kAvx512Vnni
                               : igemmIsaSupported(IgemmIsa::kAvx2)     ? IgemmIsa::kAvx2
                                                                        : IgemmIsa::kPortable;
  return best;
}

namespace {

// Each ISA's table is built on first use only: the functions returning
// them are compiled with that ISA's flags, so even building the table of an
// unsupported ISA may execute its instructions.
const detail::IgemmKernelInfo &kernelsFor(IgemmIsa isa) {
  switch (resolveIgemmIsa(isa)) {
#if defined(__x86_64__)
  case IgemmIsa::kAvx512Vnni: {
    static const detail::IgemmKernelInfo vnni = detail::igemmKernelVnni();
    return vnni;
  }
  case IgemmIsa::kAvx2: {
    static const detail::IgemmKernelInfo avx2 = detail::igemmKernelAvx2();
    return avx2;
  }
#endif
  default: {
    static const detail::IgemmKernelInfo portable = detail::igemmKernelPortable();
    return portable;
  }
  }
}

constexpr int64_t kAGroupBytes = 192 * 1024; // A rows packed per group (L2)
constexpr int64_t kBBlockBytes = 512 * 1024; // B columns packed per block (L2)

IgemmPanelFormat formatOf(const detail::IgemmKernelInfo &ki) {
  return {ki.nr, ki.layout.kGroup, ki.layout.elemBytes};
}

// K padded for every layout (a multiple of both group sizes).
int64_t paddedDepth(int64_t K) {
  return roundUp(std::max<int64_t>(K, 1), 4);
}

// Element (r, c) of an 8-bit operand, shifted to the microkernel's type:
// `toUnsigned` gives A's u8 (i8 + 128), else B's i8 (u8 - 128). Both are a
// flip of the top bit when the source has the other type.
inline uint8_t loadShifted(const Int8Matrix &m, int64_t r, int64_t c, bool toUnsigned) {
  const uint8_t v = static_cast<const uint8_t *>(m.data)[m.trans ? c * m.ld + r : r * m.ld + c];
  return m.isSigned == toUnsigned ? uint8_t(v ^ 0x80) : v;
}

// Rows [r0, r0 + h) of A (M x K) as one h-row panel with its row sums; T is
// the packed element (u8, or i16 holding the u8 value), G the k group.
template <class T, int G>
void packAPanelT(const Int8Matrix &a, int64_t K, int64_t r0, int h, T *dst, int32_t *rowSums) {
  std::memset(dst, 0, size_t(paddedDepth(K) * h) * sizeof(T));
  for (int i = 0; i < h; ++i) {
    int32_t sum = 0;
    T *d = dst + i * G;
    if (!a.trans) { // the common case, without per-element branches
      const uint8_t *src = static_cast<const uint8_t *>(a.data) + (r0 + i) * a.ld;
      const uint8_t flip = a.isSigned ? 0x80 : 0;
      int64_t k = 0;
      for (; k + G <= K; k += G, d += h * G)
        for (int t = 0; t < G; ++t) {
          const uint8_t v = src[k + t] ^ flip;
          d[t] = T(v);
          sum += v;
        }
      for (int t = 0; k + t < K; ++t) {
        const uint8_t v = src[k + t] ^ flip;
        d[t] = T(v);
        sum += v;
      }
    } else {
      for (int64_t k = 0; k < K; ++k) {
        const uint8_t v = loadShifted(a, r0 + i, k, true);
        dst[(k / G) * h * G + i * G + k % G] = T(v);
        sum += v;
      }
    }
    if (rowSums) rowSums[i] = sum;
  }
}

void packAPanel(const Int8Matrix &a, int64_t K, int64_t r0, int h, const IgemmPanelFormat &f,
                void *dst, int32_t *rowSums) {
  if (f.elemBytes == 1)
    packAPanelT<uint8_t, 4>(a, K, r0, h, static_cast<uint8_t *>(dst), rowSums);
  else
    packAPanelT<int16_t, 2>(a, K, r0, h, static_cast<int16_t *>(dst), rowSums);
}

template <class T, int G>
void packBPanelT(const Int8Matrix &b, int64_t K, int64_t j0, int cols, int nr, T *dst,
                 int32_t *colSums) {
  std::memset(dst, 0, size_t(paddedDepth(K) * nr) * sizeof(T));
  std::fill(colSums, colSums + nr, 0);
  const uint8_t flip = b.isSigned ? 0 : 0x80;
  if (!b.trans) {
    const uint8_t *base = static_cast<const uint8_t *>(b.data);
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t *src = base + k * b.ld + j0;
      T *d = dst + (k / G) * nr * G + k % G;
      for (int j = 0; j < cols; ++j) {
        const int8_t v = int8_t(src[j] ^ flip);
        d[G * j] = T(v);
        colSums[j] += v;
      }
    }
    return;
  }
  for (int j = 0; j < cols; ++j) {
    const uint8_t *src = static_cast<const uint8_t *>(b.data) + (j0 + j) * b.ld;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int8_t v = int8_t(src[k] ^ flip);
      dst[(k / G) * nr * G + G * j + k % G] = T(v);
      sum += v;
    }
    colSums[j] = sum;
  }
}

} // namespace

void igemmPackBPanel(const Int8Matrix &b, int64_t K, int64_t j0, int cols,
                     const IgemmPanelFormat &f, void *dst, int32_t *colSums) {
  if (f.elemBytes == 1)
    packBPanelT<int8_t, 4>(b, K, j0, cols, f.nr, static_cast<int8_t *>(dst), colSums);
  else
    packBPanelT<int16_t, 2>(b, K, j0, cols, f.nr, static_cast<int16_t *>(dst), colSums);
}

IgemmPanelFormat igemmFormat(IgemmIsa isa) {
  return formatOf(kernelsFor(isa));
}

void detail::AlignedFreeBytes::operator()(void *p) const {
  std::free(p);
}

namespace {

std::unique_ptr<uint8_t[], detail::AlignedFreeBytes> allocBytes(size_t bytes) {
  bytes = size_t(roundUp(int64_t(std::max<size_t>(bytes, 64)), 64));
  return std::unique_ptr<uint8_t[], detail::AlignedFreeBytes>(
      static_cast<uint8_t *>(std::aligned_alloc(64, bytes)));
}

} // namespace

PackedInt8 PackedInt8::packA(int64_t M, int64_t K, const Int8Matrix &a, IgemmIsa isa) {
  PackedInt8 p;
  p.isa_ = resolveIgemmIsa(isa);
  const detail::IgemmKernelInfo &ki = kernelsFor(p.isa_);
  p.isA_ = true;
  p.signed_ = a.isSigned;
  p.outer_ = M;
  p.K_ = K;
  const IgemmPanelFormat f = formatOf(ki);
  const int64_t rowBytes = paddedDepth(K) * f.elemBytes;
  p.bytes_ = size_t(M * rowBytes);
  p.data_ = allocBytes(p.bytes_);
  p.sums_.assign(size_t(M), 0);
  const RowPanels panels(M, ki.mr);
  for (int64_t i = 0; i < panels.count; ++i)
    packAPanel(a, K, panels.start(i), panels.height(i), f,
               p.data_.get() + panels.start(i) * rowBytes, p.sums_.data() + panels.start(i));
  return p;
}

PackedInt8 PackedInt8::packB(int64_t K, int64_t N, const Int8Matrix &b, IgemmIsa isa) {
  PackedInt8 p;
  p.isa_ = resolveIgemmIsa(isa);
  const detail::IgemmKernelInfo &ki = kernelsFor(p.isa_);
  p.signed_ = b.isSigned;
  p.outer_ = N;
  p.K_ = K;
  const IgemmPanelFormat f = formatOf(ki);
  const int64_t colBytes = paddedDepth(K) * f.elemBytes;
  const int64_t nPad = roundUp(N, ki.nr);
  p.bytes_ = size_t(nPad * colBytes);
  p.data_ = allocBytes(p.bytes_);
  p.sums_.assign(size_t(nPad), 0);
  for (int64_t j0 = 0; j0 < N; j0 += ki.nr)
    igemmPackBPanel(b, K, j0, int(std::min<int64_t>(ki.nr, N - j0)), f,
                    p.data_.get() + j0 * colBytes, p.sums_.data() + j0);
  return p;
}

// ---- finishers ------------------------------------------------------------------

namespace {

void storeI32Tile(const void *ctx, const int32_t *acc, int64_t ldAcc, int64_t row0, int64_t col0,
                  int h, int cols) {
  const StoreI32 &s = *static_cast<const StoreI32 *>(ctx);
  for (int i = 0; i < h; ++i)
    std::memcpy(s.out + (row0 + i) * s.ld + col0, acc + i * ldAcc, sizeof(int32_t) * size_t(cols));
}

// round(x) half to even for |x| < 2^22, without a libm call (the inputs are
// clamped to a few hundred first), so the loop vectorizes.
inline float roundHalfEven(float x) {
  return (x + 0x1.8p23f) - 0x1.8p23f;
}

// The row's values through scale, rounding, zero point and saturation, in
// a loop without branches (min/max clamps) so that it vectorizes: the
// clamps with compares and jumps mispredicted on every other value (the
// requantize took 40 % of a small QLinearConv net). Not for NaN scales:
// see requantizeTile.
template <class Q>
void requantizeRow(const int32_t *acc, const int32_t *bias, const float *scale, int cols,
                   float below, float above, float zeroPoint, float lo, float hi, Q *o) {
  for (int j = 0; j < cols; ++j) {
    const int32_t v = int32_t(uint32_t(acc[j]) + uint32_t(bias[j]));
    float x = float(v) * scale[j]; // the interpreter's f32 product
    x = std::min(std::max(x, below), above);
    const float q = std::min(std::max(roundHalfEven(x) + zeroPoint, lo), hi);
    o[j] = Q(int(q));
  }
}

template <class Q>
void requantizeTile(const Requantize &r, const int32_t *acc, int64_t ldAcc, int64_t row0,
                    int64_t col0, int h, int cols) {
  const float lo = float(r.outSigned ? -128 : 0), hi = float(r.outSigned ? 127 : 255);
  // Values beyond these saturate whatever the rounding.
  const float below = lo - float(r.zeroPoint) - 1.0f, above = hi - float(r.zeroPoint) + 1.0f;
  Q *out = static_cast<Q *>(r.out);
  const bool scalePerCol = r.scaleCount != 1 && !r.scalePerRow;
  const bool biasPerCol = r.bias && !r.biasPerRow;
  constexpr int kMaxCols = 64; // >= every kernel's nr
  alignas(64) float scale[kMaxCols];
  alignas(64) int32_t bias[kMaxCols];
  bool colsFinite = true;
  for (int j = 0; j < cols; ++j) {
    if (scalePerCol) scale[j] = r.scale[col0 + j], colsFinite &= std::isfinite(scale[j]);
    if (biasPerCol) bias[j] = r.bias[col0 + j];
  }
  alignas(64) Q row[kMaxCols];
  auto rowScale = [&](int64_t rowIndex) {
    return r.scaleCount == 1 ? r.scale[0] : r.scale[rowIndex];
  };
  // One scale and bias per row (a conv's output channels): the best ISA's
  // row when it has one (the same bits as requantizeRow).
  static const detail::RequantizeRowFn isaRow = kernelsFor(IgemmIsa::kAuto).requantizeRow;
  if (isaRow && !scalePerCol && !biasPerCol && r.colStride == 1) {
    bool finite = true;
    for (int i = 0; i < h; ++i) finite &= std::isfinite(rowScale(row0 + i));
    if (finite) {
      for (int i = 0; i < h; ++i)
        isaRow(acc + i * ldAcc, r.bias ? r.bias[row0 + i] : 0, rowScale(row0 + i), cols, below,
               above, float(r.zeroPoint), lo, hi, std::is_same_v<Q, int8_t>,
               out + (row0 + i) * r.ld + col0);
      return;
    }
  }
  for (int i = 0; i < h; ++i) {
    const int64_t rowIndex = row0 + i;
    bool finite = colsFinite;
    if (!scalePerCol) {
      const float s = rowScale(rowIndex);
      std::fill(scale, scale + cols, s);
      finite = std::isfinite(s);
    }
    if (!biasPerCol) std::fill(bias, bias + cols, r.bias ? r.bias[rowIndex] : 0);
    Q *o = out + rowIndex * r.ld + col0 * r.colStride;
    if (!finite) { // NaN or infinite scales (never from a quantizer): the spec's path
      for (int j = 0; j < cols; ++j) {
        const int32_t v = int32_t(uint32_t(acc[i * ldAcc + j]) + uint32_t(bias[j]));
        float x = float(v) * scale[j];
        x = x < below ? below : x > above ? above : x;
        float q = roundHalfEven(x) + float(r.zeroPoint);
        q = q != q ? 0.0f : q < lo ? lo : q > hi ? hi : q; // NaN gives 0, as saturate<Q>
        o[j * r.colStride] = Q(int(q));
      }
      continue;
    }
    Q *dst = r.colStride == 1 ? o : row;
    requantizeRow<Q>(acc + i * ldAcc, bias, scale, cols, below, above, float(r.zeroPoint), lo, hi,
                     dst);
    if (dst != o)
      for (int j = 0; j < cols; ++j) o[j * r.colStride] = row[j];
  }
}

void requantizeAny(const void *ctx, const int32_t *acc, int64_t ldAcc, int64_t row0, int64_t col0,
                   int h, int cols) {
  const Requantize &r = *static_cast<const Requantize *>(ctx);
  if (r.outSigned)
    requantizeTile<int8_t>(r, acc, ldAcc, row0, col0, h, cols);
  else
    requantizeTile<uint8_t>(r, acc, ldAcc, row0, col0, h, cols);
}

} // namespace

IgemmFinisher storeI32(const StoreI32 *s) {
  return {storeI32Tile, s};
}
IgemmFinisher requantize(const Requantize *r) {
  return {requantizeAny, r};
}

// ---- the product ------------------------------------------------------------------

namespace {

thread_local detail::Scratch<uint8_t> tPackA, tPackB, tSums;

struct Plan {
  const IgemmProblem &p;
  const detail::IgemmKernelInfo &ki;
  IgemmPanelFormat format;
  int64_t depthBytes; // bytes of one packed row of A or column of B
  int64_t groups;     // k groups the microkernel runs
  bool aSigned, bSigned;
};

// Computes row panels [pm0, pm1) x columns [j0, j0 + n) of the product.
void block(const Plan &pl, const RowPanels &panels, int64_t pm0, int64_t pm1, int64_t j0,
           int64_t n) {
  const IgemmProblem &p = pl.p;
  const detail::IgemmKernelInfo &ki = pl.ki;
  const int nr = ki.nr;
  const int64_t kb = pl.depthBytes;
  const int64_t nc = std::max<int64_t>(nr, kBBlockBytes / kb / nr * nr);
  const int64_t mcRows = std::max<int64_t>(ki.mr, kAGroupBytes / kb);
  const int64_t ncPad = roundUp(nc, nr);
  // Shifted zero points: za' = za + 128 for an i8 A, zb' = zb - 128 for a u8 B.
  const int32_t aShift = pl.aSigned ? 128 : 0, bShift = pl.bSigned ? 0 : 128;

  uint8_t *aBuf = p.packedA ? nullptr : tPackA.get(roundUp(mcRows + ki.mr, ki.mr) * kb);
  uint8_t *bBuf = p.packedB ? nullptr : tPackB.get(ncPad * kb);
  // Row sums of the A group; per column: sums, zb' and the correction term.
  int32_t *sums = reinterpret_cast<int32_t *>(
      tSums.get(int64_t(sizeof(int32_t)) * (mcRows + ki.mr + 3 * ncPad)));
  int32_t *rowSums = sums, *colSums = sums + mcRows + ki.mr;
  int32_t *colTerm = colSums + ncPad, *zbShifted = colTerm + ncPad;
  alignas(64) int32_t tile[detail::kIgemmMaxMr * 64];

  for (int64_t jc = j0; jc < j0 + n; jc += nc) {
    const int64_t ncur = std::min(nc, j0 + n - jc);
    const int64_t nPanels = ceilDiv(ncur, nr);
    for (int64_t g0 = pm0, g1; g0 < pm1; g0 = g1) {
      g1 = g0 + 1;
      while (g1 < pm1 && panels.start(g1 + 1) - panels.start(g0) <= mcRows) ++g1;
      const int64_t rowBase = panels.start(g0);
      const uint8_t *pa = aBuf;
      const int32_t *ra = rowSums;
      if (p.packedA) {
        pa = p.packedA->data() + rowBase * kb;
        ra = p.packedA->sums() + rowBase;
      } else {
        for (int64_t i = g0; i < g1; ++i)
          packAPanel(p.a, p.K, panels.start(i), panels.height(i), pl.format,
                     aBuf + (panels.start(i) - rowBase) * kb,
                     rowSums + (panels.start(i) - rowBase));
      }
      for (int64_t q = 0; q < nPanels; ++q) {
        const int64_t col = jc + q * nr;
        const int cols = int(std::min<int64_t>(nr, ncur - q * nr));
        const uint8_t *pb;
        const int32_t *cb;
        if (p.packedB) {
          pb = p.packedB->data() + col * kb;
          cb = p.packedB->sums() + col;
        } else {
          pb = bBuf + q * nr * kb;
          cb = colSums + q * nr;
          if (g0 == pm0) { // packed once per block, reused by later groups
            uint8_t *dst = bBuf + q * nr * kb;
            int32_t *cs = colSums + q * nr;
            if (p.bSource.pack)
              p.bSource.pack(p.bSource.ctx, col, cols, pl.format, dst, cs);
            else
              igemmPackBPanel(p.b, p.K, col, cols, pl.format, dst, cs);
          }
        }
        // colTerm(j) = colsum(B')(j) - K * zb'(j), so that
        // acc = raw - zb'(j) * rowsum(A')(i) - za'(i) * colTerm(j).
        int32_t *ct = colTerm + q * nr, *zb = zbShifted + q * nr;
        for (int j = 0; j < cols; ++j) {
          zb[j] = p.zb.at(col + j) - bShift;
          ct[j] = int32_t(uint32_t(cb[j]) - uint32_t(p.K) * uint32_t(zb[j]));
        }
        // za'(i) * colTerm(j) for the za' of the rows before, recomputed
        // only when za' changes (one value for most weights), so the
        // correction is adds (no vector 32-bit multiply in SSE2).
        alignas(64) uint32_t colCorr[64];
        uint32_t corrZa = 0;
        bool corrValid = false;
        for (int64_t i = g0; i < g1; ++i) {
          const int64_t row = panels.start(i);
          const int h = panels.height(i);
          ki.kernels[h](pl.groups, pa + (row - rowBase) * kb, pb, tile, nr, cols);
          for (int r = 0; r < h; ++r) {
            const uint32_t rs = uint32_t(ra[row - rowBase + r]);
            const uint32_t za = uint32_t(p.za.at(row + r) + aShift);
            if (!corrValid || za != corrZa) {
              for (int j = 0; j < cols; ++j) colCorr[j] = za * uint32_t(ct[j]);
              corrZa = za, corrValid = true;
            }
            int32_t *t = tile + r * nr;
            if (!p.zb.values) {
              const uint32_t rowCorr = uint32_t(zb[0]) * rs;
              for (int j = 0; j < cols; ++j) t[j] = int32_t(uint32_t(t[j]) - rowCorr - colCorr[j]);
            } else {
              for (int j = 0; j < cols; ++j)
                t[j] = int32_t(uint32_t(t[j]) - uint32_t(zb[j]) * rs - colCorr[j]);
            }
          }
          p.finish.fn(p.finish.ctx, tile, nr, row, col, h, cols);
        }
      }
    }
  }
}

} // namespace

void igemm(const IgemmProblem &p) {
  if (p.M <= 0 || p.N <= 0) return;
  IgemmIsa isa = p.isa;
  if (p.packedA) isa = p.packedA->isa();
  if (p.packedB) isa = p.packedB->isa();
  const detail::IgemmKernelInfo &ki = kernelsFor(isa);
  const IgemmPanelFormat f = formatOf(ki);
  const Plan pl{p,
                ki,
                f,
                paddedDepth(p.K) * f.elemBytes,
                p.K > 0 ? paddedDepth(p.K) / f.kGroup : 0,
                p.packedA ? p.packedA->sourceSigned() : p.a.isSigned,
                p.packedB        ? p.packedB->sourceSigned()
                : p.bSource.pack ? p.bSourceSigned
                                 : p.b.isSigned};
  runtime::ThreadPool &pool = p.pool ? *p.pool : runtime::ThreadPool::global();
  const RowPanels panels(p.M, ki.mr);
  const int64_t tilesM = panels.count, tilesN = ceilDiv(p.N, ki.nr);
  // The f32 GEMM's grid (gemm_driver.cpp): one block per thread, the split
  // that repacks least; small products stay on the calling thread.
  const double ops = 2.0 * double(p.M) * double(p.N) * double(p.K);
  const int64_t threads = ops < 4e5 ? 1 : std::min<int64_t>(pool.threads(), tilesM * tilesN);
  int64_t bestTm = 1, bestTn = 1;
  double bestCost = -1;
  for (int64_t tm = threads; tm >= 1; --tm) {
    if (threads % tm || tm > tilesM || threads / tm > tilesN) continue;
    const int64_t tn = threads / tm;
    const double cost = double(tm) * double(p.N) + double(tn) * double(p.M);
    if (bestCost < 0 || cost < bestCost) bestCost = cost, bestTm = tm, bestTn = tn;
  }
  if (bestCost < 0) bestTm = bestTn = 1;
  auto span = [](int64_t tiles, int64_t parts, int64_t idx) {
    const int64_t base = tiles / parts, extra = tiles % parts;
    const int64_t first = idx * base + std::min(idx, extra);
    return std::pair<int64_t, int64_t>(first, first + base + (idx < extra ? 1 : 0));
  };
  auto run = [&](int64_t u) {
    auto [pm0, pm1] = span(tilesM, bestTm, u / bestTn);
    auto [tn0, tn1] = span(tilesN, bestTn, u % bestTn);
    const int64_t j0 = tn0 * ki.nr, n = std::min(tn1 * ki.nr, p.N) - j0;
    if (pm1 > pm0 && n > 0) block(pl, panels, pm0, pm1, j0, n);
  };
  if (bestTm * bestTn == 1) {
    run(0);
    return;
  }
  pool.parallelFor(bestTm * bestTn, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) run(u);
  });
}

} // namespace kiln::kernels
