#include "hotkernel/optimizer/ProfileTargets.h"

#include <set>
#include <unordered_map>

#include "hotkernel/optimizer/ProfileDocument.h"
#include "hotkernel/optimizer/TargetCost.h"

namespace hotkernel {

// A malformed document throws from parseRecordedProfile (Note [A profile is any file] in ProfileDocument.cpp).
ProfileTargets targetsFromProfile(const nlohmann::json& profile, int device) {
  const RecordedProfile recorded = parseRecordedProfile(profile, device);
  ProfileTargets out;
  std::set<std::string> seen;
  for (const RecordedVariant& v : recorded.variants) {
    OptimizerJob job;
    job.op = v.op;
    job.key = v.key;
    if (!callCost(job.op, job.key) || !seen.insert(jobId(job)).second) {
      ++out.ignored;
      continue;
    }
    if (v.estimatedRunCalls() <= 0 && v.estimatedDeferredCalls > 0) {
      ++out.takenByChains;
      continue;
    }
    out.targets.push_back({std::move(job), v.estimatedRunCalls()});
  }
  return out;
}

void mergeTargets(ProfileTargets& into, const ProfileTargets& more) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < into.targets.size(); ++i) index.emplace(jobId(into.targets[i].job), i);
  for (const ProfileTarget& t : more.targets) {
    const auto [it, added] = index.emplace(jobId(t.job), into.targets.size());
    if (added) {
      into.targets.push_back(t);
    } else {
      into.targets[it->second].estimatedCalls += t.estimatedCalls;
    }
  }
  into.ignored += more.ignored;
  into.takenByChains += more.takenByChains;
}

}  // namespace hotkernel
