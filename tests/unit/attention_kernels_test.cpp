// The flash-style attention kernel (kernels/attention.h) on every ISA this
// CPU runs, against a plain reference in double: several problems with
// broadcast operands, head dims 32/64/80, Sq != Sk, Sk past one K/V block,
// masks per key, per (query, key) and scalar, with -inf and float-lowest
// entries and fully masked rows, a row whose mask overflowed to +inf (NaN,
// as the unfused softmax gives); one and two threads.
#include "kernels/attention.h"
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace kiln::kernels {
namespace {

enum class MaskKind { None, PerKey, Full, Scalar };

struct Case {
  int64_t batches, sq, sk, d, dv;
  MaskKind mask = MaskKind::None;
  // Masked entries: -inf, or float's lowest (HF-style padding masks).
  bool infinite = true;
  int fullyMaskedRow = -1; // a query row whose every key is masked (Full)
  int overflowRow = -1;    // a query row with one +inf entry (Full): NaN
};

struct Data {
  std::vector<float> q, kt, v, mask;
  std::vector<int64_t> qOff, kOff, vOff, mOff;
  int64_t maskRowStride = 0, maskColStride = 0;
};

// Q and V per problem; K^T shared by every other problem (a broadcast batch
// dim), so the offsets are not simply b * size.
Data makeData(const Case &c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::bernoulli_distribution masked(0.3);
  Data x;
  x.q.resize(size_t(c.batches * c.sq * c.d));
  x.kt.resize(size_t(((c.batches + 1) / 2) * c.d * c.sk));
  x.v.resize(size_t(c.batches * c.sk * c.dv));
  for (float &f : x.q) f = n(rng);
  for (float &f : x.kt) f = n(rng);
  for (float &f : x.v) f = n(rng);
  const float low =
      c.infinite ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::lowest();
  for (int64_t b = 0; b < c.batches; ++b) {
    x.qOff.push_back(b * c.sq * c.d);
    x.kOff.push_back((b / 2) * c.d * c.sk);
    x.vOff.push_back(b * c.sk * c.dv);
  }
  switch (c.mask) {
  case MaskKind::None:
    break;
  case MaskKind::Scalar:
    x.mask = {-0.5f};
    x.mOff.assign(size_t(c.batches), 0);
    break;
  case MaskKind::PerKey: // [batches, 1, sk]; key 0 always visible
    for (int64_t b = 0; b < c.batches; ++b)
      for (int64_t j = 0; j < c.sk; ++j) x.mask.push_back(j > 0 && masked(rng) ? low : n(rng));
    for (int64_t b = 0; b < c.batches; ++b) x.mOff.push_back(b * c.sk);
    x.maskColStride = 1;
    break;
  case MaskKind::Full: // [sq, sk] shared by every problem
    for (int64_t i = 0; i < c.sq; ++i)
      for (int64_t j = 0; j < c.sk; ++j)
        x.mask.push_back(i == c.overflowRow && j == c.sk / 2
                             ? std::numeric_limits<float>::infinity()
                         : i == c.fullyMaskedRow || (j > i && masked(rng)) ? low
                                                                           : 0.5f * n(rng));
    x.mOff.assign(size_t(c.batches), 0);
    x.maskRowStride = c.sk;
    x.maskColStride = 1;
    break;
  }
  return x;
}

std::vector<double> reference(const Case &c, const Data &x, float scale) {
  std::vector<double> out(size_t(c.batches * c.sq * c.dv));
  std::vector<double> s(size_t(c.sk));
  for (int64_t b = 0; b < c.batches; ++b)
    for (int64_t i = 0; i < c.sq; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < c.sk; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < c.d; ++k)
          dot +=
              double(x.q[size_t(x.qOff[b] + i * c.d + k)]) * x.kt[size_t(x.kOff[b] + k * c.sk + j)];
        // The unfused graph rounds the scaled score to f32 before the add.
        double sj = double(float(dot) * scale);
        if (!x.mask.empty())
          sj = double(float(sj) +
                      x.mask[size_t(x.mOff[b] + i * x.maskRowStride + j * x.maskColStride)]);
        s[size_t(j)] = sj;
        mx = std::max(mx, sj);
      }
      double sum = 0;
      for (int64_t j = 0; j < c.sk; ++j) sum += s[size_t(j)] = std::exp(s[size_t(j)] - mx);
      for (int64_t k = 0; k < c.dv; ++k) {
        double acc = 0;
        for (int64_t j = 0; j < c.sk; ++j)
          acc += s[size_t(j)] / sum * x.v[size_t(x.vOff[b] + j * c.dv + k)];
        out[size_t((b * c.sq + i) * c.dv + k)] = acc;
      }
    }
  return out;
}

