// Tests of the float16 / bfloat16 conversions (Rounding.h): exact round
// trips of every 16-bit value, ties to even, subnormals, overflow, NaN.

#include "hotkernel/chain/Rounding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace hotkernel::chain {
namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(RoundingTest, GivenEveryFloat16ValueWhenConvertedToFloatAndBackThenTheBitsComeBack) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = halfBitsToFloat(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfBitsToFloat(floatToHalfBits(f)))) << h;
      continue;
    }
    ASSERT_EQ(floatToHalfBits(f), bits) << "float16 bits " << h << " = " << f;
  }
}

TEST(RoundingTest, GivenEveryBFloat16ValueWhenConvertedToFloatAndBackThenTheBitsComeBack) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = bfloat16BitsToFloat(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToBFloat16Bits(f), bits) << h;
  }
}

TEST(RoundingTest, GivenMidpointsBetweenNeighboursWhenRoundedThenTiesGoToTheEvenMantissa) {
  // Every midpoint between two consecutive finite positive float16 values
  // (subnormals included) goes to the one with an even mantissa; a hair
  // above it goes up, a hair below down.
  for (uint16_t h = 0; h < 0x7bffu; ++h) {
    const float lo = halfBitsToFloat(h);
    const float hi = halfBitsToFloat(static_cast<uint16_t>(h + 1));
    const float mid = (lo + hi) / 2;  // exact in float32
    const uint16_t even = (h & 1u) == 0 ? h : static_cast<uint16_t>(h + 1);
    ASSERT_EQ(floatToHalfBits(mid), even) << "between " << lo << " and " << hi;
    ASSERT_EQ(floatToHalfBits(std::nextafter(mid, hi)), h + 1) << lo;
    ASSERT_EQ(floatToHalfBits(std::nextafter(mid, lo)), h) << lo;
    ASSERT_EQ(floatToHalfBits(-mid), even | 0x8000u) << lo;
  }
  // bfloat16: 1 + 2^-8 is the tie between 1 and 1 + 2^-7: to 1 (even);
  // 1 + 3 * 2^-8 is the tie between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(roundTo(DType::BFloat16, 1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(roundTo(DType::BFloat16, 1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(roundTo(DType::BFloat16, std::nextafter(1.0f + 0x1p-8f, 2.0f)), 1.0f + 0x1p-7f);
}

TEST(RoundingTest, GivenOutOfRangeValuesWhenRoundedThenOverflowAndUnderflowAsIeee) {
  EXPECT_EQ(roundTo(DType::Float16, 65504.0f), 65504.0f);
  EXPECT_EQ(roundTo(DType::Float16, std::nextafter(65520.0f, 0.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(roundTo(DType::Float16, 65520.0f)));
  EXPECT_TRUE(std::isinf(roundTo(DType::Float16, -1e6f)));
  EXPECT_LT(roundTo(DType::Float16, -1e6f), 0.0f);
  EXPECT_EQ(roundTo(DType::Float16, 0x1p-24f), 0x1p-24f);   // the smallest subnormal
  EXPECT_EQ(roundTo(DType::Float16, 0x1p-25f), 0.0f);       // its half: a tie, to 0 (even)
  EXPECT_EQ(roundTo(DType::Float16, 0x1.8p-25f), 0x1p-24f);  // above the tie
  EXPECT_TRUE(std::signbit(roundTo(DType::Float16, -0x1p-30f)));
  EXPECT_TRUE(std::isinf(roundTo(DType::BFloat16, std::numeric_limits<float>::max())));
  EXPECT_EQ(roundTo(DType::BFloat16, fromBits(0x00000001u)), 0.0f);  // float32 denormals round as values
}

TEST(RoundingTest, GivenNanAndInfinityWhenRoundedThenTheyStayWhatTheyAre) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (DType d : kernels::kAllDTypes) {
    EXPECT_TRUE(std::isnan(roundTo(d, nan))) << dtypeName(d);
    EXPECT_TRUE(std::isnan(roundTo(d, fromBits(0x7f800001u)))) << dtypeName(d);  // a signalling payload
    EXPECT_EQ(roundTo(d, inf), inf) << dtypeName(d);
    EXPECT_EQ(roundTo(d, -inf), -inf) << dtypeName(d);
    EXPECT_TRUE(representable(d, nan));
  }
  EXPECT_TRUE(representable(DType::BFloat16, 1.5f));
  EXPECT_FALSE(representable(DType::BFloat16, 1.0f + 0x1p-10f));
  EXPECT_TRUE(representable(DType::Float16, 1.0f + 0x1p-10f));
  EXPECT_FALSE(representable(DType::Float16, 1.0f + 0x1p-11f));
}

}  // namespace
}  // namespace hotkernel::chain
