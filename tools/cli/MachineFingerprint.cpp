#include "MachineFingerprint.h"

#include <algorithm>
#include <exception>

#include "BuildInfo.h"
#include "hotkernel/Config.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::cli {

std::optional<Fingerprint> machineFingerprint(const CudaDeviceInfo& device, int driverVersion, int nvrtcVersion,
                                              std::string* why) {
  const BuildInfo& build = buildInfo();
  if (!build.withTorch) {
    *why = "unknown: this build is torch-free (no libhotkernel.so)";
    return std::nullopt;
  }
  if (build.torchCudaRuntime <= 0) {
    *why = "unknown: torch's CUDA runtime version was not known at configure time (HOTKERNEL_PYTHON)";
    return std::nullopt;
  }
  Fingerprint f;
  f.gpuName = device.name;
  f.computeCapability = std::to_string(device.ccMajor) + "." + std::to_string(device.ccMinor);
  f.driverVersion = driverVersion;
  f.nvrtcVersion = nvrtcVersion;
  f.torchVersion = build.torchVersion + "+cudart" + std::to_string(build.torchCudaRuntime);
  f.hotkernelVersion = HOTKERNEL_VERSION;
  std::string sources;
  for (const kernels::KernelSource& k : kernels::allKernelSources()) sources += k.sha256();
  f.kernelSources = sha256Hex(sources);
  return f;
}

bool MachineFingerprints::contains(const std::string& fingerprint) const {
  return std::binary_search(keys.begin(), keys.end(), fingerprint);
}

MachineFingerprints thisMachineFingerprints() {
  MachineFingerprints m;
  const CudaProbe cuda = probeCuda();
  if (cuda.devices.empty()) {
    m.unknown = cuda.error.empty() ? kNoCudaDevice : cuda.error;
    return m;
  }
  int nvrtc = 0;
  try {
    if (nvrtcAvailable()) nvrtc = nvrtcVersion();
  } catch (const std::exception&) {
    nvrtc = 0;  // as doctor composes it without NVRTC
  }
  for (const CudaDeviceInfo& device : cuda.devices) {
    std::string why;
    if (std::optional<Fingerprint> f = machineFingerprint(device, cuda.driverVersion, nvrtc, &why)) {
      m.keys.push_back(f->key());
    } else {
      const std::string prefix = "unknown: ";
      m.unknown = why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why;
    }
  }
  std::sort(m.keys.begin(), m.keys.end());
  m.keys.erase(std::unique(m.keys.begin(), m.keys.end()), m.keys.end());
  if (m.known()) m.unknown.clear();
  return m;
}

}  // namespace hotkernel::cli
