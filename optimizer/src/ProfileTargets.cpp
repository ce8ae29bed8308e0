#include "hotkernel/optimizer/ProfileTargets.h"

#include <set>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/optimizer/TargetCost.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {

ProfileTargets targetsFromProfile(const nlohmann::json& profile, int device) {
  if (!profile.is_object() || profile.value("format", "") != "hotkernel-profile" || profile.value("version", 0) != 1 ||
      !profile.contains("variants") || !profile["variants"].is_array()) {
    HOTKERNEL_THROW("is not a hotkernel profile (format hotkernel-profile, version 1)");
  }
  ProfileTargets out;
  std::set<std::string> seen;
  for (const nlohmann::json& v : profile["variants"]) {
    OptimizerJob job;
    double calls = 0;
    try {
      job.op = v.at("op").get<std::string>();
      job.key.dtype = static_cast<int32_t>(kernels::parseDType(v.at("dtype").get<std::string>()));
      job.key.device = device;
      job.key.rows = v.at("rows").get<int64_t>();
      job.key.cols = v.at("cols").get<int64_t>();
      // Norm variants' flags (absent = false; Note [Profile format] in interpose/src/Recorder.h).
      if (v.value("weight", false)) job.key.flags |= VariantKey::kHasWeight;
      if (v.value("bias", false)) job.key.flags |= VariantKey::kHasBias;
      // cross_entropy_loss variants' reduction (a variant without one is dropped by TargetCost).
      if (v.contains("reduction") && v["reduction"].is_string()) {
        const std::string r = v["reduction"].get<std::string>();
        for (int32_t i = 0; i < 3; ++i) {
          if (r == kernels::reductionName(static_cast<kernels::CrossEntropyReduction>(i))) {
            job.key.flags |= VariantKey::reductionFlags(i);
          }
        }
      }
      calls = v.value("estimatedCalls", 0.0);
    } catch (const std::exception& e) {
      HOTKERNEL_THROW("malformed variant in the profile: ", v.dump(), " (", e.what(), ")");
    }
    if (!callCost(job.op, job.key) || !seen.insert(jobId(job)).second) {
      ++out.ignored;
      continue;
    }
    out.targets.push_back({std::move(job), calls});
  }
  return out;
}

}  // namespace hotkernel
