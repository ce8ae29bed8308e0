#include "CudaProbe.h"

#include <cuda.h>
#include <dlfcn.h>

namespace hotkernel::cli {
namespace {

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(lib, name));
}

}  // namespace

CudaProbe probeCuda() {
  CudaProbe probe;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    probe.error =
        std::string("the NVIDIA driver's libcuda.so.1 cannot be loaded (") + (why ? why : "unknown reason") + ")";
    return probe;
  }
  auto driverGetVersion = symbol<CUresult (*)(int*)>(lib, "cuDriverGetVersion");
  auto init = symbol<CUresult (*)(unsigned)>(lib, "cuInit");
  auto deviceGetCount = symbol<CUresult (*)(int*)>(lib, "cuDeviceGetCount");
  auto deviceGet = symbol<CUresult (*)(CUdevice*, int)>(lib, "cuDeviceGet");
  auto deviceGetName = symbol<CUresult (*)(char*, int, CUdevice)>(lib, "cuDeviceGetName");
  auto deviceGetAttribute = symbol<CUresult (*)(int*, CUdevice_attribute, CUdevice)>(lib, "cuDeviceGetAttribute");
  auto getErrorString = symbol<CUresult (*)(CUresult, const char**)>(lib, "cuGetErrorString");
  if (!driverGetVersion || !init || !deviceGetCount || !deviceGet || !deviceGetName || !deviceGetAttribute) {
    probe.error = "libcuda.so.1 lacks the driver API's basic functions";
    return probe;
  }
  auto describe = [getErrorString](CUresult r) {
    const char* text = nullptr;
    if (getErrorString != nullptr && getErrorString(r, &text) == CUDA_SUCCESS && text != nullptr) {
      return std::string(text);
    }
    return "CUDA error " + std::to_string(static_cast<int>(r));
  };
  if (CUresult r = driverGetVersion(&probe.driverVersion); r != CUDA_SUCCESS) {
    probe.error = "cuDriverGetVersion failed: " + describe(r);
    return probe;
  }
  probe.driverFound = true;
  if (CUresult r = init(0); r != CUDA_SUCCESS) {
    probe.error = r == CUDA_ERROR_NO_DEVICE ? kNoCudaDevice : "cuInit failed: " + describe(r);
    return probe;
  }
  int count = 0;
  if (CUresult r = deviceGetCount(&count); r != CUDA_SUCCESS) {
    probe.error = "cuDeviceGetCount failed: " + describe(r);
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    char name[256] = {};
    CudaDeviceInfo info;
    info.ordinal = i;
    if (deviceGet(&device, i) != CUDA_SUCCESS || deviceGetName(name, sizeof name, device) != CUDA_SUCCESS ||
        deviceGetAttribute(&info.ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) != CUDA_SUCCESS ||
        deviceGetAttribute(&info.ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) != CUDA_SUCCESS) {
      probe.error = "device " + std::to_string(i) + " cannot be queried";
      continue;
    }
    info.name = name;
    probe.devices.push_back(std::move(info));
  }
  if (probe.devices.empty() && probe.error.empty()) probe.error = kNoCudaDevice;
  return probe;
}

}  // namespace hotkernel::cli
