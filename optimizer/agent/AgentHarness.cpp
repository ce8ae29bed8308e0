#include "hotkernel/optimizer/AgentHarness.h"

#include <cstdint>

#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {

HarnessCandidate agentHarnessCandidate(const std::string& cubin, const std::string& kernelName,
                                       const AgentLaunch& launch, int64_t maxRows, int64_t cols,
                                       const std::string& description) {
  HarnessCandidate hc;
  hc.cubin = cubin;
  hc.kernelName = kernelName;
  hc.description = description;
  hc.geometry = [launch](int64_t rows, int64_t) {
    const kernels::LaunchGeometry lg = launch.geometry(rows);
    return LaunchGeometry{lg.gridX, lg.blockX, lg.sharedBytes};
  };
  hc.acceptsShape = [maxRows, cols](int64_t rows, int64_t c) { return c == cols && rows >= 1 && rows <= maxRows; };
  hc.acceptsPointers = [](const void* in, const void* out) {
    return in != out && reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  };
  hc.alignment = 16;
  return hc;
}

kernels::DType sandboxRequestDType(const SandboxRunRequest& r) {
  if (r.elementSize == 4) return kernels::DType::Float32;
  return r.half ? kernels::DType::Float16 : kernels::DType::BFloat16;
}

std::vector<SandboxStage> runSandboxStages(const SandboxRunRequest& r) {
  std::vector<SandboxStage> out;
  try {
    HOTKERNEL_CHECK(r.harness.has_value(), "no harness asked for");
    const HarnessCandidate hc = agentHarnessCandidate(r.cubin, r.kernelName, r.harness->launch, r.rows, r.cols,
                                                      "sandboxed agent[" + r.kernelName + "]");
    HarnessOptions options;
    options.seed = r.harness->seed;
    const HarnessReport report =
        runHarness(softmaxSpec(), hc, sandboxRequestDType(r), r.rows, r.cols, r.device, options);
    for (const StageResult& s : report.stages) out.push_back({toString(s.stage), s.passed, s.detail});
  } catch (const std::exception& e) {
    out.push_back({sandboxStageNames().front(), false, std::string("the harness could not run: ") + e.what()});
  }
  return out;
}

}  // namespace hotkernel
