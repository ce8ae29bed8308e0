#include "hotkernel/optimizer/ProfileTargets.h"

#include <unordered_map>

#include <limits>
#include <set>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/TargetCost.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

// Note [A profile is any file]
// `hotkernel warmup --profile` reads whatever file it is given. Every field is
// checked for its type before it is read (nlohmann's value() and get() throw
// their own exception types on a mistyped field), and every count for being an
// integer in range before it is converted: converting a JSON float out of the
// range of an integer type is undefined behaviour. A malformed document is an
// Error, whatever its shape.

// `key` of `j` holds exactly the string `expected`.
bool holdsString(const nlohmann::json& j, const char* key, const char* expected) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() && it->get_ref<const std::string&>() == expected;
}

int64_t integerField(const nlohmann::json& v, const char* key) {
  const nlohmann::json& x = v.at(key);
  HOTKERNEL_CHECK(x.is_number_integer(), "'", key, "' is not an integer");
  if (x.is_number_unsigned()) {
    HOTKERNEL_CHECK(x.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "'", key,
                    "' is out of range");
  }
  return x.get<int64_t>();
}

}  // namespace

ProfileTargets targetsFromProfile(const nlohmann::json& profile, int device) {
  auto version = profile.is_object() ? profile.find("version") : profile.end();
  if (!profile.is_object() || !holdsString(profile, "format", "hotkernel-profile") || version == profile.end() ||
      !version->is_number_integer() || *version != 1 || !profile.contains("variants") ||
      !profile["variants"].is_array()) {
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
      job.key.rows = integerField(v, "rows");
      job.key.cols = integerField(v, "cols");
      // Middle-dim reductions' third extent (absent = none; Note [Profile format]).
      if (v.contains("inner")) job.key.inner = integerField(v, "inner");
      // Norm variants' options (absent = false; Note [Profile format] in interpose/include/hotkernel/interpose/Recorder.h).
      if (v.value("weight", false)) job.key.options |= kernels::variant_options::kWeight;
      if (v.value("bias", false)) job.key.options |= kernels::variant_options::kBias;
      // cross_entropy_loss variants' reduction (a variant without one is dropped by TargetCost).
      if (v.contains("reduction") && v["reduction"].is_string()) {
        const std::string r = v["reduction"].get<std::string>();
        for (int32_t i = 0; i < 3; ++i) {
          if (r == kernels::reductionName(static_cast<kernels::CrossEntropyReduction>(i))) {
            job.key.options |= kernels::reductionOptions(i);
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
}

}  // namespace hotkernel
