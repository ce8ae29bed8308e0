// Ranking the optimizer's queue from injected measurements (a fake
// TargetMeasurer): order by expected saving, budget shares, skipped targets
// reported with their reason, measurements taken once, failures contained.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/QueueRanker.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

constexpr int32_t kBf16 = static_cast<int32_t>(kernels::DType::BFloat16);

// 4 TB/s. A bf16 softmax of rows x cols moves 4 * rows * cols bytes.
class FakeMeasurer : public TargetMeasurer {
 public:
  MachinePeaks measurePeaks(int device) override {
    ++peakCalls;
    if (failPeaks) HOTKERNEL_THROW("planted: no copy bandwidth");
    return MachinePeaks{device == 1 ? 2e12 : 4e12, 0};
  }
  double measureSecondsPerCall(const std::string& op, const VariantKey& key) override {
    ++timeCalls[kernels::variantString(key)];
    auto it = seconds.find(key.rows);
    if (it == seconds.end()) HOTKERNEL_THROW("planted: cannot time ", op, " rows=", key.rows);
    return it->second;
  }
  std::map<int64_t, double> seconds;  // rows -> seconds per call
  bool failPeaks = false;
  int peakCalls = 0;
  std::map<std::string, int> timeCalls;
};

OptimizerJob job(int64_t rows, int device = 0) {
  return OptimizerJob{"aten::_softmax", VariantKey{kBf16, device, rows, 25000}, std::nullopt};
}

struct Fixture {
  FakeMeasurer measurer;
  std::map<int64_t, double> calls;  // rows -> estimated calls
  std::set<int64_t> decided;  // rows with a decision under the current fingerprint
  std::vector<std::pair<std::string, TargetStop>> skipped;
  QueueRankerHooks hooks() {
    QueueRankerHooks h;
    h.estimatedCalls = [this](const OptimizerJob& j) { return calls[j.key.rows]; };
    h.decided = [this](const OptimizerJob& j) { return decided.count(j.key.rows) > 0; };
    h.onSkipped = [this](const OptimizerJob& j, const SkippedTarget& s) {
      skipped.emplace_back(kernels::variantString(j.key), s.reason);
    };
    return h;
  }
};

RankingOptions options(double budget, double floor) {
  RankingOptions o;
  o.budgetSeconds = budget;
  o.minBudgetSeconds = floor;
  return o;
}

// rows 4000 x 25000 bf16 = 4e8 bytes: roofline 100 us at 4 TB/s.
//   rows 4000: 400 us/call x 20000 calls = 8 s,   headroom 0.75 -> saving 6 s
//   rows 2000: 100 us/call x 50000 calls = 5 s,   roofline 50 us, headroom 0.5 -> saving 2.5 s
//   rows  400: 100 us/call x 10000 calls = 1 s,   roofline 10 us, headroom 0.9 -> saving 0.9 s (10x slow, little time)
TEST(QueueRankerTest, GivenInjectedMeasurementsWhenRankedThenLargestExpectedSavingFirstWithBudgetShares) {
  Fixture f;
  f.measurer.seconds = {{4000, 400e-6}, {2000, 100e-6}, {400, 100e-6}};
  f.calls = {{4000, 20000}, {2000, 50000}, {400, 10000}};
  QueueRanker ranker(f.measurer, options(94, 10), f.hooks());
  QueueRanking r = ranker.rank({job(400), job(4000), job(2000)});  // arrival order: the small one first
  ASSERT_EQ(r.order.queue.size(), 3u);
  EXPECT_TRUE(r.order.dropped.empty());
  EXPECT_EQ(r.order.queue[0].key.rows, 4000);
  EXPECT_EQ(r.order.queue[1].key.rows, 2000);
  EXPECT_EQ(r.order.queue[2].key.rows, 400);
  for (const OptimizerJob& j : r.order.queue) ASSERT_TRUE(j.target.has_value());
  EXPECT_DOUBLE_EQ(r.order.queue[0].target->expectedSavingSeconds, 6.0);
  EXPECT_DOUBLE_EQ(r.order.queue[0].target->target.gpuSeconds, 8.0);
  EXPECT_DOUBLE_EQ(r.order.queue[0].target->target.currentSecondsPerCall, 400e-6);
  EXPECT_DOUBLE_EQ(r.order.queue[0].target->target.bytesPerCall, 4e8);
  EXPECT_DOUBLE_EQ(r.order.queue[0].target->rooflineSecondsPerCall, 100e-6);
  EXPECT_DOUBLE_EQ(r.order.queue[1].target->expectedSavingSeconds, 2.5);
  EXPECT_NEAR(r.order.queue[2].target->expectedSavingSeconds, 0.9, 1e-12);
  // 94 s, floor 10 s: the last gets the floor, the others split 84 s as 6 : 2.5.
  EXPECT_NEAR(r.order.queue[0].target->budgetSeconds, 84.0 * 6 / 8.5, 1e-9);
  EXPECT_NEAR(r.order.queue[1].target->budgetSeconds, 84.0 * 2.5 / 8.5, 1e-9);
  EXPECT_DOUBLE_EQ(r.order.queue[2].target->budgetSeconds, 10.0);
  ASSERT_TRUE(r.peaks.has_value());
  EXPECT_DOUBLE_EQ(r.peaks->copyBytesPerSecond, 4e12);
}

