#include "hotkernel/runtime/CudaKernelLauncher.h"

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {

CUresult prepareFunction(const CudaDriverApi& driver, CUfunction function, unsigned sharedBytes,
                         const char** failedCall) {
  auto fail = [&](CUresult r, const char* what) {
    if (failedCall) *failedCall = what;
    return r;
  };
  // Note [Dynamic shared memory opt-in]
  // Above 48 KiB of shared memory per CTA a kernel must opt in, and the
  // limit counts its static shared memory too: 48 KiB of dynamic plus the
  // template's static buffers failed to launch ("invalid argument") on the
  // H200 with the attribute set only above 48 KiB. Opt in for any dynamic size.
  if (sharedBytes > 0) {
    const CUresult r = driver.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 static_cast<int>(sharedBytes));
    if (r != CUDA_SUCCESS) return fail(r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  }
  // Note [Function attributes before launch]: a cluster wider than the portable maximum.
  int clusterWidth = 0;
  if (driver.cuFuncGetAttribute(&clusterWidth, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, function) != CUDA_SUCCESS) {
    HOTKERNEL_LOG_ONCE(Info, "cluster-width-query-failed")
        << "the CUDA driver cannot report a kernel's cluster width; kernels are launched as they are";
    clusterWidth = 0;
  }
  if (clusterWidth > kPortableClusterSize) {
    const CUresult r = driver.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    if (r != CUDA_SUCCESS) return fail(r, "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)");
  }
  return CUDA_SUCCESS;
}

CUresult launchKernelOn(const CudaDriverApi& driver, CUfunction function, const LaunchGeometry& geometry,
                        CUstream stream, void** params) {
  if (geometry.cooperative) {  // Note [Cooperative launches]
    return driver.cuLaunchCooperativeKernel(function, geometry.gridX, 1, 1, geometry.blockX, 1, 1,
                                            geometry.sharedBytes, stream, params);
  }
  return driver.cuLaunchKernel(function, geometry.gridX, 1, 1, geometry.blockX, 1, 1, geometry.sharedBytes, stream,
                               params, nullptr);
}

std::shared_ptr<CudaKernelLauncher> CudaKernelLauncher::load(int ordinal, const std::string& cubin,
                                                             const std::string& kernelName, LaunchGeometry geometry,
                                                             size_t alignment, std::string description) {
  HOTKERNEL_CHECK(!cubin.empty(), "empty cubin for ", kernelName);
  std::shared_ptr<CudaKernelLauncher> l(new CudaKernelLauncher());
  CUdevice dev;
  HOTKERNEL_CU_CALL(cuDeviceGet(&dev, ordinal));
  HOTKERNEL_CU_CALL(cuDevicePrimaryCtxRetain(&l->context_, dev));
  CUcontext previous = nullptr;
  HOTKERNEL_CU_CALL(cuCtxGetCurrent(&previous));
  HOTKERNEL_CU_CALL(cuCtxSetCurrent(l->context_));
  CUresult r = requireCudaDriver().cuModuleLoadData(&l->module_, cubin.data());
  const char* step = "cuModuleLoadData";
  if (r == CUDA_SUCCESS) {
    step = "cuModuleGetFunction";
    r = requireCudaDriver().cuModuleGetFunction(&l->function_, l->module_, kernelName.c_str());
  }
  if (r == CUDA_SUCCESS) r = prepareFunction(requireCudaDriver(), l->function_, geometry.sharedBytes, &step);
  requireCudaDriver().cuCtxSetCurrent(previous);
  HOTKERNEL_CHECK(r == CUDA_SUCCESS, "loading kernel ", kernelName, " failed at ", step, ": ", cudaErrorString(r));
  l->geometry_ = geometry;
  l->alignment_ = alignment;
  l->description_ = std::move(description);
  l->rangeName_ = NvtxRangeName::registered(l->description_);
  return l;
}

bool CudaKernelLauncher::launch(const RowKernelArgs& args, void* stream) const noexcept {
  const NvtxScope range(rangeName_);
  return launchWith(args, stream, geometry_);
}

bool CudaKernelLauncher::launchArgs(const KernelArgs& args, void* stream) const noexcept {
  const NvtxScope range(rangeName_);
  return launchWith(args, stream, geometry_);
}

bool CudaKernelLauncher::launchWith(const RowKernelArgs& args, void* stream,
                                    const LaunchGeometry& geometry) const noexcept {
  KernelArgs list;
  list.pointer(args.in).pointer(args.out).int64(args.rows).int64(args.cols);
  return launchWith(list, stream, geometry);
}

bool CudaKernelLauncher::launchWith(const KernelArgs& args, void* stream,
                                    const LaunchGeometry& geometry) const noexcept {
  return launchStatus(args, stream, geometry) == CUDA_SUCCESS;
}

CUresult CudaKernelLauncher::launchStatus(const KernelArgs& args, void* stream,
                                          const LaunchGeometry& geometry) const noexcept {
  const CudaDriverApi* d = cudaDriver();
  if (!d) return CUDA_ERROR_NOT_INITIALIZED;
  if (!args.valid()) return CUDA_ERROR_INVALID_VALUE;
  // Torch's runtime API makes the primary context current on threads it uses;
  // set it only where that has not happened.
  CUcontext current = nullptr;
  CUresult r = d->cuCtxGetCurrent(&current);
  if (r != CUDA_SUCCESS) return r;
  if (current != context_ && (r = d->cuCtxSetCurrent(context_)) != CUDA_SUCCESS) return r;
  void* params[KernelArgs::kMaxArgs];
  args.fillParams(params);
  r = launchKernelOn(*d, function_, geometry, static_cast<CUstream>(stream), params);
  if (r != CUDA_SUCCESS) {
    HOTKERNEL_LOG_ONCE(Warn, "launch-failed:" + description_)
        << "launching " << description_ << " failed (" << cudaErrorString(r) << "); using the ATen kernel";
  }
  return r;
}

int CudaKernelLauncher::registersPerThread() const {
  int regs = -1;
  if (const CudaDriverApi* d = cudaDriver()) d->cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, function_);
  return regs;
}

}  // namespace hotkernel
