// Amdahl ranking: roofline, headroom, expected saving, budget split and stop
// rules, checked against numbers computed by hand.

#include <gtest/gtest.h>

#include <numeric>

#include "hotkernel/optimizer/Ranking.h"
#include "hotkernel/optimizer/TargetBudget.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

// 4 TB/s copy bandwidth, 1 PFLOP/s.
const MachinePeaks kPeaks{4e12, 1e15};

TargetProfile target(std::string variant, double gpuSeconds, double bytes, double flops, double current) {
  return {"aten::_softmax", std::move(variant), gpuSeconds, bytes, flops, current};
}

TEST(RankingTest, GivenMemoryBoundCallWhenRooflineThenBytesOverBandwidth) {
  // 4e8 bytes / 4e12 B/s = 100 us; 1e9 flops / 1e15 = 1 us.
  EXPECT_DOUBLE_EQ(rooflineSeconds(4e8, 1e9, kPeaks), 100e-6);
}

TEST(RankingTest, GivenComputeBoundCallWhenRooflineThenFlopsOverPeak) {
  // 2e12 flops / 1e15 = 2 ms; 4e8 bytes = 100 us.
  EXPECT_DOUBLE_EQ(rooflineSeconds(4e8, 2e12, kPeaks), 2e-3);
}

TEST(RankingTest, GivenCurrentTimeWhenHeadroomThenOneMinusRooflineOverCurrent) {
  // Roofline 100 us, current 400 us: headroom 0.75; 8 s of GPU time: saving 6 s.
  TargetProfile t = target("a", 8.0, 4e8, 0, 400e-6);
  EXPECT_DOUBLE_EQ(headroom(t, kPeaks), 0.75);
  EXPECT_DOUBLE_EQ(expectedSavingSeconds(t, kPeaks), 6.0);
  // Roofline 2 ms, current 2.5 ms: headroom 0.2; 10 s: saving 2 s.
  TargetProfile c = target("c", 10.0, 4e8, 2e12, 2.5e-3);
  EXPECT_DOUBLE_EQ(headroom(c, kPeaks), 0.2);
  EXPECT_DOUBLE_EQ(expectedSavingSeconds(c, kPeaks), 2.0);
}

TEST(RankingTest, GivenCurrentFasterThanRooflineWhenHeadroomThenZeroNotNegative) {
  TargetProfile t = target("a", 8.0, 4e8, 0, 90e-6);  // below the 100 us roofline: noise or a low peak
  EXPECT_DOUBLE_EQ(headroom(t, kPeaks), 0.0);
  EXPECT_DOUBLE_EQ(expectedSavingSeconds(t, kPeaks), 0.0);
}

TEST(RankingTest, GivenInvalidNumbersWhenRooflineThenError) {
  EXPECT_THROW(rooflineSeconds(1e6, 0, MachinePeaks{0, 0}), Error);       // bandwidth not measured
  EXPECT_THROW(rooflineSeconds(1e6, 1e9, MachinePeaks{4e12, 0}), Error);  // flops without a FLOP/s peak
  EXPECT_THROW(rooflineSeconds(-1, 0, kPeaks), Error);
  EXPECT_THROW(headroom(target("a", 1, 1e6, 0, 0), kPeaks), Error);  // current time 0
  EXPECT_THROW(expectedSavingSeconds(target("a", -1, 1e6, 0, 1e-3), kPeaks), Error);
  EXPECT_NO_THROW(rooflineSeconds(1e6, 0, MachinePeaks{4e12, 0}));  // memory-bound op, no FLOP/s peak
}

