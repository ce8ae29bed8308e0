#include "hotkernel/runtime/Fingerprint.h"

#include <nlohmann/json.hpp>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel {

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
    f.driverVersion = j.at("driver").get<int>();
    f.nvrtcVersion = j.at("nvrtc").get<int>();
    f.torchVersion = j.at("torch").get<std::string>();
    f.hotkernelVersion = j.at("hotkernel").get<std::string>();
    f.kernelSources = j.at("kernels").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    HOTKERNEL_THROW("malformed fingerprint JSON (", e.what(), "): ", text);
  }
  return f;
}

}  // namespace hotkernel
