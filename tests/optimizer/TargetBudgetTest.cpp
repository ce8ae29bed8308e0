// A target's stop rules while its search runs: budget with waits excluded,
// near-roofline cost, rounds without improvement, the summary logged.

#include <gtest/gtest.h>

#include "hotkernel/optimizer/TargetBudget.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

// A clock the test moves by hand.
struct FakeTime {
  double now = 100.0;
  TargetClock::Now fn() {
    return [this] { return now; };
  }
};

TargetBudget budget(double seconds, double rooflineSeconds) {
  TargetBudget b;
  b.budgetSeconds = seconds;
  b.rooflineSecondsPerCall = rooflineSeconds;
  b.maxRoundsWithoutImprovement = 3;
  return b;
}

TEST(TargetBudgetTest, GivenRankedTargetWhenBudgetDerivedThenShareRooflineAndOptionsCarried) {
  RankedTarget t;
  t.budgetSeconds = 42;
  t.rooflineSecondsPerCall = 100e-6;
  RankingOptions o;
  o.doneRooflineFraction = 0.8;
  o.maxRoundsWithoutImprovement = 5;
  TargetBudget b = TargetBudget::from(t, o);
  EXPECT_DOUBLE_EQ(b.budgetSeconds, 42);
  EXPECT_DOUBLE_EQ(b.rooflineSecondsPerCall, 100e-6);
  EXPECT_DOUBLE_EQ(b.doneRooflineFraction, 0.8);
  EXPECT_EQ(b.maxRoundsWithoutImprovement, 5);
  EXPECT_TRUE(b.limited());
  EXPECT_FALSE(TargetBudget{}.limited());
}

TEST(TargetBudgetTest, GivenTimeWaitingInYieldPointWhenSpentThenWaitsAreNotCharged) {
  FakeTime time;
  TargetClock clock(budget(10, 0), time.fn());
  auto yield = clock.wrapYield([&time] {
    time.now += 7;  // waits 7 s for the GPU to go idle
    return true;
  });
  time.now += 2;  // 2 s of work
  EXPECT_TRUE(yield());
  time.now += 3;  // 3 s of work
  EXPECT_DOUBLE_EQ(clock.spentSeconds(), 5);
  EXPECT_DOUBLE_EQ(clock.waitedSeconds(), 7);
  EXPECT_FALSE(clock.budgetSpent());
  time.now += 5;
  EXPECT_TRUE(clock.budgetSpent());
  EXPECT_EQ(clock.stop(0, 0), TargetStop::BudgetSpent);
  // No yield point: nothing to wrap.
  EXPECT_FALSE(static_cast<bool>(clock.wrapYield({})));
}

TEST(TargetBudgetTest, GivenYieldPointThatRefusesWhenWrappedThenRefusalPassesThrough) {
  FakeTime time;
  TargetClock clock(budget(10, 0), time.fn());
  auto yield = clock.wrapYield([] { return false; });
  EXPECT_FALSE(yield());
}

TEST(TargetBudgetTest, GivenRooflineWhenAppliedToSearchThenGoodEnoughIsRooflineOverFractionInMicroseconds) {
  FakeTime time;
  TargetClock clock(budget(10, 90e-6), time.fn());
  EXPECT_DOUBLE_EQ(clock.goodEnoughUs(), 90.0 / 0.95);  // 90 us / 0.95 (Note [Done near the roofline])
  SearchOptions so;
  so.maxRoundsWithoutImprovement = 8;
  clock.applyTo(so);
  EXPECT_DOUBLE_EQ(so.goodEnoughCost, 90.0 / 0.95);
  EXPECT_EQ(so.maxRoundsWithoutImprovement, 3);
  ASSERT_TRUE(static_cast<bool>(so.outOfTime));
  EXPECT_FALSE(so.outOfTime());
  time.now += 10;
  EXPECT_TRUE(so.outOfTime());

  // An unranked target changes nothing but what it has.
  TargetClock free(TargetBudget{}, time.fn());
  SearchOptions untouched;
  untouched.maxRoundsWithoutImprovement = 8;
  free.applyTo(untouched);
  EXPECT_DOUBLE_EQ(untouched.goodEnoughCost, 0);
  EXPECT_FALSE(static_cast<bool>(untouched.outOfTime));
  EXPECT_EQ(untouched.maxRoundsWithoutImprovement, 8);
  EXPECT_EQ(free.stop(1e9, 100), TargetStop::None);
}

TEST(TargetBudgetTest, GivenBestTimesWhenStopAskedThenRooflineThenBudgetThenStallInOrder) {
  FakeTime time;
  TargetClock clock(budget(10, 90e-6), time.fn());
  EXPECT_EQ(clock.stop(0, 0), TargetStop::None);            // nothing found yet
  EXPECT_EQ(clock.stop(120, 2), TargetStop::None);          // 75% of the roofline
  EXPECT_EQ(clock.stop(99.9, 0), TargetStop::None);          // 90.09%: < 95%
  EXPECT_EQ(clock.stop(94.5, 0), TargetStop::NearRoofline);  // 95.24%
  EXPECT_EQ(clock.stop(120, 3), TargetStop::NoImprovement);
  time.now += 11;
  EXPECT_EQ(clock.stop(120, 3), TargetStop::BudgetSpent);
  EXPECT_EQ(clock.stop(94, 3), TargetStop::NearRoofline);  // reaching the roofline wins
}

TEST(TargetBudgetTest, GivenSearchStopsWhenMappedThenTargetStopReasons) {
  EXPECT_EQ(targetStopOf(SearchStop::GoodEnough), TargetStop::NearRoofline);
  EXPECT_EQ(targetStopOf(SearchStop::OutOfTime), TargetStop::BudgetSpent);
  EXPECT_EQ(targetStopOf(SearchStop::NoImprovement), TargetStop::NoImprovement);
  EXPECT_EQ(targetStopOf(SearchStop::EvaluationBudget), TargetStop::None);
  EXPECT_EQ(targetStopOf(SearchStop::Exhausted), TargetStop::None);
}

TEST(TargetBudgetTest, GivenFinishedSearchWhenSummarizedThenBudgetSpentRooflineBestAndStop) {
  FakeTime time;
  TargetClock clock(budget(10, 90e-6), time.fn());
  time.now += 4;
  nlohmann::json s = clock.summary(120, TargetStop::NoImprovement);
  EXPECT_DOUBLE_EQ(s.at("budgetSeconds").get<double>(), 10);
  EXPECT_DOUBLE_EQ(s.at("spentSeconds").get<double>(), 4);
  EXPECT_DOUBLE_EQ(s.at("rooflineUs").get<double>(), 90);
  EXPECT_DOUBLE_EQ(s.at("bestUs").get<double>(), 120);
  EXPECT_DOUBLE_EQ(s.at("rooflineFraction").get<double>(), 0.75);
  EXPECT_EQ(s.at("stop").get<std::string>(), "no_improvement");
  EXPECT_FALSE(TargetClock(TargetBudget{}, time.fn()).summary(0, TargetStop::None).contains("rooflineUs"));
}

TEST(TargetBudgetTest, GivenInvalidBudgetWhenClockMadeThenError) {
  TargetBudget b;
  b.budgetSeconds = -1;
  EXPECT_THROW(TargetClock{b}, Error);
  b = TargetBudget{};
  b.doneRooflineFraction = 0;
  EXPECT_THROW(TargetClock{b}, Error);
  FakeTime time;
  EXPECT_THROW(TargetClock(TargetBudget{}, time.fn()).stop(-1, 0), Error);
}

}  // namespace
}  // namespace hotkernel
