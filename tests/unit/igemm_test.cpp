// kernels::igemm against an i64 reference: u8/i8 operands in all four
// combinations, transposed sources, zero points per tensor, per row and per
// column, pre-packed A or B, a panel source for B, the i32 and requantizing
// finishers (against the interpreter's requantize<Q>), edge shapes (K not a
// multiple of 4, K = 0, tiles cut at M and N), on every ISA this CPU runs,
// with 1 and 2 threads; and the 8-bit conv's im2col panel source
// (igemm_conv.h) against a direct convolution.
#include "kernels/igemm.h"
#include "kernels/igemm_conv.h"

#include "interp/kernels/quantize.h"
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

enum class Source { kMatrix, kPackedA, kPackedB, kPanelSource };

struct Case {
  int64_t M, N, K;
  bool aSigned, bSigned;
  bool transA = false, transB = false;
  bool zpPerRow = false, zpPerCol = false;
};

struct Operands {
  std::vector<uint8_t> a, b; // raw bytes, padded strides
  int64_t lda, ldb;
  std::vector<int32_t> za, zb;
};

Operands makeOperands(const Case &c, std::mt19937 &rng) {
  Operands o;
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t aRows = c.transA ? c.K : c.M, aCols = c.transA ? c.M : c.K;
  const int64_t bRows = c.transB ? c.N : c.K, bCols = c.transB ? c.K : c.N;
  o.lda = aCols + 3;
  o.ldb = bCols + 5;
  o.a.resize(size_t(std::max<int64_t>(1, aRows * o.lda)));
  o.b.resize(size_t(std::max<int64_t>(1, bRows * o.ldb)));
  for (auto &v : o.a) v = uint8_t(byte(rng));
  for (auto &v : o.b) v = uint8_t(byte(rng));
  auto zp = [&](bool isSigned) { return isSigned ? byte(rng) - 128 : byte(rng); };
  o.za.resize(size_t(c.zpPerRow ? c.M : 1));
  o.zb.resize(size_t(c.zpPerCol ? c.N : 1));
  for (auto &z : o.za) z = zp(c.aSigned);
  for (auto &z : o.zb) z = zp(c.bSigned);
  return o;
}

int32_t valueOf(const std::vector<uint8_t> &m, int64_t ld, bool trans, bool isSigned, int64_t r,
                int64_t col) {
  const uint8_t v = m[size_t(trans ? col * ld + r : r * ld + col)];
  return isSigned ? int32_t(int8_t(v)) : int32_t(v);
}

std::vector<int64_t> reference(const Case &c, const Operands &o) {
  std::vector<int64_t> acc(size_t(c.M * c.N), 0);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      int64_t s = 0;
      const int32_t za = o.za[size_t(c.zpPerRow ? i : 0)], zb = o.zb[size_t(c.zpPerCol ? j : 0)];
      for (int64_t k = 0; k < c.K; ++k)
        s += int64_t(valueOf(o.a, o.lda, c.transA, c.aSigned, i, k) - za) *
             (valueOf(o.b, o.ldb, c.transB, c.bSigned, k, j) - zb);
      acc[size_t(i * c.N + j)] = s;
    }
  return acc;
}

struct PanelCtx {
  Int8Matrix b;
  int64_t K;
};
void packPanel(const void *ctx, int64_t j0, int cols, const IgemmPanelFormat &f, void *dst,
               int32_t *sums) {
  const PanelCtx &p = *static_cast<const PanelCtx *>(ctx);
  igemmPackBPanel(p.b, p.K, j0, cols, f, dst, sums);
}

