#pragma once
// The cache fingerprint this build's libhotkernel.so gives a device
// (Engine::fingerprintFor in interpose/engine/Engine.cpp, Note [A fingerprint
// per device]), computed without torch: the GPU and driver from the driver
// API, NVRTC's version, the torch version and its CUDA runtime as the build
// was configured (BuildInfo.h), hotkernel's version, the digest of the
// embedded kernel sources. Each field is composed as the engine composes it.

#include <optional>
#include <string>

#include "CudaProbe.h"
#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel::cli {

// The fingerprint of `device`, or nullopt with `*why` set when the build does
// not know torch's part (a torch-free build, or torch's CUDA runtime version
// unknown at configure time).
std::optional<Fingerprint> machineFingerprint(const CudaDeviceInfo& device, int driverVersion, int nvrtcVersion,
                                              std::string* why);

}  // namespace hotkernel::cli
