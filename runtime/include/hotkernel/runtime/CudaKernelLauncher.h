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

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

struct LaunchGeometry {
  unsigned gridX = 1;
  unsigned blockX = 1;
  unsigned sharedBytes = 0;
};

class CudaKernelLauncher final : public KernelLauncher {
 public:
  // Loads `cubin` into device `ordinal`'s primary context and looks up
  // `kernelName`. Throws Error on any driver failure. Must not be called while
  // a graph is being captured on this thread.
  static std::shared_ptr<CudaKernelLauncher> load(int ordinal, const std::string& cubin,
                                                  const std::string& kernelName, LaunchGeometry geometry,
                                                  size_t alignment, std::string description);

  bool launch(const RowKernelArgs& args, void* stream) const noexcept override;
  bool launchArgs(const KernelArgs& args, void* stream) const noexcept override;
  // The same kernel with another geometry (the harness runs one cubin on many shapes).
  bool launchWith(const RowKernelArgs& args, void* stream, const LaunchGeometry& geometry) const noexcept;
  bool launchWith(const KernelArgs& args, void* stream, const LaunchGeometry& geometry) const noexcept;
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
};

}  // namespace hotkernel
