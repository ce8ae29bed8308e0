#include "hotkernel/optimizer/TuneOutcome.h"

namespace hotkernel {
namespace {

using nlohmann::json;

template <typename T>
void putIf(json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

void putIf(json& j, const char* key, const std::string& value) {
  if (!value.empty()) j[key] = value;
}

}  // namespace

json ConfidenceInterval::toJson() const { return {low, high}; }

KernelMetrics KernelMetrics::of(const Comparison& cmp, double maxAbsError) {
  KernelMetrics k;
  k.speedup = cmp.speedup.median;
  k.speedupCi = {cmp.speedup.low, cmp.speedup.high};
  k.atenUs = cmp.baseline.median;
  k.kernelUs = cmp.candidate.median;
  k.maxAbsError = maxAbsError;
  k.pairs = cmp.speedup.n;
  return k;
}

json CandidateRecord::toJson() const {
  json j = {{"candidateId", candidateId}};
  putIf(j, "parentId", parentId);
  putIf(j, "origin", origin);
  putIf(j, "round", round);
  putIf(j, "attempt", attempt);
  putIf(j, "mutation", mutation);
  putIf(j, "params", params);
  putIf(j, "kernelName", kernelName);
  putIf(j, "compileSeconds", compileSeconds);
  if (stages) {
    json s = json::object();
    for (const auto& [name, result] : *stages) s[name] = result.passed ? "pass" : "fail: " + result.detail;
    j["stages"] = std::move(s);
  }
  if (harnessSeed) j["harnessSeed"] = std::to_string(*harnessSeed);
  putIf(j, "maxAbsError", maxAbsError);
  putIf(j, "stage", stage);
  putIf(j, "error", error);
  putIf(j, "atenUs", atenUs);
  putIf(j, "kernelUs", kernelUs);
  putIf(j, "speedup", speedup);
  if (speedupCi) j["speedupCi"] = speedupCi->toJson();
  putIf(j, "pairs", pairs);
  putIf(j, "budgetLevel", budgetLevel);
  putIf(j, "accepted", accepted);
  putIf(j, "clears", clears);
  return j;
}

json TuneMetrics::toJson() const {
  json j = json::object();
  if (kernel) {
    j["speedup"] = kernel->speedup;
    j["speedupCi"] = kernel->speedupCi.toJson();
    j["atenUs"] = kernel->atenUs;
    j["kernelUs"] = kernel->kernelUs;
    j["maxAbsError"] = kernel->maxAbsError;
    j["pairs"] = kernel->pairs;
    putIf(j, "tolerance", kernel->tolerance);
    if (kernel->bound) j["bound"] = {{"absolute", kernel->bound->absolute}, {"relative", kernel->bound->relative}};
    if (kernel->fromAgent) j["origin"] = "agent";
  }
  if (search) {
    // The seed as text: a reader's doubles would round a 64-bit seed.
    j["search"] = {{"seed", std::to_string(search->seed)},
                   {"evaluations", search->evaluations},
                   {"rounds", search->rounds},
                   {"stop", toString(search->stop)},
                   {"validPoints", search->validPoints}};
  }
  json list = json::array();
  for (const CandidateRecord& c : candidates) list.push_back(c.toJson());
  j["candidates"] = std::move(list);
  putIf(j, "target", target);
  putIf(j, "arch", arch);
  putIf(j, "reduction", reduction);
  putIf(j, "op", op);
  putIf(j, "tunedRows", tunedRows);
  putIf(j, "harnessRows", harnessRows);
  return j;
}

}  // namespace hotkernel
