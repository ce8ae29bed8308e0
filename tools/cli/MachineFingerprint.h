#pragma once
// The cache fingerprint this build's libhotkernel.so gives a device
// (Engine::fingerprintFor in interpose/engine/Engine.cpp, Note [A fingerprint
// per device]), computed without torch: the GPU and driver from the driver
// API, NVRTC's version, the torch version and its CUDA runtime as the build
// was configured (BuildInfo.h), hotkernel's version, the digest of the
// embedded kernel sources. Each field is composed as the engine composes it.

#include <optional>
#include <string>
#include <vector>

#include "CudaProbe.h"
#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel::cli {

// The fingerprint of `device`, or nullopt with `*why` set when the build does
// not know torch's part (a torch-free build, or torch's CUDA runtime version
// unknown at configure time).
std::optional<Fingerprint> machineFingerprint(const CudaDeviceInfo& device, int driverVersion, int nvrtcVersion,
                                              std::string* why);

// The fingerprints of this machine's devices, as the cache commands match
// entries against them (`cache ls`, `stats`, `prune --stale`, `export`).
struct MachineFingerprints {
  std::vector<std::string> keys;  // sorted, each once; empty when none is known
  std::string unknown;            // why none is known ("no CUDA device", a torch-free build), "" otherwise

  bool known() const { return !keys.empty(); }
  bool contains(const std::string& fingerprint) const;
};

// Probes the driver (probeCuda) and NVRTC and composes each device's
// fingerprint (machineFingerprint). Never throws.
MachineFingerprints thisMachineFingerprints();

}  // namespace hotkernel::cli
