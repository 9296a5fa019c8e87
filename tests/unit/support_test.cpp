// Tests of the support layer: 16-bit float conversions and .npy I/O.
#include "support/half.h"
#include "support/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln {
namespace {

TEST(Half, ConvertsEveryHalfValueToFloatAndBackExactly) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = Half::toFloat(static_cast<uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Half::toFloat(Half::fromFloat(f))));
      continue;
    }
    EXPECT_EQ(Half::fromFloat(f), bits) << "bits " << bits;
  }
}

TEST(Half, RoundsToNearestEvenAndSaturatesToInfinity) {
  EXPECT_EQ(Half::fromFloat(1.0f + 1.0f / 2048), 0x3c00); // halfway: ties to even (down)
  EXPECT_EQ(Half::fromFloat(1.0f + 3.0f / 2048), 0x3c02); // halfway: ties to even (up)
  EXPECT_EQ(Half::fromFloat(65504.0f), 0x7bff);
  EXPECT_EQ(Half::fromFloat(65520.0f), 0x7c00);
  EXPECT_EQ(Half::fromFloat(-1e10f), 0xfc00);
  EXPECT_EQ(Half::fromFloat(5.96046448e-8f), 0x0001); // smallest subnormal
  EXPECT_EQ(Half::fromFloat(2.0e-8f), 0x0000);        // below half of it: zero
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(BFloat16::fromFloat(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16::fromFloat(bitsToFloat(0x3f808000)), 0x3f80); // tie, even stays
  EXPECT_EQ(BFloat16::fromFloat(bitsToFloat(0x3f818000)), 0x3f82); // tie, odd rounds up
  EXPECT_TRUE(std::isnan(float(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Npy, RoundTripsEveryNumericDType) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::I8, DType::U8, DType::I16,
                  DType::U16, DType::I32, DType::U32, DType::I64, DType::U64, DType::Bool}) {
    Tensor t(d, {2, 3});
    for (int64_t i = 0; i < t.numel(); ++i) t.setInt(i, (i * 7) % 2 == 0 ? i % 2 : i);
    auto back = parseNpy(serializeNpy(t), "t.npy");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_TRUE(back->identical(t)) << dtypeName(d);
  }
}

TEST(Npy, ScalarsAndEmptyTensorsRoundTrip) {
  auto s = parseNpy(serializeNpy(Tensor::scalar<int64_t>(16000)), "s.npy");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank(), 0);
  EXPECT_EQ(s->data<int64_t>()[0], 16000);
  auto e = parseNpy(serializeNpy(Tensor(DType::F32, {0, 4})), "e.npy");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->shape(), (Shape64{0, 4}));
}

TEST(Npy, TruncatedOrCorruptFilesNameTheFileAndProblem) {
  std::string good = serializeNpy(Tensor(DType::F32, {16}));
  for (size_t cut = 0; cut < good.size(); ++cut) {
    auto r = parseNpy(good.substr(0, cut), "x.npy");
    ASSERT_FALSE(r.ok()) << "cut at " << cut;
    EXPECT_EQ(r.error().message.rfind("x.npy: ", 0), 0u) << r.error().message;
  }
  std::string badDtype = good;
  badDtype.replace(badDtype.find("<f4"), 3, "<c8");
  auto r = parseNpy(badDtype, "x.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unsupported dtype '<c8'"), std::string::npos);
}

TEST(Npy, HugeClaimedShapeIsRejectedBeforeAllocating) {
  std::string good = serializeNpy(Tensor(DType::F32, {4}));
  good.replace(good.find("(4,)"), 4, "(99999999999,)");
  good.erase(good.find('\n') - 10, 10); // keep the header length the same
  auto r = parseNpy(good, "big.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("truncated data"), std::string::npos);
}

} // namespace
} // namespace kiln
