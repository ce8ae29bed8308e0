// Note [Agent entries are checked again at load] on a GPU: a cached agent
// kernel is served only after its sections, first runs in the sandbox process
// and the harness against ATen passed; a wrong, faulting or stateful one is
// refused, and this process's CUDA context stays usable.
#include "hotkernel/optimizer/AgentEntryCheck.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/SandboxCompile.h"
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
AgentEntryKernel referenceAgentKernel() {
  ExternalAgentOptions o;
  o.command = {"python3", std::string(HOTKERNEL_TEST_SOURCE_DIR) + "/tools/agent/reference_agent.py"};
  o.timeoutSeconds = 30;
  ExternalAgent agent(o);
  std::string why;
  AgentFailure failure = AgentFailure::None;
  const std::optional<AgentReply> reply =
      agent.propose(makeSoftmaxAgentTask(kVariant, queryDevice(0).nvrtcArch()), &why, &failure);
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

TEST(AgentEntryCheckGpuTest, GivenAKernelThatCopiesItsInputWhenCheckedAtLoadThenTheHarnessRefusesIt) {
  REQUIRE_CUDA();
  const char* src = R"(extern "C" __global__ void copy(const float* in, float* out, long long rows, long long cols) {
    for (long long r = blockIdx.x; r < rows; r += gridDim.x)
      for (long long c = threadIdx.x; c < cols; c += blockDim.x) out[r * cols + c] = in[r * cols + c];
  })";
  const std::string why = checkAgentEntry(
      {cubinOf(src), "copy", R"({"launch":{"block":256,"rowsPerBlock":1,"sharedBytes":0}})"}, keyOf(kVariant), {});
  EXPECT_NE(why.find("stage"), std::string::npos) << why;
  EXPECT_EQ(why.find("sandbox"), std::string::npos) << why;
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
