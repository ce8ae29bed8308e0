#pragma once
// Compiles untrusted CUDA source (an agent's reply) with NVRTC in a child
// process, where a hang, a crash or a runaway allocation of the compiler
// cannot hurt the serving process.
//
// | variable                    | default | meaning |
// |-----------------------------|---------|---------|
// | HOTKERNEL_SANDBOX_COMPILE   | search  | path of the `hotkernel-sandbox-compile` helper |
//
// Note [The sandbox compile helper]
// `hotkernel-sandbox-compile` (tools/agent/SandboxCompileMain.cpp, built into
// the build's bin/) is started afresh for each source through runSubprocess
// (Subprocess.h: own process group, no inherited fds, wall-clock timeout,
// output cap). It first limits itself — address space (RLIMIT_AS), CPU time
// (RLIMIT_CPU) and an alarm() at the time limit (the parent passes its own
// timeout + 5 s), so it cannot outlive a dead parent by long, and no core
// files (RLIMIT_CORE 0) — and only then reads the
// request, loads NVRTC and compiles. Its working directory is "/". The helper
// is looked up in this order, first executable wins:
//   1. $HOTKERNEL_SANDBOX_COMPILE (when set, the only candidate);
//   2. next to the binary holding this code (libhotkernel.so in lib/, or the
//      executable it is linked into): <dir>/hotkernel-sandbox-compile, then
//      <dir>/../bin/hotkernel-sandbox-compile.
//
// Note [Sandbox compile wire format]
// Request, on the helper's stdin: one JSON object, version 1:
//   {"format":"hotkernel-sandbox-compile-request","version":1,
//    "source":"...","programName":"agent.cu","arch":"sm_90a","options":["-lineinfo"]}
//   ("options" are appended to NVRTC's --gpu-architecture=<arch> -std=c++17 -default-device).
// Reply, on its stdout: one binary frame, all integers little-endian:
//   offset 0   4 bytes  magic "HKSC"
//          4   u32      version = 1
//          8   u32      status: 0 compiled, 1 compile error, 2 bad request,
//                               3 NVRTC unavailable, 4 internal error
//         12   u32      reserved, 0
//         16   u64      NVRTC compile time, microseconds
//         24   u64 n1, then n1 bytes   message (why it failed; "" when compiled)
//              u64 n2, then n2 bytes   NVRTC log
//              u64 n3, then n3 bytes   cubin (empty unless status 0)
//   and nothing after. The helper exits 0 after writing a frame, 2 when the
//   request was bad (still with a frame). The parent trusts nothing in the
//   frame: a short, oversized or malformed frame is a failure.
// Test hooks, read from the helper's environment after the request:
//   HOTKERNEL_SANDBOX_TEST_CRASH=1 aborts, HOTKERNEL_SANDBOX_TEST_HANG=1 sleeps
//   forever, HOTKERNEL_SANDBOX_TEST_GARBAGE=1 writes a malformed frame.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/runtime/Config.h"  // LazyVariable

namespace hotkernel {

inline constexpr const char* kSandboxRequestFormat = "hotkernel-sandbox-compile-request";
inline constexpr int kSandboxRequestVersion = 1;
inline constexpr uint32_t kSandboxFrameVersion = 1;
inline constexpr const char* kSandboxHelperName = "hotkernel-sandbox-compile";

struct SandboxCompileRequest {
  std::string source;
  std::string programName = "agent.cu";  // names the source in NVRTC's log
  std::string arch = "sm_90a";           // a real architecture (a cubin is produced)
  std::vector<std::string> options;      // extra NVRTC options

  std::string toJsonText() const;
  // Throws Error unless `text` is a version 1 request with every field of the right type.
  static SandboxCompileRequest fromJsonText(const std::string& text);
};

// The status word of the frame (Note [Sandbox compile wire format]).
enum class SandboxStatus : uint32_t {
  Compiled = 0,
  CompileError = 1,
  BadRequest = 2,
  NvrtcUnavailable = 3,
  InternalError = 4,
};

struct SandboxFrame {
  SandboxStatus status = SandboxStatus::InternalError;
  uint64_t compileMicros = 0;
  std::string message;
  std::string log;
  std::string cubin;
};

std::string encodeSandboxFrame(const SandboxFrame& frame);
// Throws Error for anything but exactly one well-formed version 1 frame.
SandboxFrame decodeSandboxFrame(const std::string& bytes);

// Why a sandbox compile produced no cubin.
enum class SandboxFailure {
  None,          // compiled
  CompileError,  // NVRTC rejected the source (log says why): the source's fault
  TimedOut,      // the helper ran past the timeout and was killed
  Crashed,       // the helper died of a signal (a compiler crash, or the memory limit)
  HelperFailed,  // the helper is missing, could not start, exited without a valid frame, or
                 // reported a bad request, an internal error or NVRTC unavailable
};
const char* sandboxFailureName(SandboxFailure failure);  // "compile-error", "timed-out", ...

struct SandboxCompileOptions {
  std::string helperPath;                                // "" : sandboxCompileHelperPath()
  double timeoutSeconds = 120.0;                         // wall clock for the whole helper run
  size_t memoryLimitBytes = size_t{4} << 30;             // the helper's RLIMIT_AS; 0: no limit
  size_t maxCubinBytes = size_t{64} << 20;               // larger replies are refused
  std::vector<std::pair<std::string, std::string>> env;  // extra environment for the helper
};

struct SandboxCompileResult {
  SandboxFailure failure = SandboxFailure::HelperFailed;
  std::string cubin;          // the ELF image when failure == None
  std::string log;            // NVRTC's log (warnings, or the errors of a CompileError)
  std::string error;          // one line: why there is no cubin; "" when compiled
  double compileSeconds = 0;  // NVRTC's time, as the helper measured it
  double wallSeconds = 0;     // the helper's whole run

  bool compiled() const { return failure == SandboxFailure::None; }
};

// Compiles in a fresh helper process (Note [The sandbox compile helper]).
// Never throws for anything the source or the helper does; throws Error only
// for misuse (a timeout <= 0).
SandboxCompileResult sandboxCompile(const SandboxCompileRequest& request, const SandboxCompileOptions& options = {});

// The helper's path by the search order above, or "" with `*whyNotFound` set.
std::string sandboxCompileHelperPath(std::string* whyNotFound = nullptr);

// A helper executable `name`: `variable`'s value when set (it must be
// executable), else next to the library or executable holding this code, or
// in ../bin from there. "" with `*whyNotFound` (when non-null) naming what
// was tried.
std::string findHelperExecutable(const std::string& name, LazyVariable variable, std::string* whyNotFound = nullptr);

// The helper's main(): reads the request on stdin, writes one frame on stdout.
// Arguments: [--memory-limit-bytes N] [--time-limit-seconds N].
int sandboxCompileHelperMain(int argc, char** argv);

}  // namespace hotkernel
