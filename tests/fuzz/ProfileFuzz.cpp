// fuzz_profile: targetsFromProfile (optimizer/schedule/ProfileTargets.cpp) on any
// JSON text, as `hotkernel warmup --profile` reads a HOTKERNEL_PROFILE file.
#include <nlohmann/json.hpp>

#include "FuzzSupport.h"
#include "hotkernel/optimizer/ProfileTargets.h"

using namespace hotkernel;

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // As tools/warmup/WarmupMain.cpp: a document that is not JSON reaches the reader as "discarded".
  const nlohmann::json profile = nlohmann::json::parse(fuzz::text(data, size), nullptr, /*allow_exceptions=*/false);
  ProfileTargets targets;
  if (!fuzz::accepts([&] { targets = targetsFromProfile(profile, /*device=*/0); })) return 0;
  for (const ProfileTarget& t : targets.targets) {
    HK_FUZZ_ASSERT(!t.job.op.empty());
    HK_FUZZ_ASSERT(t.job.key.rows >= 1 && t.job.key.cols >= 1);
    HK_FUZZ_ASSERT(t.job.key.device == 0);
  }
  HK_FUZZ_ASSERT(targets.ignored >= 0);
  return 0;
}