TEST(RankingTest, GivenTargetsWhenRankedThenLargestExpectedSavingFirstNotSlowestFirst) {
  // big:  roofline 100 us, current 400 us, 8 s   -> headroom 0.75, saving 6 s
  // slow: roofline 10 us,  current 100 us, 1 s   -> headroom 0.9,  saving 0.9 s (10x slow, little time)
  // mid:  roofline 100 us, current 200 us, 5 s   -> headroom 0.5,  saving 2.5 s
  std::vector<TargetProfile> targets = {target("slow", 1.0, 4e7, 0, 100e-6), target("big", 8.0, 4e8, 0, 400e-6),
                                        target("mid", 5.0, 4e8, 0, 200e-6)};
  RankingOptions options;
  options.budgetSeconds = 94;
  options.minBudgetSeconds = 10;
  Ranking r = rank(targets, kPeaks, {}, "fp1", options);
  ASSERT_EQ(r.ranked.size(), 3u);
  EXPECT_TRUE(r.skipped.empty());
  EXPECT_EQ(r.ranked[0].target.variant, "big");
  EXPECT_EQ(r.ranked[1].target.variant, "mid");
  EXPECT_EQ(r.ranked[2].target.variant, "slow");
  EXPECT_DOUBLE_EQ(r.ranked[0].expectedSavingSeconds, 6.0);
  EXPECT_DOUBLE_EQ(r.ranked[1].expectedSavingSeconds, 2.5);
  EXPECT_NEAR(r.ranked[2].expectedSavingSeconds, 0.9, 1e-12);
  EXPECT_DOUBLE_EQ(r.ranked[0].rooflineFraction, 0.25);
  EXPECT_DOUBLE_EQ(r.ranked[0].rooflineSecondsPerCall, 100e-6);
  // Budget 94 s, floor 10 s: slow's share 94 * 0.9 / 9.4 = 9 s < 10 s, so it gets the floor and
  // the other 84 s split 6 : 2.5 -> 59.29 s and 24.71 s.
  EXPECT_DOUBLE_EQ(r.ranked[2].budgetSeconds, 10.0);
  EXPECT_NEAR(r.ranked[0].budgetSeconds, 84.0 * 6.0 / 8.5, 1e-9);
  EXPECT_NEAR(r.ranked[1].budgetSeconds, 84.0 * 2.5 / 8.5, 1e-9);
  for (const RankedTarget& t : r.ranked) EXPECT_EQ(t.stop, TargetStop::None);
}

TEST(RankingTest, GivenSavingsWhenBudgetAllocatedThenProportionalAboveFloorAndSumsToBudget) {
  // 6 : 3 : 1 of 100 s with no floor that binds.
  std::vector<double> shares = allocateBudget({6, 3, 1}, 100, 5);
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_DOUBLE_EQ(shares[0], 60);
  EXPECT_DOUBLE_EQ(shares[1], 30);
  EXPECT_DOUBLE_EQ(shares[2], 10);
  // Floor 20: the last gets 20, then 80 split 6 : 3 = 53.33, 26.67 (both >= 20).
  shares = allocateBudget({6, 3, 1}, 100, 20);
  EXPECT_NEAR(shares[0], 80.0 * 6 / 9, 1e-9);
  EXPECT_NEAR(shares[1], 80.0 * 3 / 9, 1e-9);
  EXPECT_DOUBLE_EQ(shares[2], 20);
  // Floor 30: two targets at the floor (cascade), the first gets the remaining 40.
  shares = allocateBudget({6, 3, 1}, 100, 30);
  EXPECT_DOUBLE_EQ(shares[0], 40);
  EXPECT_DOUBLE_EQ(shares[1], 30);
  EXPECT_DOUBLE_EQ(shares[2], 30);
  for (double floor : {0.0, 5.0, 20.0, 30.0, 33.0}) {
    shares = allocateBudget({6, 3, 1}, 100, floor);
    EXPECT_NEAR(std::accumulate(shares.begin(), shares.end(), 0.0), 100.0, 1e-9) << "floor " << floor;
    for (double s : shares) EXPECT_GE(s, floor - 1e-9) << "floor " << floor;
  }
}

