#include "hotkernel/runtime/Fingerprint.h"

#include <nlohmann/json.hpp>

#include <limits>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel {
namespace {

// Note [Fingerprint integers are range-checked]
// The fingerprint JSON comes from a cache row, i.e. from disk. A number that
// is not an integer (1.5, 1e30, or an integer too long for 64 bits, which the
// JSON reader keeps as a float) converted to int is undefined behaviour, and
// a 64-bit integer out of int's range would be silently truncated into
// another fingerprint. Both are refused.
int intField(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  HOTKERNEL_CHECK(v.is_number_integer(), "fingerprint field '", key, "' is not an integer: ", v.dump());
  const bool inRange = v.is_number_unsigned()
                           ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int>::max())
                           : v.get<int64_t>() >= std::numeric_limits<int>::min() &&
                                 v.get<int64_t>() <= std::numeric_limits<int>::max();
  HOTKERNEL_CHECK(inRange, "fingerprint field '", key, "' is out of range: ", v.dump());
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

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
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  HOTKERNEL_CHECK(j.is_object(), "fingerprint is not a JSON object: ", text);
  Fingerprint f;
  try {
    f.gpuName = j.at("gpu").get<std::string>();
    f.computeCapability = j.at("cc").get<std::string>();
    f.driverVersion = intField(j, "driver");
    f.nvrtcVersion = intField(j, "nvrtc");
    f.torchVersion = j.at("torch").get<std::string>();
    f.hotkernelVersion = j.at("hotkernel").get<std::string>();
    f.kernelSources = j.at("kernels").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    HOTKERNEL_THROW("malformed fingerprint JSON (", e.what(), "): ", text);
  }
  return f;
}

}  // namespace hotkernel
