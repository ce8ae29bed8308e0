#include "hotkernel/optimizer/ResultEntry.h"

#include "hotkernel/runtime/Check.h"

namespace hotkernel {

cache::Entry resultEntry(const DeviceFingerprints& fingerprints, int device, const std::string& op,
                         const std::string& variant, const std::string& servedFamily, const TuneOutcome& out) {
  const std::optional<Fingerprint> f = fingerprints.of(device);
  HOTKERNEL_CHECK(f.has_value(), "no fingerprint recorded for device ", device);
  cache::Entry entry;
  entry.fingerprint = f->key();
  entry.fingerprintJson = f->canonicalJson();
  entry.op = op;
  entry.variant = variant;
  entry.family = out.accepted ? out.family : servedFamily;
  entry.metrics = out.metrics.toJson().dump();  // Note [Tune metrics JSON]
  if (out.accepted) {
    // A choice among ATen's own implementations (the attention family) carries no cubin.
    entry.decision = out.cubin.empty() ? cache::kDecisionAtenBackend : cache::kDecisionKernel;
    entry.params = out.paramsJson.dump();
    entry.kernelName = out.kernelName;
    entry.cubin = out.cubin;
  } else {
    entry.decision = cache::kDecisionKeepAten;
    entry.params = "{}";
  }
  return entry;
}

}  // namespace hotkernel
