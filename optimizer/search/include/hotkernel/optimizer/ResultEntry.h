#pragma once
// The cache entry that records a tuning result.

#include <string>

#include "hotkernel/cache/Entry.h"
#include "hotkernel/optimizer/TunerOptions.h"
#include "hotkernel/runtime/DeviceFingerprints.h"

namespace hotkernel {

// The entry of `out`, the result of tuning (op, variant) on `device`: a
// kernel when accepted, else keep_aten under `servedFamily` (the op's own
// family). Keyed by the fingerprint of `device` (Note [A fingerprint per
// device]); throws Error when that device has none recorded.
cache::Entry resultEntry(const DeviceFingerprints& fingerprints, int device, const std::string& op,
                         const std::string& variant, const std::string& servedFamily, const TuneOutcome& out);

}  // namespace hotkernel
