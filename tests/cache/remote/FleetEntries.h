#pragma once
// What the fleet chaos test (FleetChaosTest.cpp) and its worker
// (FleetWorker.cpp) agree on: the fingerprint, the variants, the one correct
// entry of each (what the fake tuner produces), and the worker's event log.
// No gtest: the worker includes it too (CacheTestEntries.h has none).
//
// Note [Fleet event log, v1]
// Each worker appends one line per event to its own file, flushed at once so
// that a SIGKILL loses nothing written before it:
//   "v1 <kind> <variant index> <token or -> <steady ms> <pid>"
// kind: start (a tuning begins; token: the lease's, "-" without a lease),
// publish (its result was published), kept (its result was stored but not
// published: the lease was lost or given up), load (an entry of the tier
// passed the check and is served; token: the cubin's SHA-256), refused (an
// entry of the tier failed the check), served-all (every variant is served),
// exit (refusals: the tier's refusal count in the token field). <steady ms>
// is CLOCK_MONOTONIC in milliseconds, one clock for every process of the host.

#include <time.h>

#include <cstdint>
#include <string>

#include "../CacheTestEntries.h"
#include "hotkernel/cache/Entry.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel::cache::fleet {

inline const char* kOp = "aten::_softmax";

inline int64_t steadyMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// The fleet's one device: the cache tests' fingerprint.
inline Fingerprint fleetFingerprint() { return test::testFingerprint(); }

inline VariantKey keyOf(int index) {
  return VariantKey{static_cast<int32_t>(kernels::DType::Float16), 0, 64 * (index + 1), 4096};
}

inline std::string variantOf(int index) { return kernels::variantString(keyOf(index)); }

// The correct entry of variant `index`: what the fake tuner produces, byte for byte, in every worker.
inline Entry goodEntry(int index, const std::string& cubinTag = "good") {
  Entry e = test::kernelEntry(kOp, variantOf(index), fleetFingerprint());
  e.cubin = test::seededCubin(cubinTag + "|" + e.variant, 512);
  e.metrics = R"({"speedup":1.3})";
  e.createdUnix = 1700000000;
  return e;
}

}  // namespace hotkernel::cache::fleet
