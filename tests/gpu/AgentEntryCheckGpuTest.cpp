// Note [Agent entries are checked again at load] on a GPU: a cached agent
// kernel is served only after its sections, its first run and the five
// stages in the sandbox process and the harness against ATen here passed; a
// wrong or faulting one is refused, and this process's CUDA context stays
// usable. And the sandbox's stages themselves (Note [The harness stages in
// the sandbox process]).
#include "hotkernel/optimizer/AgentEntryCheck.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/SandboxCompile.h"
#include "hotkernel/optimizer/SandboxRun.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

const kernels::SoftmaxVariant kVariant{kernels::DType::Float32, 512, 1024};

VariantKey keyOf(const kernels::SoftmaxVariant& v) {
  return VariantKey{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
}

std::string cubinOf(const std::string& source) {
  return compileToCubin(source, "agent.cu", queryDevice(0).nvrtcArch(), {}).cubin;
}

// What an agent entry holds after a good agent round: the reference agent's reply, compiled in the sandbox.
// The reference agent's kernel for `variant` (its dtype is compiled in: HK_DTYPE).
AgentEntryKernel referenceAgentKernel(const kernels::SoftmaxVariant& variant = kVariant) {
  ExternalAgentOptions o;
  o.command = {"python3", std::string(HOTKERNEL_TEST_SOURCE_DIR) + "/tools/agent/reference_agent.py"};
  o.timeoutSeconds = 30;
  ExternalAgent agent(o);
  std::string why;
  AgentFailure failure = AgentFailure::None;
  const std::optional<AgentReply> reply =
      agent.propose(makeSoftmaxAgentTask(variant, queryDevice(0).nvrtcArch()), &why, &failure);
  if (!reply) return {};
  SandboxCompileRequest request;
  request.source = reply->source;
  request.arch = queryDevice(0).nvrtcArch();
  const SandboxCompileResult compiled = sandboxCompile(request);
  if (!compiled.compiled()) return {};
  return {compiled.cubin, reply->kernelName, nlohmann::json{{"launch", reply->launch.toJson()}}.dump()};
}

void expectThisProcessComputes() {
  const at::Tensor x = at::randn({8, 8}, at::kCUDA);
  EXPECT_NEAR(at::softmax(x, -1).sum().item<double>(), 8.0, 1e-4);
}

TEST(AgentEntryCheckGpuTest, GivenTheReferenceAgentsKernelWhenCheckedAtLoadThenItPasses) {
  REQUIRE_CUDA();
  const AgentEntryKernel kernel = referenceAgentKernel();
  ASSERT_FALSE(kernel.cubin.empty()) << "the reference agent's reply did not compile";
  const std::string why = checkAgentEntry(kernel, keyOf(kVariant), [] { return true; });
  EXPECT_EQ(why, "");
}

TEST(AgentEntryCheckGpuTest, GivenAKernelThatCopiesItsInputWhenCheckedAtLoadThenTheSandboxsSmokeStageRefusesIt) {
  REQUIRE_CUDA();
  const char* src = R"(extern "C" __global__ void copy(const float* in, float* out, long long rows, long long cols) {
    for (long long r = blockIdx.x; r < rows; r += gridDim.x)
      for (long long c = threadIdx.x; c < cols; c += blockDim.x) out[r * cols + c] = in[r * cols + c];
  })";
  const std::string why = checkAgentEntry(
      {cubinOf(src), "copy", R"({"launch":{"block":256,"rowsPerBlock":1,"sharedBytes":0}})"}, keyOf(kVariant), {});
  // Refused in the sandbox process, before this process launched it.
  EXPECT_EQ(why.rfind("in the sandbox process: smoke stage", 0), 0u) << why;
  expectThisProcessComputes();
}

TEST(AgentEntryCheckGpuTest, GivenAKernelThatFaultsWhenCheckedAtLoadThenTheSandboxRefusesItAndThisProcessComputes) {
  REQUIRE_CUDA();
  const char* src = R"(extern "C" __global__ void bad(const float* in, float* out, long long rows, long long cols) {
    float* p = reinterpret_cast<float*>(0x10);  // an illegal address
    p[threadIdx.x] = in[0];
  })";
  const std::string why = checkAgentEntry(
      {cubinOf(src), "bad", R"({"launch":{"block":32,"rowsPerBlock":1,"sharedBytes":0}})"}, keyOf(kVariant), {});
  EXPECT_NE(why.find("sandbox"), std::string::npos) << why;
  expectThisProcessComputes();
}

