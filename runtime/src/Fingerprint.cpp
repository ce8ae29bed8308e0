#include "hotkernel/runtime/Fingerprint.h"

#include <nlohmann/json.hpp>

#include <limits>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel {

// Note [Fingerprint integers are range-checked]
// The fingerprint JSON comes from a cache row, i.e. from disk. A number that
// is not an integer (1.5, 1e30, or an integer too long for 64 bits, which the
// JSON reader keeps as a float) converted to int is undefined behaviour, and
// a 64-bit integer out of int's range would be silently truncated into
// another fingerprint. Both are refused (jsonfield::integer: Note [Strict JSON fields]).

std::string Fingerprint::canonicalJson() const {
  // nlohmann::json objects keep keys sorted, so dump() is canonical.
  nlohmann::json j = {{"gpu", gpuName},
                      {"cc", computeCapability},
                      {"driver", driverVersion},
                      {"nvrtc", nvrtcVersion},
                      {"torch", torchVersion},
                      {"hotkernel", hotkernelVersion},
                      {"kernels", kernelSources}};
  return j.dump();
}

std::string Fingerprint::key() const { return sha256Hex(canonicalJson()).substr(0, 16); }

Fingerprint Fingerprint::fromCanonicalJson(const std::string& text) {
  constexpr int64_t kIntMin = std::numeric_limits<int>::min(), kIntMax = std::numeric_limits<int>::max();
  const std::string where = "fingerprint";
  Fingerprint f;
  try {
    const nlohmann::json j = jsonfield::object(jsonfield::parse(text, where, jsonfield::kMaxDepth), where);
    f.gpuName = jsonfield::string(j, "gpu", where);
    f.computeCapability = jsonfield::string(j, "cc", where);
    f.driverVersion = static_cast<int>(jsonfield::integer(j, "driver", where, kIntMin, kIntMax));
    f.nvrtcVersion = static_cast<int>(jsonfield::integer(j, "nvrtc", where, kIntMin, kIntMax));
    f.torchVersion = jsonfield::string(j, "torch", where);
    f.hotkernelVersion = jsonfield::string(j, "hotkernel", where);
    f.kernelSources = jsonfield::string(j, "kernels", where);
  } catch (const Error& e) {
    HOTKERNEL_THROW("malformed fingerprint JSON (", e.what(), "): ", text);
  }
  return f;
}

}  // namespace hotkernel