TEST(RankingTest, GivenBudgetBelowFloorsWhenAllocatedThenLowestRankedGetNothing) {
  // Budget 100 s, floor 40 s: only two targets can be served; they split 100 s as 60 / 40.
  std::vector<double> shares = allocateBudget({6, 3, 1}, 100, 40);
  EXPECT_DOUBLE_EQ(shares[0], 60);
  EXPECT_DOUBLE_EQ(shares[1], 40);
  EXPECT_DOUBLE_EQ(shares[2], 0);
  // Exactly three floors fit.
  shares = allocateBudget({6, 3, 1}, 30, 10);
  EXPECT_DOUBLE_EQ(shares[0], 10);
  EXPECT_DOUBLE_EQ(shares[1], 10);
  EXPECT_DOUBLE_EQ(shares[2], 10);
  // Nothing fits.
  shares = allocateBudget({6, 3, 1}, 5, 10);
  EXPECT_EQ(shares, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(allocateBudget({6}, 0, 10), (std::vector<double>{0}));
  EXPECT_TRUE(allocateBudget({}, 100, 10).empty());
}

TEST(RankingTest, GivenUnsortedOrZeroSavingsWhenAllocatedThenError) {
  EXPECT_THROW(allocateBudget({1, 2}, 100, 1), Error);
  EXPECT_THROW(allocateBudget({2, 0}, 100, 1), Error);
  EXPECT_THROW(allocateBudget({2, 1}, -1, 1), Error);
}

TEST(RankingTest, GivenRankingWithTooSmallBudgetThenTailMarkedNoBudget) {
  std::vector<TargetProfile> targets = {target("big", 8.0, 4e8, 0, 400e-6), target("mid", 5.0, 4e8, 0, 200e-6)};
  RankingOptions options;
  options.budgetSeconds = 50;
  options.minBudgetSeconds = 30;
  Ranking r = rank(targets, kPeaks, {}, "fp1", options);
  ASSERT_EQ(r.ranked.size(), 2u);
  EXPECT_DOUBLE_EQ(r.ranked[0].budgetSeconds, 50);
  EXPECT_EQ(r.ranked[0].stop, TargetStop::None);
  EXPECT_DOUBLE_EQ(r.ranked[1].budgetSeconds, 0);
  EXPECT_EQ(r.ranked[1].stop, TargetStop::NoBudget);
  EXPECT_EQ(stopRule(r.ranked[1], TargetProgress{}, options), TargetStop::BudgetSpent);
}

TEST(RankingTest, GivenDecisionUnderCurrentFingerprintWhenRankedThenSkippedUntilFingerprintChanges) {
  std::vector<TargetProfile> targets = {target("big", 8.0, 4e8, 0, 400e-6), target("mid", 5.0, 4e8, 0, 200e-6)};
  std::vector<TargetDecision> decisions = {{"aten::_softmax", "big", "fp1", TargetOutcome::KeptAten}};
  Ranking same = rank(targets, kPeaks, decisions, "fp1");
  ASSERT_EQ(same.ranked.size(), 1u);
  EXPECT_EQ(same.ranked[0].target.variant, "mid");
  ASSERT_EQ(same.skipped.size(), 1u);
  EXPECT_EQ(same.skipped[0].target.variant, "big");
  EXPECT_EQ(same.skipped[0].reason, TargetStop::Decided);

  Ranking changed = rank(targets, kPeaks, decisions, "fp2");  // new driver, torch, GPU ...
  ASSERT_EQ(changed.ranked.size(), 2u);
  EXPECT_EQ(changed.ranked[0].target.variant, "big");
  EXPECT_TRUE(changed.skipped.empty());
}

TEST(RankingTest, GivenTargetNearRooflineOrWithoutTimeWhenRankedThenSkippedWithReason) {
  std::vector<TargetProfile> targets = {target("near", 8.0, 4e8, 0, 105e-6),  // 100 / 105 = 95% of roofline
                                        target("idle", 0.0, 4e8, 0, 400e-6),  // no recorded GPU time
                                        target("big", 8.0, 4e8, 0, 400e-6)};
  Ranking r = rank(targets, kPeaks, {}, "fp1");
  ASSERT_EQ(r.ranked.size(), 1u);
  EXPECT_EQ(r.ranked[0].target.variant, "big");
  ASSERT_EQ(r.skipped.size(), 2u);
  EXPECT_EQ(r.skipped[0].target.variant, "near");
  EXPECT_EQ(r.skipped[0].reason, TargetStop::NearRoofline);
  EXPECT_EQ(r.skipped[1].target.variant, "idle");
  EXPECT_EQ(r.skipped[1].reason, TargetStop::NoGpuTime);
  EXPECT_STREQ(toString(TargetStop::NearRoofline), "near_roofline");
}

TEST(RankingTest, GivenATenAt93PercentOfTheCopyRooflineWhenRankedByDefaultThenItIsRankedNotSkipped) {
  // A read-only reduction whose ATen kernel runs at 93% of the copy's bandwidth (Note [Done near the
  // roofline]): its reads can go faster than a copy's, so it is worth a search.
  std::vector<TargetProfile> targets = {target("aten93", 8.0, 4e8, 0, 100e-6 / 0.93)};
  Ranking r = rank(targets, kPeaks, {}, "fp1");
  ASSERT_EQ(r.ranked.size(), 1u);
  EXPECT_TRUE(r.skipped.empty());
  EXPECT_NEAR(r.ranked[0].rooflineFraction, 0.93, 1e-12);
  EXPECT_DOUBLE_EQ(RankingOptions{}.doneRooflineFraction, TargetBudget{}.doneRooflineFraction);
}

TEST(RankingTest, GivenEqualSavingsWhenRankedThenOrderIsByOpThenVariant) {
  std::vector<TargetProfile> targets = {target("b", 8.0, 4e8, 0, 400e-6), target("a", 8.0, 4e8, 0, 400e-6)};
  Ranking r = rank(targets, kPeaks, {}, "fp1");
  ASSERT_EQ(r.ranked.size(), 2u);
  EXPECT_EQ(r.ranked[0].target.variant, "a");
  EXPECT_EQ(r.ranked[1].target.variant, "b");
}

TEST(RankingTest, GivenDuplicateTargetOrBadOptionsWhenRankedThenError) {
  std::vector<TargetProfile> twice = {target("a", 8.0, 4e8, 0, 400e-6), target("a", 1.0, 4e8, 0, 400e-6)};
  EXPECT_THROW(rank(twice, kPeaks, {}, "fp1"), Error);
  RankingOptions bad;
  bad.doneRooflineFraction = 1.5;
  EXPECT_THROW(rank({}, kPeaks, {}, "fp1", bad), Error);
}

TEST(RankingTest, GivenProgressWhenStopRuleThenRooflineBudgetAndStallInOrder) {
  RankedTarget t;
  t.rooflineSecondsPerCall = 100e-6;
  t.budgetSeconds = 60;
  RankingOptions options;
  options.maxRoundsWithoutImprovement = 3;

  EXPECT_EQ(stopRule(t, TargetProgress{0, 0, 0}, options), TargetStop::None);                // nothing found yet
  EXPECT_EQ(stopRule(t, TargetProgress{120e-6, 2, 30}, options), TargetStop::None);          // 83% of roofline
  EXPECT_EQ(stopRule(t, TargetProgress{111e-6, 0, 10}, options), TargetStop::None);          // 90.09%: < 95%
  EXPECT_EQ(stopRule(t, TargetProgress{105e-6, 0, 10}, options), TargetStop::NearRoofline);  // 95.24%
  EXPECT_EQ(stopRule(t, TargetProgress{120e-6, 0, 60}, options), TargetStop::BudgetSpent);
  EXPECT_EQ(stopRule(t, TargetProgress{120e-6, 3, 30}, options), TargetStop::NoImprovement);
  // Reaching the roofline wins over the other rules.
  EXPECT_EQ(stopRule(t, TargetProgress{100e-6, 5, 90}, options), TargetStop::NearRoofline);
}

}  // namespace
}  // namespace hotkernel
