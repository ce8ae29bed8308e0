#include "StaleSelection.h"

#include <algorithm>
#include <map>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel::cli {

size_t StaleSelection::staleEntries() const {
  size_t n = 0;
  for (const StaleFingerprint& f : stale) n += f.entries;
  return n;
}

StaleSelection selectStale(const std::vector<cache::Entry>& entries, const StalePolicy& policy,
                           const MachineFingerprints& machine) {
  constexpr int64_t kDay = 86400;
  std::map<std::string, StaleFingerprint> byFingerprint;
  for (const cache::Entry& e : entries) {
    auto [it, first] = byFingerprint.try_emplace(e.fingerprint);
    StaleFingerprint& f = it->second;
    if (first) {
      f.fingerprint = e.fingerprint;
      try {
        f.hotkernelVersion = Fingerprint::fromCanonicalJson(e.fingerprintJson).hotkernelVersion;
      } catch (const Error&) {
        f.hotkernelVersion.clear();  // judged by age alone
      }
    }
    ++f.entries;
    f.newestUnix = std::max(f.newestUnix, e.createdUnix);
  }
  StaleSelection out;
  for (auto& [key, f] : byFingerprint) {
    const int64_t ageDays = (policy.nowUnix - f.newestUnix) / kDay;
    if (!f.hotkernelVersion.empty() && f.hotkernelVersion != policy.hotkernelVersion) {
      f.reason = "hotkernel " + f.hotkernelVersion + ", not " + policy.hotkernelVersion;
    } else if (policy.nowUnix - f.newestUnix > policy.maxAgeDays * kDay) {
      f.reason = "newest entry " + std::to_string(ageDays) + " days old, over " + std::to_string(policy.maxAgeDays);
    } else {
      continue;
    }
    if (machine.contains(f.fingerprint)) {
      out.keptForMachine.push_back(f.fingerprint);
      continue;
    }
    out.stale.push_back(std::move(f));
  }
  return out;
}

}  // namespace hotkernel::cli
