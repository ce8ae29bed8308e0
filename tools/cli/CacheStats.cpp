#include "CacheStats.h"

#include <algorithm>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel::cli {

CacheStats computeCacheStats(const std::vector<cache::Entry>& entries, const MachineFingerprints& machine) {
  CacheStats s;
  std::map<std::string, FingerprintStats> byFingerprint;
  for (const cache::Entry& e : entries) {
    ++s.entries;
    s.cubinBytes += e.cubinBytes;
    OpStats& op = s.byOp[e.op];
    ++op.entries;
    op.kernels += e.decision == cache::kDecisionKernel ? 1 : 0;
    ++s.byDecision[e.decision];
    auto [it, first] = byFingerprint.try_emplace(e.fingerprint);
    FingerprintStats& f = it->second;
    if (first) {
      f.fingerprint = e.fingerprint;
      f.matchesMachine = machine.contains(e.fingerprint);
      try {
        const Fingerprint parsed = Fingerprint::fromCanonicalJson(e.fingerprintJson);
        f.gpu = parsed.gpuName;
        f.torchVersion = parsed.torchVersion;
        f.hotkernelVersion = parsed.hotkernelVersion;
      } catch (const Error&) {
        // Left empty: shown as unknown.
      }
    }
    ++f.entries;
    f.newestUnix = std::max(f.newestUnix, e.createdUnix);
    s.matchingEntries += f.matchesMachine ? 1 : 0;
  }
  for (auto& [key, f] : byFingerprint) s.byFingerprint.push_back(std::move(f));
  return s;
}

}  // namespace hotkernel::cli