SandboxRunRequest harnessRequest(const AgentEntryKernel& kernel, const kernels::SoftmaxVariant& v) {
  const AgentLaunch launch = AgentLaunch::fromJson(nlohmann::json::parse(kernel.paramsJson)["launch"]);
  const kernels::LaunchGeometry g = launch.geometry(v.rows);
  SandboxRunRequest r{kernel.cubin, kernel.kernelName, LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                      v.rows, v.cols, static_cast<int>(kernels::elementSize(v.dtype)),
                      v.dtype == kernels::DType::Float16, 0};
  r.harness = SandboxHarnessRequest{launch, 0};
  return r;
}

TEST(SandboxStagesGpuTest, GivenTheReferenceAgentsKernelWhenRunInTheSandboxThenItReportsTheFiveStagesPassed) {
  REQUIRE_CUDA();
  for (const kernels::DType dtype : {kernels::DType::Float32, kernels::DType::BFloat16, kernels::DType::Float16}) {
    const kernels::SoftmaxVariant variant{dtype, 300, 1024};
    const AgentEntryKernel kernel = referenceAgentKernel(variant);  // each dtype its own kernel
    ASSERT_FALSE(kernel.cubin.empty()) << kernels::dtypeName(dtype);
    const SandboxRunResult r = sandboxRun(harnessRequest(kernel, variant));
    EXPECT_TRUE(r.ok) << kernels::dtypeName(dtype) << ": " << r.error;
    ASSERT_EQ(r.stages.size(), sandboxStageNames().size()) << r.error;
    for (size_t i = 0; i < r.stages.size(); ++i) {
      EXPECT_EQ(r.stages[i].stage, sandboxStageNames()[i]);
      EXPECT_TRUE(r.stages[i].passed) << r.stages[i].detail;
    }
  }
}

TEST(SandboxStagesGpuTest, GivenAKernelThatWritesPastItsRowsOnlyForOneRowWhenRunInTheSandboxThenAStageFailsThere) {
  REQUIRE_CUDA();
  // Correct softmax (one row a block), but with a single row it also writes past the output: only the
  // sweep's one-row shape provokes it, which the first run (on all rows) never sees.
  const char* src = R"(extern "C" __global__ void sm(const float* in, float* out, long long rows, long long cols) {
    const long long r = blockIdx.x;
    if (r >= rows) return;
    __shared__ float red[256];
    float m = -3.0e38f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[r * cols + c]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
      __syncthreads();
    }
    m = red[0]; __syncthreads();
    float sum = 0.f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(in[r * cols + c] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
      __syncthreads();
    }
    sum = red[0];
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) out[r * cols + c] = expf(in[r * cols + c] - m) / sum;
    if (rows == 1 && threadIdx.x == 0) out[cols] = 1.0f;  // just past the one-row output: its guard region
  })";
  const AgentEntryKernel kernel{cubinOf(src), "sm", R"({"launch":{"block":256,"rowsPerBlock":1,"sharedBytes":0}})"};
  const SandboxRunResult r = sandboxRun(harnessRequest(kernel, kVariant));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.failedInStage()) << r.error;
  ASSERT_GE(r.stages.size(), 2u) << r.error;
  EXPECT_TRUE(r.stages.front().passed) << r.stages.front().detail;  // the smoke stage runs all rows
  expectThisProcessComputes();
}

TEST(AgentEntryCheckGpuTest, GivenAnInterruptedCheckWhenTheYieldPointSaysStopThenItThrowsAsTuningDoes) {
  REQUIRE_CUDA();
  const AgentEntryKernel kernel = referenceAgentKernel();
  ASSERT_FALSE(kernel.cubin.empty());
  try {
    checkAgentEntry(kernel, keyOf(kVariant), [] { return false; });
    ADD_FAILURE() << "an interrupted check returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tuning interrupted"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hotkernel
