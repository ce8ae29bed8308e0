#include <gtest/gtest.h>

#include <random>

#include "hotkernel/optimizer/Statistics.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

TEST(StatisticsTest, GivenOddAndEvenSamplesWhenMedianThenMiddle) {
  EXPECT_DOUBLE_EQ(medianWithCi({3, 1, 2}).median, 2);
  EXPECT_DOUBLE_EQ(medianWithCi({4, 1, 3, 2}).median, 2.5);
}

TEST(StatisticsTest, GivenManySamplesWhenCiThenBracketsMedianAndNarrowsWithN) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<double> noise(100.0, 5.0);
  std::vector<double> small, large;
  for (int i = 0; i < 15; ++i) small.push_back(noise(rng));
  for (int i = 0; i < 1001; ++i) large.push_back(noise(rng));
  MedianCi s = medianWithCi(small), l = medianWithCi(large);
  EXPECT_LE(s.low, s.median);
  EXPECT_GE(s.high, s.median);
  EXPECT_LT(l.high - l.low, s.high - s.low);
  EXPECT_NEAR(l.median, 100.0, 1.5);
}

TEST(StatisticsTest, GivenCandidateTwiceAsFastWhenComparedThenSpeedupTwoAndClears) {
  std::vector<double> a, b;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.97, 1.03);
  for (int i = 0; i < 31; ++i) {
    a.push_back(200.0 * jitter(rng));
    b.push_back(100.0 * jitter(rng));
  }
  Comparison c = compareSamples(a, b);
  EXPECT_NEAR(c.speedup.median, 2.0, 0.1);
  EXPECT_TRUE(c.clears(1.5));
  EXPECT_FALSE(c.clears(2.5));
}

TEST(StatisticsTest, GivenEqualTimesWithNoiseWhenComparedThenDoesNotClearThreshold) {
  std::vector<double> a, b;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> t(90.0, 110.0);
  for (int i = 0; i < 31; ++i) {
    a.push_back(t(rng));
    b.push_back(t(rng));
  }
  EXPECT_FALSE(compareSamples(a, b).clears(1.05));
}

TEST(StatisticsTest, GivenBadSamplesWhenComparedThenError) {
  EXPECT_THROW(compareSamples({}, {}), Error);
  EXPECT_THROW(compareSamples({1, 2}, {1}), Error);
  EXPECT_THROW(compareSamples({1, 0}, {1, 1}), Error);
  EXPECT_THROW(medianWithCi({}), Error);
}

}  // namespace
}  // namespace hotkernel
