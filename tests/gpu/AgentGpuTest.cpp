// The external agent path on a GPU: the reference agent's kernels go through
// sandbox compile, a sandboxed first run, the harness and the benchmark; a
// kernel that faults is stopped by the sandboxed first run, and this process's
// CUDA context stays usable.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/SandboxRun.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

ExternalAgent referenceAgent(const std::string& mode = "") {
  ExternalAgentOptions o;
  o.command = {"python3", std::string(HOTKERNEL_TEST_SOURCE_DIR) + "/tools/agent/reference_agent.py"};
  if (!mode.empty()) o.command.insert(o.command.end(), {"--mode", mode});
  o.timeoutSeconds = 30;
  return ExternalAgent(o);
}

TEST(AgentGpuTest, GivenReferenceAgentWhenTuningThenItsRepliesPassEveryStageAndAreTimed) {
  REQUIRE_CUDA();
  ExternalAgent agent = referenceAgent();
  TunerOptions o;
  o.agent = &agent;
  o.agentRounds = 2;
  TuneOutcome t = tuneSoftmax({kernels::DType::BFloat16, 1024, 4096}, 0, o);
  int agentRounds = 0, timed = 0;
  for (const CandidateRecord& c : t.metrics.candidates) {
    if (c.origin != "agent") continue;
    ++agentRounds;
    if (c.stage == "benchmark" && c.speedup) ++timed;
  }
  EXPECT_EQ(agentRounds, 2) << t.metrics.toJson().dump(2);
  EXPECT_GE(timed, 1) << t.metrics.toJson().dump(2);
}

TEST(AgentGpuTest, GivenMalformedAgentWhenTuningThenRoundsRejectedAndFamilyResultStands) {
  REQUIRE_CUDA();
  ExternalAgent agent = referenceAgent("malformed");
  TunerOptions o;
  o.agent = &agent;
  o.agentRounds = 1;
  TuneOutcome t = tuneSoftmax({kernels::DType::BFloat16, 4096, 32000}, 0, o);
  EXPECT_TRUE(t.accepted);
  EXPECT_EQ(t.family, "softmax_lastdim");
  bool rejected = false;
  for (const CandidateRecord& c : t.metrics.candidates) rejected |= c.origin == "agent" && c.stage == "reply";
  EXPECT_TRUE(rejected) << t.metrics.toJson().dump(2);
}

TEST(AgentGpuTest, GivenKernelThatFaultsWhenRunInSandboxThenRejectedAndThisProcessStillComputes) {
  REQUIRE_CUDA();
  const char* src = R"(extern "C" __global__ void bad(const float* in, float* out, long long rows, long long cols) {
    float* p = reinterpret_cast<float*>(0x10);  // an illegal address
    p[threadIdx.x] = in[0];
  })";
  std::string cubin = compileToCubin(src, "bad.cu", queryDevice(0).nvrtcArch(), {}).cubin;
  SandboxRunResult r = sandboxRun({cubin, "bad", LaunchGeometry{1, 32, 0}, 4, 64, 4, false, 0}, 30.0);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
  at::Tensor x = at::randn({8, 8}, at::kCUDA);
  EXPECT_NEAR(at::softmax(x, -1).sum().item<double>(), 8.0, 1e-4);
}

TEST(AgentGpuTest, GivenCorrectKernelWhenRunInSandboxThenOk) {
  REQUIRE_CUDA();
  const char* src = R"(extern "C" __global__ void copy(const float* in, float* out, long long rows, long long cols) {
    for (long long i = threadIdx.x; i < rows * cols; i += blockDim.x) out[i] = in[i];
  })";
  std::string cubin = compileToCubin(src, "copy.cu", queryDevice(0).nvrtcArch(), {}).cubin;
  SandboxRunResult r = sandboxRun({cubin, "copy", LaunchGeometry{1, 128, 0}, 4, 64, 4, false, 0}, 30.0);
  EXPECT_TRUE(r.ok) << r.error;
}

TEST(AgentGpuTest, GivenKernelThatHangsWhenRunInSandboxThenKilledAtTimeout) {
  REQUIRE_CUDA();
  const char* src = R"(extern "C" __global__ void spin(const float* in, float* out, long long rows, long long cols) {
    const long long start = clock64();
    while (clock64() - start < (1LL << 62)) {}  // forever, with a side effect the compiler must keep
  })";
  std::string cubin = compileToCubin(src, "spin.cu", queryDevice(0).nvrtcArch(), {}).cubin;
  const auto t0 = std::chrono::steady_clock::now();
  SandboxRunResult r = sandboxRun({cubin, "spin", LaunchGeometry{1, 32, 0}, 4, 64, 4, false, 0}, 3.0);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("did not finish"), std::string::npos) << r.error;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
}

}  // namespace
}  // namespace hotkernel
