#pragma once
// What the ranking and the stop rules write to the experiment log
// (ExperimentLog.h, shown by `hotkernel log`): a line for every target the
// ranking drops without a search, and the stop reason of every search on the
// line that closes it. No torch.
//
// Note [Ranking in the experiment log]
// A target dropped because its ATen kernel already runs at >= 90% of its
// roofline gets a "kept_aten" line, reason "near_roofline: ...", and a
// keep_aten cache entry, so it is not timed again until the environment
// fingerprint changes (Note [Decided targets] in Ranking.h). A target with no
// recorded GPU time gets a "kept_aten" line for this pass only (no cache
// entry: it is ranked again when it gets calls). The line that closes a
// search (the accepted candidate, or the kept_aten line) carries
// extra.target = the TargetClock summary (budget, spent, roofline, best time,
// stop) and, for kept_aten, the stop in its reason. extra.ranking holds the
// ranking's numbers (roofline, headroom, expected saving, GPU time). Their
// keys are snake_case, as every key of the line (Note [Experiment line
// versions]): extra.target is the summary with its keys snake-cased (the
// tuning's metrics in the cache keep the summary's own keys).

#include <string>

#include <nlohmann/json.hpp>

#include "hotkernel/optimizer/ExperimentLog.h"
#include "hotkernel/optimizer/Ranking.h"

namespace hotkernel {

// {"gpu_seconds","current_us","roofline_us","roofline_fraction","headroom","expected_saving_seconds","budget_seconds"}.
nlohmann::json rankingJson(const RankedTarget& target);

// The kept_aten line of a target the ranking dropped (NearRoofline or
// NoGpuTime); Decided targets need none (they have their line already).
Experiment skippedTargetExperiment(const SkippedTarget& skipped, const std::string& fingerprint);

// Adds the search's stop (`tuneMetrics["target"]`, from TargetClock::summary)
// to the line that closes it: extra.target, and for a kept_aten line the stop in its reason.
void addStopReason(Experiment& closing, const nlohmann::json& tuneMetrics);

}  // namespace hotkernel