void check(const Case &c, GemmIsa isa, int threads) {
  const Data x = makeData(c, uint64_t(c.sq * 131 + c.sk * 7 + c.d));
  const float scale = 1.0f / std::sqrt(float(c.d));
  std::vector<float> out(size_t(c.batches * c.sq * c.dv), 123.0f);
  AttentionProblem p;
  p.batches = c.batches, p.sq = c.sq, p.sk = c.sk, p.d = c.d, p.dv = c.dv;
  p.scale = scale;
  p.q = x.q.data(), p.kt = x.kt.data(), p.v = x.v.data();
  p.qOffset = x.qOff.data(), p.ktOffset = x.kOff.data(), p.vOffset = x.vOff.data();
  if (!x.mask.empty()) {
    p.mask = x.mask.data();
    p.maskOffset = x.mOff.data();
    p.maskRowStride = x.maskRowStride, p.maskColStride = x.maskColStride;
  }
  p.out = out.data();
  runtime::ThreadPool pool(threads);
  attention(p, pool, isa);
  const std::vector<double> want = reference(c, x, scale);
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(out[i])) << "element " << i << " should be NaN (fully masked row)";
      continue;
    }
    ASSERT_FALSE(std::isnan(out[i])) << "element " << i;
    num += (out[i] - want[i]) * (out[i] - want[i]);
    den += want[i] * want[i];
  }
  EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), 1e-5)
      << gemmIsaName(isa) << " threads " << threads << " case " << c.batches << "x" << c.sq << "x"
      << c.sk << " d " << c.d << " dv " << c.dv;
}

const std::vector<Case> &cases() {
  static const std::vector<Case> all = {
      {1, 1, 1, 32, 32},
      {3, 17, 9, 32, 32, MaskKind::PerKey},
      {4, 40, 40, 64, 64, MaskKind::Full, true, 5},
      {2, 33, 300, 64, 64, MaskKind::PerKey, false},
      {2, 130, 257, 80, 80, MaskKind::Full, false, 129},
      {6, 7, 129, 80, 48, MaskKind::Scalar},
      {2, 64, 200, 64, 64, MaskKind::Full, true, 63, 10},
      {5, 3, 5, 16, 24},
      {1, 1, 0, 32, 32}, // no keys: an empty sum, zeros
  };
  return all;
}

TEST(AttentionKernel, MatchesTheReferenceOnEveryIsa) {
  for (GemmIsa isa : {GemmIsa::kPortable, GemmIsa::kAvx2, GemmIsa::kAvx512}) {
    if (!gemmIsaSupported(isa)) continue;
    for (const Case &c : cases()) check(c, isa, 1);
  }
}

TEST(AttentionKernel, SplitsWorkOverThreadsWithTheSameResult) {
  for (const Case &c : cases()) check(c, GemmIsa::kAuto, 2);
}

TEST(AttentionKernel, EmptyKeysGiveZeros) {
  const Case c{2, 3, 0, 8, 8};
  const Data x = makeData(c, 1);
  std::vector<float> out(size_t(c.batches * c.sq * c.dv), 7.0f);
  AttentionProblem p;
  p.batches = c.batches, p.sq = c.sq, p.sk = 0, p.d = c.d, p.dv = c.dv;
  p.q = x.q.data(), p.kt = x.kt.data(), p.v = x.v.data();
  p.qOffset = x.qOff.data(), p.ktOffset = x.kOff.data(), p.vOffset = x.vOff.data();
  p.out = out.data();
  runtime::ThreadPool pool(1);
  attention(p, pool);
  for (float f : out) EXPECT_EQ(f, 0.0f);
}

} // namespace
} // namespace kiln::kernels
