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
// With `harness` set it then runs the harness's five stages there too, against
// the child's own ATen (Note [The harness stages in the sandbox process]);
// only kernels that pass go on to the in-process five-stage harness.
//
// Note [Sandbox run wire format]
// Version 2 (version 1 is version 2 without "harness"; the helper reads both,
// the parent writes 2). On the helper's stdin: one line of JSON
//   {"format":"hotkernel-sandbox-run","version":2,"kernelName":..,"block":..,
//    "gridX":..,"sharedBytes":..,"rows":..,"cols":..,"elementSize":2|4,"half":bool,
//    "device":0,"cubinBytes":N[,"harness":{"launch":{"block":..,"rowsPerBlock":..,
//    "sharedBytes":..},"seed":S}]}
// then exactly N bytes of cubin. "harness" asks for the five stages after the
// first run: the launch is the agent's (AgentLaunch, rule R7), the op the one
// the agent tunes (softmax over the last dim), the dtype float32 (elementSize
// 4), float16 (2, half) or bfloat16 (2, !half), the seed the harness's (0: a
// fresh one). On stdout, one line of JSON:
//   {"ok":true,"seconds":..[,"stages":[{"stage":"smoke","passed":true,"detail":".."},..]]}
//   or {"ok":false,"error":"..."[,"stages":[..]]}; exit 0 iff ok.
// "stages" (version 2, with "harness" only): the stages run, in order, up to
// and including the first failure; "ok" is true only when all five passed.

#include <cstddef>
#include <cstdint>
#include <string>

#include <functional>
#include <optional>
#include <vector>

#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"

namespace hotkernel {

// The five harness stages asked of the sandbox process (Note [Sandbox run wire format]).
struct SandboxHarnessRequest {
  AgentLaunch launch;  // the agent kernel's launch for any row count
  uint64_t seed = 0;   // the harness's seed; 0: a fresh one
};

struct SandboxRunRequest {
  std::string cubin;
  std::string kernelName;
  LaunchGeometry geometry;
  int64_t rows = 0;
  int64_t cols = 0;
  int elementSize = 4;
  bool half = false;  // 2-byte elements: float16 (true) or bfloat16 (false)
  int device = 0;
  std::optional<SandboxHarnessRequest> harness;  // also the five stages, after the first run
};

// One harness stage as the sandbox process reported it.
struct SandboxStage {
  std::string stage;  // "smoke", "sweep", "stability", "determinism", "edge-cases" (toString(HarnessStage))
  bool passed = false;
  std::string detail;
};

// The stage names in the harness's order (what a full report of the sandbox holds).
const std::vector<std::string>& sandboxStageNames();

struct SandboxRunResult {
  bool ok = false;
  std::string error;  // why not, for logs and the agent's feedback
  std::vector<SandboxStage> stages;  // with a harness request: the stages the sandbox ran
  // With a harness request: the first run passed and a stage failed (the error names it).
  bool failedInStage() const;
};

// The helper's harness: runs the five stages for `request` (with `harness` set)
// in the helper's process; set by a helper built with torch (tools/agent/SandboxRunMain.cpp).
using SandboxStagesRunner = std::function<std::vector<SandboxStage>(const SandboxRunRequest& request)>;

// The largest cubin a request may announce (what sandboxCompile accepts by default).
inline constexpr size_t kSandboxRunMaxCubinBytes = size_t{64} << 20;

// The request line of the wire format (one line of JSON, without its newline).
std::string sandboxRunHeaderLine(const SandboxRunRequest& request);

// A request line, read: the request without its cubin, and the cubin's size.
struct SandboxRunHeader {
  SandboxRunRequest request;
  size_t cubinBytes = 0;
};

// Throws Error unless `line` is a version 1 or 2 request line whose every
// field has its type and range: rows, cols >= 1 with rows * cols * elementSize
// bytes representable, elementSize 2 or 4, block, gridX and sharedBytes 32-bit
// unsigned, device >= 0, cubinBytes <= kSandboxRunMaxCubinBytes; version 2's
// optional "harness" an object of exactly "launch" (rule R7) and "seed" (>= 0).
SandboxRunHeader parseSandboxRunHeader(const std::string& line);

// Bytes of one input (and one output) buffer: rows * cols * elementSize.
size_t sandboxRunInputBytes(const SandboxRunRequest& request);

// The parent's reading of the helper's stdout (its first line). Never throws:
// ok only when the helper succeeded and said {"ok":true} (and, when
// `expectStages`, reported the five stages in order, each passed); otherwise
// the helper's "error" string, or "sandbox run failed: <describe>". The
// well-formed entries of "stages" are kept either way.
SandboxRunResult parseSandboxRunReply(const std::string& out, bool helperSucceeded, const std::string& describe,
                                      bool expectStages = false);

// Runs the request in the helper (HOTKERNEL_SANDBOX_RUN, or hotkernel-sandbox-run
// next to libhotkernel.so or the executable). Never throws for a bad kernel.
// A timeout of 0: 20 s for a first run, 120 s with the harness's stages.
SandboxRunResult sandboxRun(const SandboxRunRequest& request, double timeoutSeconds = 0);

// The helper's main (tools/agent/SandboxRunMain.cpp); without `runStages` a
// request with "harness" is answered with an error (a helper built without torch).
int sandboxRunHelperMain(const SandboxStagesRunner& runStages = {});

}  // namespace hotkernel