TEST(QueueRankerTest, GivenRepeatedRankingsWhenCallsGrowThenMeasuredOnceAndReordered) {
  Fixture f;
  f.measurer.seconds = {{4000, 400e-6}, {2000, 100e-6}};
  f.calls = {{4000, 20000}, {2000, 50000}};
  QueueRanker ranker(f.measurer, options(100, 10), f.hooks());
  EXPECT_EQ(ranker({job(2000), job(4000)}).queue.front().key.rows, 4000);
  // The small target keeps being called: 2000 rows now has 200000 calls -> 20 s x 0.5 = 10 s > 6 s.
  f.calls[2000] = 200000;
  EXPECT_EQ(ranker({job(2000), job(4000)}).queue.front().key.rows, 2000);
  EXPECT_EQ(f.measurer.peakCalls, 1);  // once per device and process
  for (const auto& [variant, n] : f.measurer.timeCalls) EXPECT_EQ(n, 1) << variant;
}

TEST(QueueRankerTest, GivenTargetsNearRooflineDecidedOrIdleWhenRankedThenDroppedAndReportedWithReason) {
  Fixture f;
  f.measurer.seconds = {{4000, 105e-6}, {2000, 100e-6}, {400, 100e-6}, {800, 100e-6}};
  f.calls = {{4000, 20000}, {2000, 50000}, {400, 0}, {800, 1000}};
  f.decided = {2000};
  QueueRanker ranker(f.measurer, options(100, 10), f.hooks());
  QueueRanking r = ranker.rank({job(4000), job(2000), job(400), job(800)});
  ASSERT_EQ(r.order.queue.size(), 1u);
  EXPECT_EQ(r.order.queue[0].key.rows, 800);
  ASSERT_EQ(r.order.dropped.size(), 3u);
  ASSERT_EQ(f.skipped.size(), 3u);
  std::map<std::string, TargetStop> why(f.skipped.begin(), f.skipped.end());
  EXPECT_EQ(why.at(kernels::variantString(job(4000).key)), TargetStop::NearRoofline);  // 100 / 105 = 95%
  EXPECT_EQ(why.at(kernels::variantString(job(2000).key)), TargetStop::Decided);
  EXPECT_EQ(why.at(kernels::variantString(job(400).key)), TargetStop::NoGpuTime);
  EXPECT_EQ(f.measurer.timeCalls.count(kernels::variantString(job(2000).key)), 0u);  // decided: never timed
  ASSERT_EQ(r.skipped.size(), 3u);
  for (const SkippedTarget& sk : r.skipped) {
    if (sk.reason == TargetStop::NearRoofline) EXPECT_NEAR(sk.rooflineFraction, 100.0 / 105.0, 1e-12);
  }
}

TEST(QueueRankerTest, GivenBudgetForThisPassWhenRankedThenSplitWithTheFloorCappedAtTheBudget) {
  Fixture f;
  f.measurer.seconds = {{4000, 400e-6}, {2000, 100e-6}};
  f.calls = {{4000, 20000}, {2000, 50000}};
  QueueRanker ranker(f.measurer, options(600, 30), f.hooks());
  QueueRanking r = ranker.rank({job(2000), job(4000)}, 85.0);  // 85 s left: 6 : 2.5 -> 60 s and 25 s, floor 30 s
  ASSERT_EQ(r.order.queue.size(), 2u);
  EXPECT_DOUBLE_EQ(r.order.queue[0].target->budgetSeconds, 55);
  EXPECT_DOUBLE_EQ(r.order.queue[1].target->budgetSeconds, 30);
  // 12 s left, below one floor: all of it goes to the top target.
  r = ranker.rank({job(2000), job(4000)}, 12.0);
  EXPECT_DOUBLE_EQ(r.order.queue[0].target->budgetSeconds, 12);
  EXPECT_EQ(r.order.queue[1].target->stop, TargetStop::NoBudget);
  EXPECT_THROW(ranker.rank({job(2000)}, -1.0), Error);
}

