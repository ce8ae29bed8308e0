#pragma once
// What `hotkernel cache stats` counts: entries by op, by decision and by
// fingerprint (with the environment each fingerprint names), and which
// entries match this machine. Computed from metadata (CacheStore::listMetadata)
// and the machine's fingerprints, both passed in, so it is tested without a GPU.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "MachineFingerprint.h"
#include "hotkernel/cache/Entry.h"

namespace hotkernel::cli {

struct FingerprintStats {
  std::string fingerprint;
  // From the fingerprint's JSON; "" when it does not parse (a damaged row: `cache verify` names it).
  std::string gpu;
  std::string torchVersion;
  std::string hotkernelVersion;
  size_t entries = 0;
  int64_t newestUnix = 0;  // the newest entry's created_unix
  bool matchesMachine = false;
};

struct OpStats {
  size_t entries = 0;
  size_t kernels = 0;  // decision kernel
};

struct CacheStats {
  size_t entries = 0;
  int64_t cubinBytes = 0;
  std::map<std::string, OpStats> byOp;
  std::map<std::string, size_t> byDecision;     // every decision found, also one this build does not know
  std::vector<FingerprintStats> byFingerprint;  // ordered by fingerprint
  size_t matchingEntries = 0;                   // entries of this machine's fingerprints (0 when unknown)
};

CacheStats computeCacheStats(const std::vector<cache::Entry>& entries, const MachineFingerprints& machine);

}  // namespace hotkernel::cli
