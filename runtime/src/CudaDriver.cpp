#include "hotkernel/runtime/CudaDriver.h"

#include <dlfcn.h>

#include <mutex>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

struct DriverState {
  CudaDriverApi api{};
  bool ok = false;
  std::string why;
};

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& out, std::string& why) {
  out = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (!out) why = std::string("libcuda has no symbol ") + name;
  return out != nullptr;
}

DriverState loadDriver() {
  DriverState s;
  // Never dlclose: function pointers and modules live as long as the process.
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    s.why = std::string("cannot load libcuda.so.1 (") + (::dlerror() ?: "?") + ")";
    return s;
  }
  CudaDriverApi& a = s.api;
  bool ok = resolve(h, "cuInit", a.cuInit, s.why) && resolve(h, "cuDriverGetVersion", a.cuDriverGetVersion, s.why) &&
            resolve(h, "cuDeviceGet", a.cuDeviceGet, s.why) && resolve(h, "cuDeviceGetCount", a.cuDeviceGetCount, s.why) &&
            resolve(h, "cuDeviceGetName", a.cuDeviceGetName, s.why) &&
            resolve(h, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, s.why) &&
            resolve(h, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, s.why) &&
            resolve(h, "cuCtxGetCurrent", a.cuCtxGetCurrent, s.why) &&
            resolve(h, "cuCtxSetCurrent", a.cuCtxSetCurrent, s.why) &&
            resolve(h, "cuModuleLoadData", a.cuModuleLoadData, s.why) &&
            resolve(h, "cuModuleGetFunction", a.cuModuleGetFunction, s.why) &&
            resolve(h, "cuFuncSetAttribute", a.cuFuncSetAttribute, s.why) &&
            resolve(h, "cuFuncGetAttribute", a.cuFuncGetAttribute, s.why) &&
            resolve(h, "cuLaunchKernel", a.cuLaunchKernel, s.why) &&
            resolve(h, "cuLaunchCooperativeKernel", a.cuLaunchCooperativeKernel, s.why) &&
            resolve(h, "cuGetErrorString", a.cuGetErrorString, s.why);
  if (!ok) return s;
  CUresult r = a.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* msg = nullptr;
    a.cuGetErrorString(r, &msg);
    s.why = std::string("cuInit failed: ") + (msg ? msg : "?");
    return s;
  }
  s.ok = true;
  return s;
}

const DriverState& driverState() {
  static const DriverState s = loadDriver();
  return s;
}

}  // namespace

const CudaDriverApi* cudaDriver() {
  const DriverState& s = driverState();
  if (!s.ok) {
    HOTKERNEL_LOG_ONCE(Info, "cuda-driver-unavailable") << "CUDA driver unavailable: " << s.why;
    return nullptr;
  }
  return &s.api;
}

const CudaDriverApi& requireCudaDriver() {
  const DriverState& s = driverState();
  HOTKERNEL_CHECK(s.ok, "CUDA driver unavailable: ", s.why);
  return s.api;
}

std::string cudaErrorString(CUresult r) {
  const char* msg = nullptr;
  const DriverState& s = driverState();
  if (s.api.cuGetErrorString) s.api.cuGetErrorString(r, &msg);
  return std::string(msg ? msg : "unknown CUDA error") + " (" + std::to_string(static_cast<int>(r)) + ")";
}

std::string DeviceInfo::nvrtcArch() const {
  std::string arch = "sm_" + std::to_string(ccMajor) + std::to_string(ccMinor);
  // Hopper and later datacenter parts have arch-specific ("a") features.
  if (ccMajor == 9 && ccMinor == 0) arch += "a";
  return arch;
}

DeviceInfo queryDevice(int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  CUdevice dev;
  HOTKERNEL_CU_CALL(cuDeviceGet(&dev, ordinal));
  char name[256] = {0};
  HOTKERNEL_CU_CALL(cuDeviceGetName(name, sizeof(name) - 1, dev));
  info.name = name;
  HOTKERNEL_CU_CALL(cuDeviceGetAttribute(&info.ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  HOTKERNEL_CU_CALL(cuDeviceGetAttribute(&info.ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  HOTKERNEL_CU_CALL(cuDeviceGetAttribute(&info.smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  HOTKERNEL_CU_CALL(cuDriverGetVersion(&info.driverVersion));
  return info;
}

}  // namespace hotkernel
