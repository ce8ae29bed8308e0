#pragma once
// The first run of an untrusted kernel, in a child process.
//
// Note [Untrusted kernels run first in a sandbox process]
// A kernel that faults (illegal address) leaves a sticky error in its CUDA
// context, and one that never finishes holds its SMs: in the serving process
// either would break every later CUDA call. Kernels from an external agent
// therefore run first in `hotkernel-sandbox-run`, a driver-API-only helper
// with its own context: it loads the cubin, runs it once on the variant's
// shape with random input, and reports. The parent kills it at the timeout.
// Only kernels that pass go on to the in-process five-stage harness.
//
// Wire format (version 1), on the helper's stdin: one line of JSON
//   {"format":"hotkernel-sandbox-run","version":1,"kernelName":..,"block":..,
//    "gridX":..,"sharedBytes":..,"rows":..,"cols":..,"elementSize":2|4,"half":bool,
//    "device":0,"cubinBytes":N}
// then exactly N bytes of cubin. On stdout, one line of JSON:
//   {"ok":true,"seconds":..} or {"ok":false,"error":"..."}; exit 0 iff ok.

#include <cstddef>
#include <cstdint>
#include <string>

#include "hotkernel/runtime/CudaKernelLauncher.h"

namespace hotkernel {

struct SandboxRunRequest {
  std::string cubin;
  std::string kernelName;
  LaunchGeometry geometry;
  int64_t rows = 0;
  int64_t cols = 0;
  int elementSize = 4;
  bool half = false;  // 2-byte elements: float16 (true) or bfloat16 (false)
  int device = 0;
};

struct SandboxRunResult {
  bool ok = false;
  std::string error;  // why not, for logs and the agent's feedback
};

// The largest cubin a request may announce (what sandboxCompile accepts by default).
inline constexpr size_t kSandboxRunMaxCubinBytes = size_t{64} << 20;

// The request line of the wire format (one line of JSON, without its newline).
std::string sandboxRunHeaderLine(const SandboxRunRequest& request);

// A request line, read: the request without its cubin, and the cubin's size.
struct SandboxRunHeader {
  SandboxRunRequest request;
  size_t cubinBytes = 0;
};

// Throws Error unless `line` is a version 1 request line whose every field has
// its type and range: rows, cols >= 1 with rows * cols * elementSize bytes
// representable, elementSize 2 or 4, block, gridX and sharedBytes 32-bit
// unsigned, device >= 0, cubinBytes <= kSandboxRunMaxCubinBytes.
SandboxRunHeader parseSandboxRunHeader(const std::string& line);

// Bytes of one input (and one output) buffer: rows * cols * elementSize.
size_t sandboxRunInputBytes(const SandboxRunRequest& request);

// The parent's reading of the helper's stdout (its first line). Never throws:
// ok only when the helper succeeded and said {"ok":true}; otherwise the
// helper's "error" string, or "sandbox run failed: <describe>".
SandboxRunResult parseSandboxRunReply(const std::string& out, bool helperSucceeded, const std::string& describe);

// Runs the request in the helper (HOTKERNEL_SANDBOX_RUN, or hotkernel-sandbox-run
// next to libhotkernel.so or the executable). Never throws for a bad kernel.
SandboxRunResult sandboxRun(const SandboxRunRequest& request, double timeoutSeconds = 20.0);

// The helper's main (tools/agent/SandboxRunMain.cpp).
int sandboxRunHelperMain();

}  // namespace hotkernel