// Fills `p` for the case; the packed operands live in `keep`.
void setUp(IgemmProblem &p, const Case &c, const Operands &o, Source src, IgemmIsa isa,
           PackedInt8 &keep, PanelCtx &panel) {
  p.M = c.M, p.N = c.N, p.K = c.K;
  p.a = {o.a.data(), o.lda, c.aSigned, c.transA};
  p.b = {o.b.data(), o.ldb, c.bSigned, c.transB};
  p.isa = isa;
  p.za = c.zpPerRow ? ZeroPoints{0, o.za.data()} : ZeroPoints{o.za[0], nullptr};
  p.zb = c.zpPerCol ? ZeroPoints{0, o.zb.data()} : ZeroPoints{o.zb[0], nullptr};
  if (src == Source::kPackedA) {
    keep = PackedInt8::packA(c.M, c.K, p.a, isa);
    p.packedA = &keep;
  } else if (src == Source::kPackedB) {
    keep = PackedInt8::packB(c.K, c.N, p.b, isa);
    p.packedB = &keep;
  } else if (src == Source::kPanelSource) {
    panel = {p.b, c.K};
    p.bSource = {packPanel, &panel};
    p.bSourceSigned = c.bSigned;
  }
}

std::string describe(const Case &c, Source src, IgemmIsa isa, int threads) {
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
         (c.aSigned ? " A=i8" : " A=u8") + (c.bSigned ? " B=i8" : " B=u8") +
         (c.transA ? " tA" : "") + (c.transB ? " tB" : "") + (c.zpPerRow ? " zaRow" : "") +
         (c.zpPerCol ? " zbCol" : "") + " src=" + std::to_string(int(src)) + " " +
         igemmIsaName(isa) + " threads=" + std::to_string(threads);
}

std::vector<IgemmIsa> isas() {
  std::vector<IgemmIsa> out;
  for (IgemmIsa isa : {IgemmIsa::kPortable, IgemmIsa::kAvx2, IgemmIsa::kAvx512Vnni})
    if (igemmIsaSupported(isa)) out.push_back(isa);
  return out;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const int64_t shapes[][3] = {{1, 1, 1},    {3, 5, 7},    {14, 32, 16},
                               {15, 33, 9},  {29, 70, 64}, {64, 17, 130},
                               {100, 96, 3}, {5, 40, 0},   {200, 45, 77}};
  int n = 0;
  for (const auto &s : shapes)
    for (int types = 0; types < 4; ++types, ++n)
      out.push_back({s[0], s[1], s[2], bool(types & 1), bool(types & 2), n % 3 == 1, n % 4 == 2,
                     n % 2 == 0, n % 3 == 0});
  return out;
}

TEST(Igemm, StoreI32MatchesReference) {
  runtime::ThreadPool pool1(1), pool2(2);
  for (IgemmIsa isa : isas())
    for (const Case &c : cases())
      for (Source src : {Source::kMatrix, Source::kPackedA, Source::kPackedB, Source::kPanelSource})
        for (runtime::ThreadPool *pool : {&pool1, &pool2}) {
          std::mt19937 rng(uint32_t(c.M * 7 + c.N * 131 + c.K));
          const Operands o = makeOperands(c, rng);
          IgemmProblem p;
          PackedInt8 keep;
          PanelCtx panel;
          setUp(p, c, o, src, isa, keep, panel);
          p.pool = pool;
          const int64_t ldo = c.N + 1;
          std::vector<int32_t> out(size_t(c.M * ldo), 12345);
          StoreI32 store{out.data(), ldo};
          p.finish = storeI32(&store);
          igemm(p);
          const std::vector<int64_t> ref = reference(c, o);
          const std::string what = describe(c, src, isa, pool->threads());
          for (int64_t i = 0; i < c.M; ++i) {
            for (int64_t j = 0; j < c.N; ++j)
              ASSERT_EQ(out[size_t(i * ldo + j)], int32_t(ref[size_t(i * c.N + j)]))
                  << what << " at " << i << "," << j;
            ASSERT_EQ(out[size_t(i * ldo + c.N)], 12345) << what << ": wrote past N";
          }
        }
}

