#pragma once
// The CUDA driver as `hotkernel doctor` sees it: libcuda.so.1 dlopen'ed on
// its own (the runtime's cudaDriver() gives up when cuInit fails, and the
// driver's version is worth reporting on a machine without a device), never
// linked, so the CLI runs on machines without a driver.

#include <string>
#include <vector>

namespace hotkernel::cli {

inline constexpr const char* kNoCudaDevice = "no CUDA device";

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int ccMajor = 0;
  int ccMinor = 0;
};

struct CudaProbe {
  bool driverFound = false;  // libcuda.so.1 loaded and cuDriverGetVersion answered
  int driverVersion = 0;     // e.g. 13000
  std::string error;         // why the driver or its devices are unavailable ("" when none)
  std::vector<CudaDeviceInfo> devices;
};

// Loads the driver (kept loaded), initializes it and lists the devices. Never throws.
CudaProbe probeCuda();

}  // namespace hotkernel::cli
