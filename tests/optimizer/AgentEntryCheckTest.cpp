// Note [Agent entries are checked again at load] without a GPU: what the
// check refuses before any launch (the cached cubin's sections, its launch
// parameters, the variant), so a bad entry never reaches the sandbox or the
// harness. The launches themselves: tests/gpu/AgentEntryCheckGpuTest.cpp.
#include "hotkernel/optimizer/AgentEntryCheck.h"

#include <gtest/gtest.h>

#include <string>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

const char* kStatefulCopy = R"(
__device__ unsigned long long launches;
extern "C" __global__ void copy(const float* in, float* out, long long rows, long long cols) {
  for (long long i = threadIdx.x; i < rows * cols; i += blockDim.x) out[i] = in[i];
  if (threadIdx.x == 0) atomicAdd(&launches, 1ull);
}
)";

const char* kLaunch = R"({"launch":{"block":128,"rowsPerBlock":1,"sharedBytes":0}})";

VariantKey softmaxKey(int device = 0) {
  return VariantKey{static_cast<int32_t>(kernels::DType::Float32), device, 64, 256};
}

TEST(AgentEntryCheckTest, GivenACachedAgentCubinWithDeviceStateWhenCheckedThenRefusedBeforeAnyLaunch) {
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  const std::string cubin = compileToCubin(kStatefulCopy, "copy.cu", "sm_90a", {}).cubin;
  // Device 0 on a machine without one: only a launch would notice, and none happens.
  const std::string why = checkAgentEntry({cubin, "copy", kLaunch}, softmaxKey(), {});
  EXPECT_NE(why.find("writable global data"), std::string::npos) << why;
  EXPECT_NE(why.find(".nv.global"), std::string::npos) << why;
}

TEST(AgentEntryCheckTest, GivenACachedAgentEntryWhoseCubinIsNotElfWhenCheckedThenRefusedAsUnreadable) {
  const std::string why = checkAgentEntry({"not a cubin", "copy", kLaunch}, softmaxKey(), {});
  EXPECT_NE(why.find("unreadable cubin"), std::string::npos) << why;
}

TEST(AgentEntryCheckTest, GivenLaunchParametersThatBreakTheProtocolWhenCheckedThenRefused) {
  for (const char* params : {"{}", "not json", R"({"launch":{"block":0,"rowsPerBlock":1,"sharedBytes":0}})",
                             R"({"launch":{"block":128,"rowsPerBlock":1,"sharedBytes":-1}})"}) {
    const std::string why = checkAgentEntry({"\x7f" "ELF", "copy", params}, softmaxKey(), {});
    EXPECT_NE(why.find("unreadable launch parameters"), std::string::npos) << params << ": " << why;
  }
}

TEST(AgentEntryCheckTest, GivenVariantsAnAgentKernelCannotServeWhenCheckedThenRefused) {
  VariantKey middle = softmaxKey();
  middle.inner = 8;
  EXPECT_NE(checkAgentEntry({"", "copy", kLaunch}, middle, {}), "");
  EXPECT_NE(checkAgentEntry({"", "copy", kLaunch}, softmaxKey(-1), {}), "");
}

}  // namespace
}  // namespace hotkernel