TEST(Igemm, RequantizeMatchesInterpreter) {
  runtime::ThreadPool pool(2);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> scaleDist(1e-5f, 2e-3f);
  std::uniform_int_distribution<int> biasDist(-20000, 20000);
  for (IgemmIsa isa : isas())
    for (const Case &c : cases())
      for (bool outSigned : {false, true})
        for (int scales : {0, 1, 2}) { // per tensor, per row, per column
          // Stored transposed (colStride = M, as a MatMul's output stored
          // into a transposed view) or row-major (a conv's NCHW output).
          const bool transposed = (c.M + c.N + scales) % 2 == 0;
          std::mt19937 orng(uint32_t(c.M + c.N * 3 + c.K * 5));
          const Operands o = makeOperands(c, orng);
          IgemmProblem p;
          PackedInt8 keep;
          PanelCtx panel;
          setUp(p, c, o, scales == 1 ? Source::kPackedA : Source::kPackedB, isa, keep, panel);
          p.pool = &pool;
          std::vector<float> scale(size_t(scales == 0 ? 1 : scales == 1 ? c.M : c.N));
          for (float &s : scale) s = scaleDist(rng);
          std::vector<int32_t> bias(size_t(c.M));
          for (int32_t &b : bias) b = biasDist(rng);
          const int32_t zp = outSigned ? 3 : 120;
          std::vector<uint8_t> out(size_t(c.M * c.N), 0);
          Requantize rq{
              out.data(),   transposed ? 1 : c.N, transposed ? c.M : 1,  outSigned,   zp,
              scale.data(), scales == 1,          int64_t(scale.size()), bias.data(), true};
          p.finish = requantize(&rq);
          igemm(p);
          const std::vector<int64_t> ref = reference(c, o);
          const std::string what =
              describe(c, Source::kPackedB, isa, 2) + (outSigned ? " out=i8" : " out=u8") +
              " scales=" + std::to_string(scales) + (transposed ? " transposed" : "");
          for (int64_t i = 0; i < c.M; ++i)
            for (int64_t j = 0; j < c.N; ++j) {
              const float s = scale[size_t(scales == 0 ? 0 : scales == 1 ? i : j)];
              const int64_t acc = ref[size_t(i * c.N + j)] + bias[size_t(i)];
              const int expect = outSigned ? int(kiln::requantize<int8_t>(acc, s, zp, false))
                                           : int(kiln::requantize<uint8_t>(acc, s, zp, false));
              const uint8_t got = out[size_t(transposed ? j * c.M + i : i * c.N + j)];
              ASSERT_EQ(outSigned ? int(int8_t(got)) : int(got), expect)
                  << what << " at " << i << "," << j << " acc " << acc;
            }
        }
}

// Conv geometries of the tests below: strides 1-3, pads that take whole
// taps off the input, dilation, groups, 1-D; rows long enough for the vector
// gathers (stride 1: 16 outputs per copy, 2: 8) with their overlapping last
// copy, odd widths, a 1x1 conv.
struct Geometry {
  int64_t C, H, W, K, R, S, stride, pad, dilation, groups;
};
const Geometry kConvGeometries[] = {
    {3, 64, 64, 16, 3, 3, 2, 1, 1, 1}, {16, 13, 37, 8, 3, 3, 2, 1, 1, 1},
    {8, 9, 11, 12, 3, 3, 1, 1, 1, 4},  {5, 7, 40, 6, 1, 5, 3, 2, 1, 1},
    {4, 10, 10, 4, 3, 3, 1, 2, 2, 2},  {32, 6, 6, 64, 1, 1, 1, 0, 1, 1},
    {2, 1, 50, 3, 1, 7, 2, 3, 1, 1},   {6, 5, 5, 6, 5, 5, 2, 4, 1, 6},
    {8, 5, 40, 8, 3, 3, 1, 1, 1, 1},   {4, 6, 33, 4, 1, 3, 1, 0, 1, 1},
    {3, 9, 45, 8, 3, 3, 2, 1, 1, 1},   {5, 4, 70, 6, 1, 1, 1, 0, 1, 1},
    {2, 3, 67, 4, 3, 5, 2, 2, 1, 1}};

ConvShape convShapeOf(const Geometry &g) {
  ConvShape cs;
  cs.C = g.C, cs.H = g.H, cs.W = g.W, cs.K = g.K, cs.R = g.R, cs.S = g.S;
  cs.strideH = cs.strideW = g.stride;
  cs.dilationH = cs.dilationW = g.dilation;
  cs.padTop = cs.padLeft = cs.padBottom = cs.padRight = g.pad;
  cs.groups = g.groups;
  return cs;
}

