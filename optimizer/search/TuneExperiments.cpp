#include "hotkernel/optimizer/TuneExperiments.h"

#include "hotkernel/optimizer/RankingLog.h"

namespace hotkernel {
namespace {

// The search's stop on the line that closes it (Note [Ranking in the experiment log]).
void closeSearch(Experiment& e, const TuneMetrics& metrics) {
  if (metrics.target) addStopReason(e, nlohmann::json{{"target", *metrics.target}});
}

// Whether candidate params `c` are what the accepted entry stores: the family's params themselves, or a chain
// entry's kernel point (its params hold the chain, the variant and the point under "kernel": ChainEntry.h).
bool storedParams(const nlohmann::json& c, const nlohmann::json& entry) {
  if (c == entry) return true;
  return entry.is_object() && entry.contains("kernel") && entry.at("kernel") == c;
}

}  // namespace

std::vector<Experiment> tuneExperiments(const std::string& fingerprint, const std::string& op,
                                        const std::string& variant, const TuneOutcome& out) {
  std::vector<Experiment> lines;
  for (const CandidateRecord& c : out.metrics.candidates) {
    Experiment e;
    e.fingerprint = fingerprint;
    e.op = op;
    e.variant = variant;
    e.candidateId = c.candidateId;
    e.parentId = c.parentId;
    if (!c.origin.empty()) e.extra["origin"] = c.origin;
    if (!c.mutation.empty()) e.extra["mutation"] = c.mutation;
    if (c.round) e.extra["round"] = *c.round;
    if (c.budgetLevel) e.extra["budget_level"] = *c.budgetLevel;
    if (c.attempt) e.extra["attempt"] = *c.attempt;
    if (c.kernelName) e.extra["kernel_name"] = *c.kernelName;
    e.params = c.params.value_or(nlohmann::json::object());
    e.compileSeconds = c.compileSeconds;
    if (c.stages) {
      for (const auto& [stage, result] : *c.stages) e.stages[stage] = result.passed ? "pass" : "fail";
    }
    e.timings.atenUs = c.atenUs;
    e.timings.kernelUs = c.kernelUs;
    e.timings.speedup = c.speedup;
    if (c.speedupCi) e.timings.speedupCi = {c.speedupCi->low, c.speedupCi->high};
    const bool chosen = out.accepted && c.params && storedParams(*c.params, out.paramsJson) && c.accepted.value_or(false);
    e.decision = chosen ? ExperimentDecision::Accepted : ExperimentDecision::Rejected;
    if (!c.error.empty()) {
      e.reason = c.stage + ": " + c.error.substr(0, 500);
    } else if (!chosen) {
      // Note [Which candidate is accepted] (Search.h): one that clears may lose to another that clears.
      const bool clears = c.clears.value_or(c.accepted.value_or(false));
      e.reason = clears ? "correct and faster than ATen, but another candidate was accepted"
                        : "correct, but its speed-up CI does not clear the threshold";
    } else {
      e.reason = "fastest correct candidate; swapped in";
      closeSearch(e, out.metrics);
    }
    lines.push_back(std::move(e));
  }
  if (!out.accepted) {
    Experiment e;
    e.fingerprint = fingerprint;
    e.op = op;
    e.variant = variant;
    e.decision = ExperimentDecision::KeptAten;
    e.reason = "no candidate was correct and faster; the ATen kernel stays";
    closeSearch(e, out.metrics);
    lines.push_back(std::move(e));
  }
  return lines;
}

}  // namespace hotkernel
