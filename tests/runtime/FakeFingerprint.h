#pragma once
// A fingerprint for a fake device (tests of Note [A fingerprint per device]).

#include <string>

#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel::testing {

inline Fingerprint fakeFingerprint(const std::string& gpu, const std::string& computeCapability = "9.0") {
  Fingerprint f;
  f.gpuName = gpu;
  f.computeCapability = computeCapability;
  f.driverVersion = 13000;
  f.nvrtcVersion = 13000;
  f.torchVersion = "2.11.0+cudart13000";
  f.hotkernelVersion = "0.1.0";
  f.kernelSources = "abc";
  return f;
}

}  // namespace hotkernel::testing
