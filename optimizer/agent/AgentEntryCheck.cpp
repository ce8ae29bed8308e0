#include "hotkernel/optimizer/AgentEntryCheck.h"

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/AgentHarness.h"
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
  // The first run and the five stages in the sandbox process (Note [The harness stages in the sandbox process]).
  if (yieldPoint) HOTKERNEL_CHECK(yieldPoint(), "tuning interrupted");
  const kernels::LaunchGeometry g = launch.geometry(v.rows);
  SandboxRunRequest run{kernel.cubin, kernel.kernelName, LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                        v.rows, v.cols, static_cast<int>(kernels::elementSize(v.dtype)),
                        v.dtype == kernels::DType::Float16, key.device};
  run.harness = SandboxHarnessRequest{launch, 0};
  const SandboxRunResult sandboxed = sandboxRun(run);
  if (!sandboxed.ok) return "in the sandbox process: " + sandboxed.error;
  const HarnessCandidate hc = agentHarnessCandidate(kernel.cubin, kernel.kernelName, launch, v.rows, v.cols,
                                                    "cached agent[" + kernel.kernelName + "]");
  HarnessOptions ho;
  ho.yieldPoint = yieldPoint;
  const HarnessReport h = runHarness(softmaxSpec(), hc, v.dtype, v.rows, v.cols, key.device, ho);
  if (h.passed) return "";
  HOTKERNEL_CHECK(h.failure()->detail != "interrupted", "tuning interrupted");
  return std::string(toString(h.failure()->stage)) + " stage: " + h.failure()->detail;
}

}  // namespace hotkernel
