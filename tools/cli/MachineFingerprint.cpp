#include "MachineFingerprint.h"

#include "BuildInfo.h"
#include "hotkernel/Config.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Hash.h"

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

}  // namespace hotkernel::cli