// The im2col panel source against its definition, in every panel format
// (whatever this CPU runs: VNNI's 4-byte groups in 64-column panels too),
// every panel of every geometry, read as IntConvStep reads it (a padded
// copy, or the input itself without padding): element (k, j) of the
// shifted im2col matrix at its place in the layout of igemm.h, and the
// column sums.
TEST(Igemm, Int8ConvPanelsMatchTheirDefinition) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255);
  const IgemmPanelFormat formats[] = {{16, 2, 2}, {16, 4, 1}, {32, 4, 1}, {64, 4, 1}, {64, 2, 2}};
  for (const Geometry &g : kConvGeometries)
    for (bool xSigned : {false, true}) {
      const ConvShape cs = convShapeOf(g);
      // The whole image; the panels of its last group (offsets, end bound).
      std::vector<uint8_t> image(size_t(g.C * g.H * g.W));
      for (auto &v : image) v = uint8_t(byte(rng));
      const int64_t group = g.groups - 1;
      const uint8_t *x = image.data() + group * (g.C / g.groups) * g.H * g.W;
      const uint8_t padValue = uint8_t(byte(rng));
      std::vector<uint8_t> paddedImage(int8ConvPaddedBytes(cs));
      int8ConvPadImage(cs, image.data(), padValue, paddedImage.data());
      const Int8ConvSource src =
          int8ConvSourceFor(cs, image.data(), paddedImage.data(), group, xSigned, padValue);
      const IgemmBSource panels = int8ConvPanels(&src);
      const int64_t depth = g.C / g.groups * g.R * g.S, P = cs.outH() * cs.outW();
      const int64_t depthPadded = (depth + 3) / 4 * 4;
      const uint8_t flip = xSigned ? 0 : 0x80;
      for (const IgemmPanelFormat &f : formats)
        for (int64_t j0 = 0; j0 < P; j0 += f.nr) {
          const int cols = int(std::min<int64_t>(f.nr, P - j0));
          std::vector<uint8_t> dst(size_t(depthPadded * f.nr * f.elemBytes) + 64);
          std::vector<int32_t> sums(size_t(f.nr), -1);
          panels.pack(&src, j0, cols, f, dst.data(), sums.data());
          for (int j = 0; j < f.nr; ++j) {
            int32_t sum = 0;
            for (int64_t k = 0; k < depthPadded; ++k) {
              int32_t expect = 0; // k past the depth: 0
              if (k < depth) {
                const int64_t c = k / (g.R * g.S), r = k / g.S % g.R, sc = k % g.S;
                const int64_t p = j0 + j, oh = p / cs.outW(), ow = p % cs.outW();
                const int64_t ih = oh * g.stride - g.pad + r * g.dilation;
                const int64_t iw = ow * g.stride - g.pad + sc * g.dilation;
                const bool inside = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
                expect =
                    int8_t((inside ? x[size_t((c * g.H + ih) * g.W + iw)] : src.padValue) ^ flip);
              }
              const int64_t at = (k / f.kGroup) * f.nr * f.kGroup + j * f.kGroup + k % f.kGroup;
              const int32_t got = f.elemBytes == 1
                                      ? int32_t(int8_t(dst[size_t(at)]))
                                      : int32_t(reinterpret_cast<const int16_t *>(dst.data())[at]);
              if (j < cols) {
                ASSERT_EQ(got, expect)
                    << "geometry C" << g.C << " W" << g.W << " s" << g.stride << " nr " << f.nr
                    << " bytes " << f.elemBytes << " panel " << j0 << " column " << j << " k " << k;
                sum += expect;
              }
            }
            ASSERT_EQ(sums[size_t(j)], j < cols ? sum : 0) << "column sum " << j << " panel " << j0;
          }
        }
    }
}

