#include "BuildInfo.h"

#include "hotkernel/Config.h"

// Defined for this file by tools/cli/CMakeLists.txt; defaults for builds that do not.
#ifndef HOTKERNEL_BUILT_TORCH_VERSION
#define HOTKERNEL_BUILT_TORCH_VERSION ""
#endif
#ifndef HOTKERNEL_BUILT_TORCH_FULL_VERSION
#define HOTKERNEL_BUILT_TORCH_FULL_VERSION ""
#endif
#ifndef HOTKERNEL_BUILT_TORCH_CUDART
#define HOTKERNEL_BUILT_TORCH_CUDART 0
#endif

namespace hotkernel::cli {

const BuildInfo& buildInfo() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.withTorch = HOTKERNEL_ENABLE_TORCH != 0;
    b.torchVersion = HOTKERNEL_BUILT_TORCH_VERSION;
    b.torchFullVersion = HOTKERNEL_BUILT_TORCH_FULL_VERSION;
    b.torchCudaRuntime = HOTKERNEL_BUILT_TORCH_CUDART;
    return b;
  }();
  return info;
}

}  // namespace hotkernel::cli
