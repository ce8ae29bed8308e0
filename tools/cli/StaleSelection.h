#pragma once
// Which fingerprints `hotkernel cache prune --stale` removes.
//
// Note [Stale fingerprints]
// A fingerprint's entries are stale, and removed together, when the
// fingerprint names another hotkernel version than this one (its JSON holds
// the version: Fingerprint::hotkernelVersion; no process of this build can
// ever load them), or when its newest entry was written more than maxAgeDays
// days ago (created_unix; the cache records when an entry was written, not
// when it was last loaded). The fingerprints of this machine's devices are
// never stale: they are what its serving processes load, however old. A
// fingerprint whose JSON does not parse is judged by age alone (`cache
// verify` names the damaged rows; `cache rm` removes them).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "MachineFingerprint.h"
#include "hotkernel/cache/Entry.h"

namespace hotkernel::cli {

inline constexpr int64_t kDefaultStaleDays = 30;

struct StalePolicy {
  int64_t nowUnix = 0;
  int64_t maxAgeDays = kDefaultStaleDays;
  std::string hotkernelVersion;  // this build's HOTKERNEL_VERSION
};

struct StaleFingerprint {
  std::string fingerprint;
  std::string hotkernelVersion;  // from its JSON, "" when it does not parse
  size_t entries = 0;
  int64_t newestUnix = 0;
  std::string reason;  // "hotkernel 0.0.9, not 0.1.0" or "newest entry 45 days old, over 30"
};

struct StaleSelection {
  std::vector<StaleFingerprint> stale;       // ordered by fingerprint
  std::vector<std::string> keptForMachine;   // fingerprints of this machine that would otherwise be stale
  size_t staleEntries() const;
};

// Applies Note [Stale fingerprints] to `entries` (metadata is enough).
StaleSelection selectStale(const std::vector<cache::Entry>& entries, const StalePolicy& policy,
                           const MachineFingerprints& machine);

}  // namespace hotkernel::cli
