#include "hotkernel/runtime/DeviceFingerprints.h"

#include "hotkernel/runtime/Check.h"

namespace hotkernel {

void DeviceFingerprints::set(int device, const Fingerprint& fingerprint) {
  std::lock_guard<std::mutex> guard(mu_);
  byDevice_[device] = fingerprint;
}

std::optional<Fingerprint> DeviceFingerprints::of(int device) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = byDevice_.find(device);
  if (it == byDevice_.end()) return std::nullopt;
  return it->second;
}

std::string DeviceFingerprints::keyOf(int device) const {
  const std::optional<Fingerprint> f = of(device);
  HOTKERNEL_CHECK(f.has_value(), "no fingerprint recorded for device ", device);
  return f->key();
}

std::map<int, std::string> DeviceFingerprints::keys() const {
  std::lock_guard<std::mutex> guard(mu_);
  std::map<int, std::string> out;
  for (const auto& [device, f] : byDevice_) out[device] = f.key();
  return out;
}

}  // namespace hotkernel