TEST(QueueRankerTest, GivenTooSmallBudgetWhenRankedThenTailKeptWithoutBudget) {
  Fixture f;
  f.measurer.seconds = {{4000, 400e-6}, {2000, 100e-6}};
  f.calls = {{4000, 20000}, {2000, 50000}};
  QueueRanker ranker(f.measurer, options(50, 30), f.hooks());
  JobOrder o = ranker({job(2000), job(4000)});
  ASSERT_EQ(o.queue.size(), 2u);
  EXPECT_DOUBLE_EQ(o.queue[0].target->budgetSeconds, 50);
  EXPECT_EQ(o.queue[1].target->stop, TargetStop::NoBudget);
  EXPECT_DOUBLE_EQ(o.queue[1].target->budgetSeconds, 0);
  EXPECT_TRUE(o.dropped.empty());
}

TEST(QueueRankerTest, GivenUntimeableTargetWhenRankedThenKeptAfterRankedOnesWithoutTarget) {
  Fixture f;
  f.measurer.seconds = {{4000, 400e-6}};  // 2000 rows cannot be timed (e.g. over the memory cap)
  f.calls = {{4000, 20000}, {2000, 50000}};
  QueueRanker ranker(f.measurer, options(100, 10), f.hooks());
  OptimizerJob other{"aten::no_such_op", VariantKey{kBf16, 0, 10, 10}, std::nullopt};  // no cost model
  QueueRanking r = ranker.rank({job(2000), other, job(4000)});
  ASSERT_EQ(r.order.queue.size(), 3u);
  EXPECT_EQ(r.order.queue[0].key.rows, 4000);
  EXPECT_TRUE(r.order.queue[0].target.has_value());
  EXPECT_DOUBLE_EQ(r.order.queue[0].target->budgetSeconds, 100);
  EXPECT_EQ(r.order.queue[1].key.rows, 2000);  // arrival order among the unranked
  EXPECT_FALSE(r.order.queue[1].target.has_value());
  EXPECT_EQ(r.order.queue[2].op, "aten::no_such_op");
  EXPECT_EQ(r.unmeasured.size(), 2u);
  // A failed measurement is not retried.
  ranker.rank({job(2000), job(4000)});
  EXPECT_EQ(f.measurer.timeCalls[kernels::variantString(job(2000).key)], 1);
}

TEST(QueueRankerTest, GivenPeaksThatCannotBeMeasuredWhenRankedThenArrivalOrderUnranked) {
  Fixture f;
  f.measurer.failPeaks = true;
  f.measurer.seconds = {{4000, 400e-6}, {2000, 100e-6}};
  f.calls = {{4000, 20000}, {2000, 50000}};
  QueueRanker ranker(f.measurer, options(100, 10), f.hooks());
  JobOrder o = ranker({job(2000), job(4000)});
  ASSERT_EQ(o.queue.size(), 2u);
  EXPECT_EQ(o.queue[0].key.rows, 2000);
  EXPECT_FALSE(o.queue[0].target.has_value());
  EXPECT_TRUE(f.measurer.timeCalls.empty());  // nothing timed without peaks
  ranker({job(2000), job(4000)});
  EXPECT_EQ(f.measurer.peakCalls, 1);
}

TEST(QueueRankerTest, GivenTwoDevicesWhenRankedThenEachAgainstItsOwnPeaksAndOneBudget) {
  Fixture f;
  f.measurer.seconds = {{4000, 400e-6}};
  f.calls = {{4000, 20000}};
  QueueRanker ranker(f.measurer, options(100, 10), f.hooks());
  // Device 1 copies at 2 TB/s: roofline 200 us, headroom 0.5 -> 4 s; device 0: 6 s.
  JobOrder o = ranker({job(4000, 1), job(4000, 0)});
  ASSERT_EQ(o.queue.size(), 2u);
  EXPECT_EQ(o.queue[0].key.device, 0);
  EXPECT_DOUBLE_EQ(o.queue[1].target->expectedSavingSeconds, 4.0);
  EXPECT_NEAR(o.queue[0].target->budgetSeconds + o.queue[1].target->budgetSeconds, 100, 1e-9);
  EXPECT_NEAR(o.queue[0].target->budgetSeconds, 60, 1e-9);
  EXPECT_EQ(f.measurer.peakCalls, 2);
}

TEST(QueueRankerTest, GivenBadOptionsOrNoCallHookWhenConstructedThenError) {
  Fixture f;
  EXPECT_THROW(QueueRanker(f.measurer, options(5, 10), f.hooks()), Error);  // budget below one floor
  EXPECT_THROW(QueueRanker(f.measurer, options(100, 10), QueueRankerHooks{}), Error);
}

}  // namespace
}  // namespace hotkernel
