// The ELF section inspector (optimizer/harness/include/hotkernel/optimizer/CubinSections.h)
// on cubins NVRTC compiles without a GPU, and the planted-kernel suite's
// sources (tests/gpu/PlantedKernels.h): every one compiles to a cubin, and
// exactly those with `__device__` variables hold writable global data.
#include "hotkernel/optimizer/CubinSections.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "../gpu/PlantedKernels.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

const char* kStateless = R"(
extern "C" __global__ void k(const float* in, float* out, int n) {
  __shared__ float tile[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  if (i < n) out[i] = 2.0f * tile[threadIdx.x];
}
)";

const char* kCounter = R"(
__device__ unsigned int calls;
extern "C" __global__ void k(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = calls > 100 ? 0.0f : 2.0f * in[i];
  if (i == 0) atomicAdd(&calls, 1u);
}
)";

const char* kInitializedTable = R"(
__device__ float scale[4] = {1.0f, 2.0f, 3.0f, 4.0f};
extern "C" __global__ void k(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { out[i] = scale[i & 3] * in[i]; scale[0] = out[i]; }
}
)";

std::string cubinOf(const std::string& source, const std::string& arch = "sm_90a",
                    const std::vector<std::string>& defines = {}) {
  return compileToCubin(source, "k.cu", arch, defines).cubin;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

TEST(CubinSectionsTest, GivenAKernelWithoutDeviceVariablesWhenInspectedThenItHasNoWritableGlobalData) {
  SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const std::string cubin = cubinOf(kStateless, arch);
    EXPECT_TRUE(writableGlobalData(cubin).empty()) << arch << ": " << joined(writableGlobalData(cubin));
    // Its shared memory is a writable section too, and does not count.
    bool sawText = false;
    for (const CubinSection& s : cubinSections(cubin)) sawText = sawText || s.name.rfind(".text.k", 0) == 0;
    EXPECT_TRUE(sawText) << arch << ": no .text.k section found";
  }
}

TEST(CubinSectionsTest, GivenAKernelWithAnUninitializedDeviceCounterWhenInspectedThenNvGlobalIsReported) {
  SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const std::vector<std::string> found = writableGlobalData(cubinOf(kCounter, arch));
    ASSERT_EQ(found.size(), 1u) << arch << ": " << joined(found);
    EXPECT_EQ(found[0].rfind(".nv.global", 0), 0u) << found[0];
  }
}

TEST(CubinSectionsTest, GivenAKernelWithAnInitializedDeviceArrayWhenInspectedThenItsDataIsReported) {
  SKIP_WITHOUT_NVRTC();
  const std::vector<std::string> found = writableGlobalData(cubinOf(kInitializedTable));
  ASSERT_FALSE(found.empty());
  EXPECT_NE(joined(found).find(".nv.global"), std::string::npos) << joined(found);
}

TEST(CubinSectionsTest, GivenImagesThatAreNotElf64WhenInspectedThenErrorIsThrown) {
  EXPECT_THROW(cubinSections(""), Error);
  EXPECT_THROW(cubinSections("not an elf image at all, but long enough to hold a header........"), Error);
  std::string elf32(64, '\0');
  elf32[0] = 0x7f;
  elf32[1] = 'E';
  elf32[2] = 'L';
  elf32[3] = 'F';
  elf32[4] = 1;  // ELFCLASS32
  elf32[5] = 1;
  EXPECT_THROW(cubinSections(elf32), Error);
}

TEST(CubinSectionsTest, GivenACubinTruncatedInItsSectionHeadersWhenInspectedThenErrorIsThrown) {
  SKIP_WITHOUT_NVRTC();
  const std::string cubin = cubinOf(kCounter);
  ASSERT_NO_THROW(cubinSections(cubin));
  uint64_t shoff = 0;  // e_shoff: where the section header table starts
  std::memcpy(&shoff, cubin.data() + 0x28, sizeof shoff);
  ASSERT_LT(shoff + 8, cubin.size());
  EXPECT_THROW(cubinSections(cubin.substr(0, shoff + 8)), Error);
  EXPECT_THROW(cubinSections(cubin.substr(0, 80)), Error);
}

// The planted-kernel suite's sources compile for the GPUs the suite runs on,
// so a GPU run fails only on what it checks; the stateful ones are those an
// agent round would refuse (Note [Agent kernels hold no state]).
TEST(PlantedKernelSourcesTest, GivenEveryPlantedVariantWhenCompiledThenACubinResultsAndOnlyStatefulOnesHoldGlobalData) {
  SKIP_WITHOUT_NVRTC();
  const std::set<std::string> stateful = {"early-return-after-n", "state-across-calls", "race-two-ctas-a-row"};
  const std::vector<planted::Planted> all = planted::allPlanted();
  EXPECT_GE(all.size(), 14u);
  for (const planted::Planted& p : all) {
    SCOPED_TRACE(p.name);
    std::string cubin;
    ASSERT_NO_THROW(cubin = compileToCubin(planted::kSource, "planted.cu", "sm_90a", p.defines).cubin);
    ASSERT_GT(cubin.size(), 4u);
    EXPECT_EQ(cubin.compare(0, 4, "\x7f" "ELF"), 0);
    EXPECT_NE(cubin.find("planted"), std::string::npos);
    EXPECT_EQ(!writableGlobalData(cubin).empty(), stateful.count(p.name) > 0) << joined(writableGlobalData(cubin));
  }
  EXPECT_TRUE(planted::plantedDefines("no-such-variant").empty());
  EXPECT_EQ(planted::plantedDefines("wrong-stride"), std::vector<std::string>{"-DWRONG_STRIDE"});
}

}  // namespace
}  // namespace hotkernel
