#pragma once
// The CUDA driver API, dlopen'ed at first use (libcuda.so.1), so hotkernel
// loads and runs on machines without a GPU or driver.
//
// Note [Driver calls fall back]
// Every call goes through HOTKERNEL_CU_CALL (throws hotkernel::Error with the
// driver's error string) or HOTKERNEL_CU_CALL_NOEXCEPT (logs, returns false).
// Callers on the dispatch path use the noexcept form and run the original ATen
// kernel when it fails.

#include <cuda.h>

#include <string>

namespace hotkernel {

struct CudaDriverApi {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuFuncGetAttribute)(int*, CUfunction_attribute, CUfunction);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuLaunchCooperativeKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, CUstream, void**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
};

// The resolved API, or nullptr when libcuda cannot be loaded or cuInit fails.
// Thread-safe; never throws; logs once why the driver is unavailable.
const CudaDriverApi* cudaDriver();

// The driver API or a thrown Error naming why it is unavailable.
const CudaDriverApi& requireCudaDriver();

std::string cudaErrorString(CUresult r);

struct DeviceInfo {
  int ordinal = -1;
  std::string name;
  int ccMajor = 0, ccMinor = 0;
  int smCount = 0;
  int driverVersion = 0;
  // "sm_90a" on Hopper (arch-specific features), "sm_XY" otherwise.
  std::string nvrtcArch() const;
};

// Queries a device through the driver API. Throws Error if unavailable.
DeviceInfo queryDevice(int ordinal);

}  // namespace hotkernel

#define HOTKERNEL_CU_CALL(expr)                                                                      \
  do {                                                                                               \
    CUresult hk_status_ = (::hotkernel::requireCudaDriver().expr);                                   \
    if (hk_status_ != CUDA_SUCCESS) {                                                                \
      HOTKERNEL_THROW("CUDA driver call failed: " #expr ": ", ::hotkernel::cudaErrorString(hk_status_)); \
    }                                                                                                \
  } while (0)
