#pragma once
// NVRTC, loaded at run time: compiles CUDA C++ source to a cubin in-process.
//
// Note [NVRTC is dlopen'ed]
// hotkernel has no link-time dependency on libnvrtc, so the library loads on
// machines without a CUDA toolkit and a process that never optimizes never maps
// NVRTC at all. The first call to any function below looks for the library, in
// this order, and keeps the first that loads and resolves every symbol:
//   $HOTKERNEL_NVRTC_PATH (when set, the only candidate),
//   libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so (the loader's search path, or a
//   copy the process already mapped, e.g. the one torch ships),
//   /usr/local/cuda/lib64/libnvrtc.so.13.
// The library is never unloaded. Only the types of <nvrtc.h> are used.
//
// Note [NVRTC thread safety]
// Loading happens once under std::call_once. Each compile uses its own
// nvrtcProgram, which NVRTC supports from several threads at once; the
// optimizer compiles candidates in parallel on TBB threads.

#include <string>
#include <vector>

namespace hotkernel {

struct NvrtcOutput {
  std::string cubin;          // the ELF image, ready for cuModuleLoadData
  std::string log;            // NVRTC's log: warnings, and ptxas' report under --ptxas-options=-v
  double compileSeconds = 0;  // wall time of nvrtcCompileProgram
};

// Whether NVRTC could be loaded. Never throws.
bool nvrtcAvailable();

// Why NVRTC could not be loaded ("" when it was). Never throws.
std::string nvrtcUnavailableReason();

// The path or name NVRTC was loaded from. Throws Error if unavailable.
std::string nvrtcLibraryPath();

// NVRTC's version as major*1000 + minor*10 (13.0 -> 13000), like CUDA_VERSION.
// Throws Error if unavailable.
int nvrtcVersion();

// Compiles `source` for `arch` ("sm_90a", "sm_80": a real architecture, so
// that a cubin is produced) with the options
//   --gpu-architecture=<arch> -std=c++17 -default-device <extraOptions...>
// (no --use_fast_math: kernels must match ATen's accuracy; pass -lineinfo or
// -D defines through extraOptions). `programName` names the source in the log.
// Throws Error carrying the compile log on failure, or if NVRTC is unavailable.
NvrtcOutput compileToCubin(const std::string& source, const std::string& programName, const std::string& arch,
                           const std::vector<std::string>& extraOptions);

}  // namespace hotkernel
