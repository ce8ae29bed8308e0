#pragma once
// What this build of hotkernel was configured against, passed in by
// tools/cli/CMakeLists.txt: the torch libhotkernel.so is compiled and linked
// with, and that torch's CUDA runtime version (part of the cache fingerprint).

#include <string>

namespace hotkernel::cli {

struct BuildInfo {
  bool withTorch = false;     // HOTKERNEL_ENABLE_TORCH: libhotkernel.so is built
  std::string torchVersion;   // TORCH_VERSION of the torch found at configure time, e.g. "2.11.0"; "" torch-free
  std::string torchFullVersion;  // torch.__version__ of HOTKERNEL_PYTHON's torch, e.g. "2.11.0+cu130"; "" unknown
  int torchCudaRuntime = 0;   // that torch's CUDA runtime, as major*1000 + minor*10 (13.0 -> 13000); 0 unknown
};

const BuildInfo& buildInfo();

}  // namespace hotkernel::cli