// The 8-bit conv as IntConvStep runs it (weights packed as A per group, the
// im2col panel source as B, i32 out) against a direct convolution in i64,
// on the geometries above with u8 and i8 inputs.
TEST(Igemm, Int8ConvMatchesDirectConvolution) {
  runtime::ThreadPool pool(2);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (IgemmIsa isa : isas())
    for (const Geometry &g : kConvGeometries)
      for (bool xSigned : {false, true}) {
        const ConvShape cs = convShapeOf(g);
        ASSERT_TRUE(cs.valid());
        const int64_t cg = g.C / g.groups, kg = g.K / g.groups, depth = cg * g.R * g.S;
        const int64_t outH = cs.outH(), outW = cs.outW(), P = outH * outW;
        std::vector<uint8_t> x(size_t(g.C * g.H * g.W)), w(size_t(g.K * depth));
        for (auto &v : x) v = uint8_t(byte(rng));
        for (auto &v : w) v = uint8_t(byte(rng));
        const int32_t xZp = xSigned ? byte(rng) - 128 : byte(rng);
        std::vector<int32_t> wZp(size_t(g.K));
        for (auto &z : wZp) z = byte(rng) - 128; // i8 weights
        auto xv = [&](int64_t c, int64_t h, int64_t wi) {
          const uint8_t v = x[size_t((c * g.H + h) * g.W + wi)];
          return xSigned ? int32_t(int8_t(v)) : int32_t(v);
        };
        std::vector<int32_t> y(size_t(g.K * P), 0);
        std::vector<uint8_t> paddedImage(int8ConvPaddedBytes(cs));
        int8ConvPadImage(cs, x.data(), uint8_t(xZp), paddedImage.data());
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          const PackedInt8 a =
              PackedInt8::packA(kg, depth, {w.data() + grp * kg * depth, depth, true, false}, isa);
          const Int8ConvSource src =
              int8ConvSourceFor(cs, x.data(), paddedImage.data(), grp, xSigned, uint8_t(xZp));
          IgemmProblem p;
          p.M = kg, p.N = P, p.K = depth;
          p.packedA = &a;
          p.bSource = int8ConvPanels(&src);
          p.bSourceSigned = xSigned;
          p.za.values = wZp.data() + grp * kg;
          p.zb.scalar = xZp;
          p.pool = &pool;
          StoreI32 store{y.data() + grp * kg * P, P};
          p.finish = storeI32(&store);
          igemm(p);
        }
        const std::string what = std::string(igemmIsaName(isa)) + " C" + std::to_string(g.C) + " " +
                                 std::to_string(g.H) + "x" + std::to_string(g.W) + " K" +
                                 std::to_string(g.K) + " " + std::to_string(g.R) + "x" +
                                 std::to_string(g.S) + " s" + std::to_string(g.stride) + " p" +
                                 std::to_string(g.pad) + " d" + std::to_string(g.dilation) + " g" +
                                 std::to_string(g.groups) + (xSigned ? " x=i8" : " x=u8");
        for (int64_t k = 0; k < g.K; ++k)
          for (int64_t oh = 0; oh < outH; ++oh)
            for (int64_t ow = 0; ow < outW; ++ow) {
              int64_t sum = 0;
              const int64_t grp = k / kg;
              for (int64_t c = 0; c < cg; ++c)
                for (int64_t r = 0; r < g.R; ++r)
                  for (int64_t sc = 0; sc < g.S; ++sc) {
                    const int64_t ih = oh * g.stride - g.pad + r * g.dilation;
                    const int64_t iw = ow * g.stride - g.pad + sc * g.dilation;
                    if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue; // reads xZp
                    const int32_t wk = int8_t(w[size_t((k * cg + c) * g.R * g.S + r * g.S + sc)]);
                    sum += int64_t(xv(grp * cg + c, ih, iw) - xZp) * (wk - wZp[size_t(k)]);
                  }
              ASSERT_EQ(y[size_t(k * P + oh * outW + ow)], sum)
                  << what << " at k " << k << " (" << oh << ", " << ow << ")";
            }
      }
}

} // namespace
} // namespace kiln::kernels
