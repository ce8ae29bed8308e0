#pragma once
// A KernelLauncher for a cubin loaded into a device's primary context.
//
// Note [Modules are never unloaded]
// cuModuleUnload during another thread's graph capture invalidates the capture,
// and a published plan may be read by in-flight calls, so loaded modules live
// as long as the process.

#include <cuda.h>

#include <memory>
#include <string>

#include "hotkernel/runtime/NvtxRange.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

struct CudaDriverApi;

struct LaunchGeometry {
  unsigned gridX = 1;
  unsigned blockX = 1;
  unsigned sharedBytes = 0;
  // The kernel waits for other CTAs of its grid: launched cooperatively
  // (Note [Cooperative launches]).
  bool cooperative = false;
};

// Note [Cooperative launches]
// A kernel whose CTAs wait for each other through global memory (the
// grid-split norms: Note [Split norm rows over a cooperative grid] in
// kernels/norm/rms_norm.cu) only finishes when every CTA of its grid is
// resident at once; a plain launch does not promise that, and a CTA spinning
// for one that never gets an SM would hang the stream. Such a geometry is
// launched with cuLaunchCooperativeKernel, which either runs the whole grid
// co-resident or fails at once with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
// (a grid wider than the GPU, or than the SMs MPS grants the process); the
// failure is reported like any launch failure and the call runs ATen.
// Returns the launch's status; `params` is cuLaunchKernel's kernelParams.
CUresult launchKernelOn(const CudaDriverApi& driver, CUfunction function, const LaunchGeometry& geometry,
                        CUstream stream, void** params);

// The widest cluster (CTAs) every sm_90 GPU launches; wider ones are "non-portable".
constexpr int kPortableClusterSize = 8;

// Note [Function attributes before launch]
// What a freshly loaded function needs before its first launch, set through
// `driver` (a parameter, so that tests pass a table of fakes):
//  - dynamic shared memory (`sharedBytes` > 0): the opt-in
//    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (Note [Dynamic shared
//    memory opt-in] in src/CudaKernelLauncher.cpp);
//  - a compile-time cluster (__cluster_dims__) wider than
//    kPortableClusterSize: CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
//    = 1, without which the launch fails. The width is the function's own
//    (CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH), so a family's template and an
//    agent's kernel are treated alike. A driver that cannot answer that query
//    (older than clusters) is taken to run no cluster: nothing is set, and a
//    cluster kernel then fails at launch, which is reported like any launch
//    failure.
// Whether a wide cluster fits the GPU (CTAs of one cluster share a GPC) is
// only known at launch: cuLaunchKernel then fails with
// CUDA_ERROR_INVALID_CLUSTER_SIZE or an out-of-resources error, synchronously
// and without leaving the context in an error state; the launcher reports it
// (launchStatus) and its callers fall back (the harness drops the candidate,
// a plan's call runs ATen).
// Returns CUDA_SUCCESS, or the first failing call's status and its name in
// `*failedCall` (when given).
CUresult prepareFunction(const CudaDriverApi& driver, CUfunction function, unsigned sharedBytes,
                         const char** failedCall = nullptr);

class CudaKernelLauncher final : public KernelLauncher {
 public:
  // Loads `cubin` into device `ordinal`'s primary context, looks up
  // `kernelName` and sets what it needs before a launch (prepareFunction);
  // registers `description` as the NVTX range name of its launches (Note
  // [NVTX ranges around plan launches]).
  // Throws Error on any driver failure. Must not be called while a graph is
  // being captured on this thread.
  static std::shared_ptr<CudaKernelLauncher> load(int ordinal, const std::string& cubin,
                                                  const std::string& kernelName, LaunchGeometry geometry,
                                                  size_t alignment, std::string description);

  // A plan's launches, at the loaded geometry, each inside an NVTX range named
  // by the description (when ranges are on).
  bool launch(const RowKernelArgs& args, void* stream) const noexcept override;
  bool launchArgs(const KernelArgs& args, void* stream) const noexcept override;
  // The same kernel with another geometry (the harness runs one cubin on many shapes).
  bool launchWith(const RowKernelArgs& args, void* stream, const LaunchGeometry& geometry) const noexcept;
  bool launchWith(const KernelArgs& args, void* stream, const LaunchGeometry& geometry) const noexcept;
  // launchWith's status: CUDA_SUCCESS, the launch's own error (a cluster that
  // does not fit the GPU: Note [Function attributes before launch]), or
  // CUDA_ERROR_NOT_INITIALIZED (no driver), CUDA_ERROR_INVALID_VALUE (an
  // invalid argument list), the context switch's error.
  CUresult launchStatus(const KernelArgs& args, void* stream, const LaunchGeometry& geometry) const noexcept;
  const LaunchGeometry& geometry() const { return geometry_; }
  size_t alignment() const override { return alignment_; }
  std::string describe() const override { return description_; }
  int registersPerThread() const;

 private:
  CudaKernelLauncher() = default;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  LaunchGeometry geometry_;
  size_t alignment_ = 16;
  std::string description_;
  NvtxRangeName rangeName_;  // set once at load; read without a lock by launching threads
};

}  // namespace hotkernel
