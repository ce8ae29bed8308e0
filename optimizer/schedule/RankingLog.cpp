#include "hotkernel/optimizer/RankingLog.h"

#include <cstdio>

namespace hotkernel {
namespace {

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", fraction * 100.0);
  return buf;
}

std::string micros(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", seconds * 1e6);
  return buf;
}

}  // namespace

nlohmann::json rankingJson(const RankedTarget& t) {
  return {{"gpu_seconds", t.target.gpuSeconds},
          {"current_us", t.target.currentSecondsPerCall * 1e6},
          {"roofline_us", t.rooflineSecondsPerCall * 1e6},
          {"roofline_fraction", t.rooflineFraction},
          {"headroom", t.headroom},
          {"expected_saving_seconds", t.expectedSavingSeconds},
          {"budget_seconds", t.budgetSeconds}};
}

Experiment skippedTargetExperiment(const SkippedTarget& s, const std::string& fingerprint) {
  Experiment e;
  e.fingerprint = fingerprint;
  e.op = s.target.op;
  e.variant = s.target.variant;
  e.decision = ExperimentDecision::KeptAten;
  e.timings.atenUs = s.target.currentSecondsPerCall * 1e6;
  e.reason = std::string(toString(s.reason)) + ": ";
  switch (s.reason) {
    case TargetStop::NearRoofline:
      e.reason += "the ATen kernel runs at " + percent(s.rooflineFraction) + " of the roofline (" +
                  micros(s.target.currentSecondsPerCall) + " vs " + micros(s.rooflineSecondsPerCall) +
                  "); the ATen kernel stays";
      break;
    case TargetStop::NoGpuTime:
      e.reason += "no GPU time recorded for it; not searched this pass";
      break;
    default:
      e.reason += "not searched";
      break;
  }
  e.extra["ranking"] = {{"gpu_seconds", s.target.gpuSeconds},
                        {"current_us", s.target.currentSecondsPerCall * 1e6},
                        {"roofline_us", s.rooflineSecondsPerCall * 1e6},
                        {"roofline_fraction", s.rooflineFraction},
                        {"stop", toString(s.reason)}};
  return e;
}

void addStopReason(Experiment& closing, const nlohmann::json& tuneMetrics) {
  if (!tuneMetrics.is_object() || !tuneMetrics.contains("target")) return;
  const nlohmann::json& target = tuneMetrics["target"];
  // The metrics' summary keeps the cache's camelCase keys; the log's are snake_case (Note [Ranking in the experiment log]).
  closing.extra["target"] = snakeCaseKeys(target);
  const std::string stop = target.value("stop", "none");
  if (closing.decision == ExperimentDecision::KeptAten && stop != "none") {
    closing.reason += " (search stopped: " + stop + ")";
  }
}

}  // namespace hotkernel
