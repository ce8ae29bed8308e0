// The engine's status document (interpose/engine/StatusDocument.h, Note [Status document, version 2]): its format
// and version, snake_case keys except the data maps and the cache's stored metrics, the fusion counters.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "../JsonKeyCase.h"
#include "StatusDocument.h"
#include "hotkernel/interpose/Engine.h"

namespace hotkernel::engine {
namespace {

// The document's maps of data and its embedded stored values (Note [Status document, version 2]).
const std::set<std::string> kDataMaps = {"/fingerprints", "/fusion/patterns", "/tuned/*/metrics"};

TEST(StatusDocumentTest, GivenFusionCountersWhenTheFusionObjectIsBuiltThenEachCounterIsUnderItsSnakeCaseKey) {
  fusion::FusionStats stats;
  stats.deferredCalls = 11;
  stats.fusedFlushes = 12;
  stats.unfusedFlushes = 13;
  stats.failedFlushes = 14;
  stats.windows = 15;
  stats.hotChains = 16;
  stats.readyChains = 17;
  stats.hookGaveUp = 18;
  stats.passedCalls = 19;
  stats.retiredChains = 20;
  stats.idleStarts = 21;
  stats.covered = true;
  stats.lastUnfused = "value %1 is still referenced elsewhere";
  // A pattern key is data (the learner's text of a chain); the pattern's own keys are the format's.
  const nlohmann::json patterns = {{"aten::mul.Tensor(%0,%1)->%2", {{"seen", 3}, {"calls", 1}, {"reported", false},
                                                                     {"refusal", "one call"}, {"segments", nlohmann::json::array()}}}};

  const nlohmann::json fusion = fusionStatusDocument(true, stats, patterns);

  EXPECT_EQ(fusion["on"], true);
  EXPECT_EQ(fusion["covered"], true);
  EXPECT_EQ(fusion["deferred_calls"], stats.deferredCalls);
  EXPECT_EQ(fusion["fused_flushes"], stats.fusedFlushes);
  EXPECT_EQ(fusion["unfused_flushes"], stats.unfusedFlushes);
  EXPECT_EQ(fusion["failed_flushes"], stats.failedFlushes);
  EXPECT_EQ(fusion["windows"], stats.windows);
  EXPECT_EQ(fusion["hot_chains"], stats.hotChains);
  EXPECT_EQ(fusion["ready_chains"], stats.readyChains);
  EXPECT_EQ(fusion["hook_gave_up"], stats.hookGaveUp);
  EXPECT_EQ(fusion["passed_calls"], stats.passedCalls);
  EXPECT_EQ(fusion["retired_chains"], stats.retiredChains);
  EXPECT_EQ(fusion["idle_starts"], stats.idleStarts);
  EXPECT_EQ(fusion["last_unfused"], stats.lastUnfused);
  EXPECT_EQ(fusion["patterns"], patterns);
  EXPECT_EQ(fusion.size(), 15u) << fusion.dump();
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(fusion, {}), std::vector<std::string>{"/patterns/aten::mul.Tensor(%0,%1)->%2"})
      << "only the pattern key is not snake_case";
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys({{"fusion", fusion}}, kDataMaps), std::vector<std::string>{}) << fusion.dump();
}

TEST(StatusDocumentTest, GivenTheEngineWhenItsStatusIsAskedThenItIsVersion2WithSnakeCaseKeys) {
  const nlohmann::json status = Engine::instance().status();

  EXPECT_EQ(status["format"], "hotkernel-status");
  EXPECT_EQ(status["version"], 2);
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(status, kDataMaps), std::vector<std::string>{}) << status.dump();
  std::set<std::string> keys;
  for (const auto& [key, value] : status.items()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"format", "version", "started", "enabled", "fingerprint", "fingerprints",
                                         "optimizer", "forked_child", "cache", "plans", "hits", "misses", "tuned",
                                         "profile", "fusion"}))
      << status.dump();
  EXPECT_EQ(status["forked_child"], false);
  EXPECT_EQ(status["profile"]["format"], "hotkernel-profile");
  // No fusion engine in this process: the fusion object says so.
  EXPECT_EQ(status["fusion"], nlohmann::json({{"on", false}}));
}

}  // namespace
}  // namespace hotkernel::engine
