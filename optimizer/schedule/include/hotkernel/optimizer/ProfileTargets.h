#pragma once
// The optimization targets of a recorded profile ("hotkernel-profile" v1 to v3,
// read by ProfileDocument.h; format in interpose/include/hotkernel/interpose/Recorder.h): what
// `hotkernel warmup` ranks (QueueRanker) and tunes. No torch.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "hotkernel/optimizer/OptimizerWorker.h"

namespace hotkernel {

struct ProfileTarget {
  OptimizerJob job;           // op and key (on the warm-up's device); no target yet
  double estimatedCalls = 0;  // the profile's estimate of the calls that ran outside fused chains
};

struct ProfileTargets {
  std::vector<ProfileTarget> targets;  // in profile order, one per (op, variant)
  int ignored = 0;                     // variants of ops no family models (TargetCost.h), or it cannot serve
  // Variants every recorded call of which the fusion engine deferred into a chain (Note [Deferred calls in the
  // recorder] in runtime/DeferredCalls.h): nothing ran that a kernel of theirs would serve.
  int takenByChains = 0;
};

// Throws Error when `profile` is not a hotkernel-profile v1 to v3 document or
// an entry of it is malformed (missing or mistyped op, dtype, rows, cols).
ProfileTargets targetsFromProfile(const nlohmann::json& profile, int device);

// Adds `more` (another profile's targets, e.g. another worker's) to `into`:
// a target already there takes the sum of both estimates of its calls, a new
// one goes after the others; the ignored and taken counts add up.
void mergeTargets(ProfileTargets& into, const ProfileTargets& more);

}  // namespace hotkernel
