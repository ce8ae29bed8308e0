#include "hotkernel/optimizer/AgentEntryCheck.h"

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/optimizer/CubinSections.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/SandboxRun.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {

// Note [Agent entries are checked again at load] (AgentEntryCheck.h): the
// same gates as an agent round's (Note [External agent rounds] in
// search/SoftmaxTuner.cpp), in the same order, on the cached cubin.
std::string checkAgentEntry(const AgentEntryKernel& kernel, const VariantKey& key,
                            const std::function<bool()>& yieldPoint) {
  if (key.device < 0 || key.inner != 0) return "an agent kernel serves only CUDA variants without an inner extent";
  const kernels::SoftmaxVariant v = kernels::softmaxVariantOf(key);
  AgentLaunch launch;
  try {
    const nlohmann::json params = nlohmann::json::parse(kernel.paramsJson);
    HOTKERNEL_CHECK(params.is_object() && params.contains("launch"), "no launch");
    launch = AgentLaunch::fromJson(params["launch"]);
  } catch (const std::exception& e) {
    return std::string("unreadable launch parameters: ") + e.what();
  }
  try {
    const std::vector<std::string> globals = writableGlobalData(kernel.cubin);
    if (!globals.empty()) return "the cubin holds writable global data (" + globals.front() + ")";
  } catch (const std::exception& e) {
    return std::string("unreadable cubin: ") + e.what();
  }
  for (const int64_t rows : {v.rows, int64_t{1}}) {
    if (rows == 1 && v.rows == 1) break;
    if (yieldPoint) HOTKERNEL_CHECK(yieldPoint(), "tuning interrupted");
    const kernels::LaunchGeometry g = launch.geometry(rows);
    const SandboxRunRequest run{kernel.cubin, kernel.kernelName, LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                                rows, v.cols, static_cast<int>(kernels::elementSize(v.dtype)),
                                v.dtype == kernels::DType::Float16, key.device};
    const SandboxRunResult sandboxed = sandboxRun(run);
    if (!sandboxed.ok) {
      return "first run in the sandbox process on " + std::to_string(rows) + " row(s) failed: " + sandboxed.error;
    }
  }
  HarnessCandidate hc;
  hc.cubin = kernel.cubin;
  hc.kernelName = kernel.kernelName;
  hc.description = "cached agent[" + kernel.kernelName + "]";
  hc.geometry = [launch](int64_t rows, int64_t) {
    const kernels::LaunchGeometry lg = launch.geometry(rows);
    return LaunchGeometry{lg.gridX, lg.blockX, lg.sharedBytes};
  };
  // The agent ABI's promises (tools/agent/PROTOCOL.md), as in an agent round.
  const int64_t maxRows = v.rows, onlyCols = v.cols;
  hc.acceptsShape = [maxRows, onlyCols](int64_t rows, int64_t cols) {
    return cols == onlyCols && rows >= 1 && rows <= maxRows;
  };
  hc.acceptsPointers = [](const void* in, const void* out) {
    return in != out && reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  };
  hc.alignment = 16;
  HarnessOptions ho;
  ho.yieldPoint = yieldPoint;
  const HarnessReport h = runHarness(softmaxSpec(), hc, v.dtype, v.rows, v.cols, key.device, ho);
  if (h.passed) return "";
  HOTKERNEL_CHECK(h.failure()->detail != "interrupted", "tuning interrupted");
  return std::string(toString(h.failure()->stage)) + " stage: " + h.failure()->detail;
}

}  // namespace hotkernel
