// What the ranking writes to the experiment log: dropped targets with their
// reason, and the stop reason on the line that closes a search.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>

#include "hotkernel/optimizer/RankingLog.h"

#include "../JsonKeyCase.h"
#include "../TempDir.h"

namespace hotkernel {
namespace {

SkippedTarget nearRoofline() {
  SkippedTarget s;
  s.target = {"aten::_softmax", "dtype=bfloat16;rows=4096;cols=32000", 8.0, 4.2e8, 0, 105e-6};
  s.reason = TargetStop::NearRoofline;
  s.rooflineSecondsPerCall = 100e-6;
  s.rooflineFraction = 100.0 / 105.0;
  return s;
}

TEST(RankingLogTest, GivenTargetNearRooflineWhenLoggedThenKeptAtenWithReasonAndNumbers) {
  Experiment e = skippedTargetExperiment(nearRoofline(), "fp1");
  EXPECT_EQ(e.decision, ExperimentDecision::KeptAten);
  EXPECT_EQ(e.op, "aten::_softmax");
  EXPECT_EQ(e.variant, "dtype=bfloat16;rows=4096;cols=32000");
  EXPECT_EQ(e.fingerprint, "fp1");
  EXPECT_EQ(e.reason,
            "near_roofline: the ATen kernel runs at 95% of the roofline (105.0 us vs 100.0 us); the ATen kernel stays");
  ASSERT_TRUE(e.timings.atenUs.has_value());
  EXPECT_DOUBLE_EQ(*e.timings.atenUs, 105);
  EXPECT_EQ(e.extra["ranking"]["stop"], "near_roofline");
  EXPECT_DOUBLE_EQ(e.extra["ranking"]["roofline_us"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(e.extra["ranking"]["gpu_seconds"].get<double>(), nearRoofline().target.gpuSeconds);
  // Note [Experiment line versions]: the line's keys, extra's included, are snake_case.
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(e.toJson(), {"/params", "/stages"}), std::vector<std::string>{})
      << e.toJson().dump();
  EXPECT_FALSE(e.candidateId.has_value());
}

TEST(RankingLogTest, GivenTargetWithoutGpuTimeWhenLoggedThenReasonSaysSo) {
  SkippedTarget s = nearRoofline();
  s.reason = TargetStop::NoGpuTime;
  Experiment e = skippedTargetExperiment(s, "fp1");
  EXPECT_EQ(e.reason.rfind("no_gpu_time: ", 0), 0u) << e.reason;
}

TEST(RankingLogTest, GivenSearchStoppedWhenClosingLineWrittenThenStopReasonInReasonAndExtra) {
  Experiment kept;
  kept.decision = ExperimentDecision::KeptAten;
  kept.reason = "no candidate was correct and faster; the ATen kernel stays";
  const nlohmann::json metrics = {{"target", {{"stop", "budget_spent"}, {"budgetSeconds", 30.0}, {"spentSeconds", 31.2}}}};
  addStopReason(kept, metrics);
  EXPECT_EQ(kept.reason, "no candidate was correct and faster; the ATen kernel stays (search stopped: budget_spent)");
  // The metrics' summary (camelCase, as the cache keeps it) in the log's snake_case.
  EXPECT_EQ(kept.extra["target"],
            nlohmann::json({{"stop", "budget_spent"}, {"budget_seconds", 30.0}, {"spent_seconds", 31.2}}));

  Experiment accepted;
  accepted.decision = ExperimentDecision::Accepted;
  accepted.reason = "fastest correct candidate; swapped in";
  addStopReason(accepted, {{"target", {{"stop", "near_roofline"}}}});
  EXPECT_EQ(accepted.reason, "fastest correct candidate; swapped in");  // the reason stays; the stop is in extra
  EXPECT_EQ(accepted.extra["target"]["stop"], "near_roofline");

  Experiment untouched;
  addStopReason(untouched, {{"speedup", 1.2}});  // an unranked search: nothing to add
  EXPECT_FALSE(untouched.extra.contains("target"));
}

TEST(RankingLogTest, GivenSkippedLineWhenAppendedAndReadBackThenHotkernelLogShowsReason) {
  char tmpl[] = "/tmp/hotkernel-rankinglog-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ExperimentLog log(dir);
  ASSERT_TRUE(log.append(skippedTargetExperiment(nearRoofline(), "fp1")));
  ExperimentReadResult r = readExperiments(dir);
  ASSERT_EQ(r.experiments.size(), 1u);
  EXPECT_EQ(r.experiments[0].decision, ExperimentDecision::KeptAten);
  EXPECT_EQ(r.experiments[0].reason.rfind("near_roofline: ", 0), 0u);
  EXPECT_EQ(r.experiments[0].extra["ranking"]["stop"], "near_roofline");
  test::removeTree(dir);  // Note [No std::filesystem::remove_all next to libtorch]
}

TEST(RankingLogTest, GivenRankedTargetWhenSerializedThenRankingNumbers) {
  RankedTarget t;
  t.target = nearRoofline().target;
  t.target.currentSecondsPerCall = 400e-6;
  t.rooflineSecondsPerCall = 100e-6;
  t.rooflineFraction = 0.25;
  t.headroom = 0.75;
  t.expectedSavingSeconds = 6;
  t.budgetSeconds = 59.3;
  nlohmann::json j = rankingJson(t);
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(j), std::vector<std::string>{}) << j.dump();
  EXPECT_DOUBLE_EQ(j["current_us"].get<double>(), 400);
  EXPECT_DOUBLE_EQ(j["roofline_us"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(j["roofline_fraction"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["headroom"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["expected_saving_seconds"].get<double>(), 6);
  EXPECT_DOUBLE_EQ(j["budget_seconds"].get<double>(), 59.3);
}

}  // namespace
}  // namespace hotkernel
