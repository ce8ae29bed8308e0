// The summary hotkernel-warmup writes with --json (Note [Warm-up summary
// format]): version 2, every key snake_case, the ranking's too.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "WarmupSummary.h"
#include "hotkernel/optimizer/RankingLog.h"

#include "../JsonKeyCase.h"

namespace hotkernel::cli {
namespace {

using nlohmann::json;

WarmupSummary summaryOfTwoTargets() {
  WarmupSummary s;
  s.date = "2026-11-30T12:00:00Z";
  s.gpu = "NVIDIA H200";
  s.driver = 13000;
  s.torch = "2.11.0";
  s.hotkernel = "0.1.0";
  s.profile = "a.json + b.json";
  s.budgetSeconds = 600;
  s.budgetReached = true;
  s.targets = 2;
  s.takenByChains = 3;
  s.copyGbPerSecond = 4200.5;
  RankedTarget t;
  t.target.op = "aten::_softmax";
  t.target.variant = "dtype=bfloat16;rows=4096;cols=32000";
  t.target.currentSecondsPerCall = 400e-6;
  t.rooflineSecondsPerCall = 100e-6;
  t.budgetSeconds = 300;
  json ranked = rankingJson(t);  // as WarmupMain.cpp adds it
  ranked["op"] = t.target.op;
  ranked["variant"] = t.target.variant;
  s.ranking.push_back(ranked);
  s.decided = 1;
  s.alreadyCached = 0;
  s.results.push_back({{"op", t.target.op}, {"variant", t.target.variant}, {"decision", "kernel"},
                       {"speedup", 1.3}, {"stop", "no_improvement"}});
  s.results.push_back({{"op", "aten::_softmax"}, {"variant", "dtype=float32;rows=8;cols=128"},
                       {"decision", "keep_aten"}, {"stop", "near_roofline"}, {"reason", "near_roofline: ..."}});
  return s;
}

TEST(WarmupSummaryTest, GivenASummaryWhenWrittenThenVersion2WithEveryKeySnakeCase) {
  const json j = summaryOfTwoTargets().toJson();
  EXPECT_EQ(j["format"], "hotkernel-warmup");
  EXPECT_EQ(j["version"], 2);
  // No object of the summary is a map of data.
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(j), std::vector<std::string>{}) << j.dump(2);
  EXPECT_DOUBLE_EQ(j["budget_seconds"].get<double>(), 600);
  EXPECT_EQ(j["budget_reached"], true);
  EXPECT_DOUBLE_EQ(j["copy_gbs"].get<double>(), 4200.5);
  EXPECT_EQ(j["already_cached"], 0);
  EXPECT_EQ(j["taken_by_chains"], 3);
  EXPECT_EQ(j["decided"], 1);
  ASSERT_EQ(j["ranking"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["ranking"][0]["current_us"].get<double>(), 400);
  EXPECT_DOUBLE_EQ(j["ranking"][0]["budget_seconds"].get<double>(), 300);
  EXPECT_EQ(j["results"][1]["decision"], "keep_aten");
}

TEST(WarmupSummaryTest, GivenACamelCaseKeyInTheSummaryWhenCheckedThenTheCheckNamesIt) {
  // The check above would see a key the summary's writer let through in camelCase.
  json j = summaryOfTwoTargets().toJson();
  j["ranking"][0]["budgetSeconds"] = 300;
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(j), std::vector<std::string>{"/ranking/*/budgetSeconds"});
}

}  // namespace
}  // namespace hotkernel::cli
