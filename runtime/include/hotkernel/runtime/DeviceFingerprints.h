#pragma once
// The environment fingerprint of each device a process uses.
//
// Note [A fingerprint per device]
// The fingerprint names the GPU, so two devices of one process can have two
// (an H200 beside an H100, or the same model under different settings). The
// runtime keeps one per device, set when the device is first used, and
// everything a device's work reads or writes in the cache goes under that
// device's own fingerprint: cached kernels are loaded for it, and a tuning
// result is stored under the fingerprint of the device it was measured on.
// Setting and reading happen on different threads (the serving thread that
// first uses a device, the optimizer's), so the map has its own lock.

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel {

class DeviceFingerprints {
 public:
  // Records `device`'s fingerprint; a second call for the device replaces it.
  void set(int device, const Fingerprint& fingerprint);
  // The device's fingerprint, or nullopt when the device was never set.
  std::optional<Fingerprint> of(int device) const;
  // The device's fingerprint key; throws Error when the device was never set.
  std::string keyOf(int device) const;
  // Every device's key, by device.
  std::map<int, std::string> keys() const;

 private:
  mutable std::mutex mu_;
  std::map<int, Fingerprint> byDevice_;  // Guarded by mu_.
};

}  // namespace hotkernel
