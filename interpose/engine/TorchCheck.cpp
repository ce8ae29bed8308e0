#include "TorchCheck.h"

#include <c10/core/CPUAllocator.h>
#include <dlfcn.h>

#include <optional>

#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/TorchVersion.h"

// Set for this file by interpose/CMakeLists.txt (cmake/TorchBuildInfo.cmake).
#ifndef HOTKERNEL_BUILT_TORCH_FULL_VERSION
#define HOTKERNEL_BUILT_TORCH_FULL_VERSION ""
#endif

namespace hotkernel {

std::string processTorchMismatch() {
  // The file of the process's libc10: where a function of it lives.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&c10::SetCPUAllocator), &info) == 0 || info.dli_fname == nullptr) {
    HOTKERNEL_LOG(Warn) << "cannot tell which file holds this process's libc10; assuming the torch hotkernel was "
                           "built for ("
                        << HOTKERNEL_BUILT_TORCH_FULL_VERSION << ")";
    return "";
  }
  const std::optional<std::string> found = torchVersionBeside(info.dli_fname);
  if (!found) {
    HOTKERNEL_LOG(Warn) << "no torch version beside " << info.dli_fname << "; assuming the torch hotkernel was built for ("
                        << HOTKERNEL_BUILT_TORCH_FULL_VERSION << ")";
    return "";
  }
  std::string mismatch = torchMismatch(HOTKERNEL_BUILT_TORCH_FULL_VERSION, *found);
  if (!mismatch.empty()) mismatch += " (" + std::string(info.dli_fname) + ")";
  return mismatch;
}

}  // namespace hotkernel
