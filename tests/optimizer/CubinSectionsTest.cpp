// The ELF section inspector (optimizer/harness/include/hotkernel/optimizer/CubinSections.h)
// on cubins NVRTC compiles without a GPU, and the planted-kernel suite's
// sources (tests/gpu/PlantedKernels.h): every one compiles to a cubin, and
// exactly those with `__device__` variables hold writable global data; and on
// crafted ELF images: the rule is the section flags (writable and allocated),
// per-CTA shared and per-thread local memory apart.
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

// Both kinds of module-lifetime data at once: zero-filled and initialized.
const char* kCounterAndTable = R"(
__device__ unsigned int calls;
__device__ float scale[4] = {1.0f, 2.0f, 3.0f, 4.0f};
extern "C" __global__ void k(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { out[i] = calls > 100 ? 0.0f : scale[i & 3] * in[i]; scale[0] = out[i]; }
  if (i == 0) atomicAdd(&calls, 1u);
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

// A 64-bit little-endian ELF image with the given sections after the null
// one and a section name table last (what the inspector reads: the ELF header,
// the section headers, the names; contents are zeros).
struct CraftedSection {
  std::string name;
  uint32_t type;   // 1 PROGBITS, 8 NOBITS
  uint64_t flags;  // 1 SHF_WRITE, 2 SHF_ALLOC, 4 SHF_EXECINSTR
  uint64_t size;
};

template <typename T>
void put(std::string& image, size_t at, T v) {
  if (image.size() < at + sizeof v) image.resize(at + sizeof v, '\0');
  std::memcpy(&image[at], &v, sizeof v);
}

std::string craftedElf(const std::vector<CraftedSection>& sections) {
  std::string names(1, '\0');
  std::vector<uint32_t> nameAt;
  for (const CraftedSection& s : sections) {
    nameAt.push_back(static_cast<uint32_t>(names.size()));
    names += s.name + '\0';
  }
  const uint32_t shstrtabName = static_cast<uint32_t>(names.size());
  names += std::string(".shstrtab") + '\0';
  std::string image(64, '\0');
  image[0] = 0x7f, image[1] = 'E', image[2] = 'L', image[3] = 'F', image[4] = 2, image[5] = 1, image[6] = 1;
  std::vector<uint64_t> offsets;
  for (const CraftedSection& s : sections) {
    offsets.push_back(image.size());
    if (s.type != 8) image.append(s.size, '\0');
  }
  const uint64_t namesOffset = image.size();
  image += names;
  const uint64_t shoff = (image.size() + 7) / 8 * 8;
  const uint16_t shnum = static_cast<uint16_t>(sections.size() + 2);
  image.resize(shoff + 64 * shnum, '\0');
  put<uint64_t>(image, 0x28, shoff);
  put<uint16_t>(image, 0x3A, 64);
  put<uint16_t>(image, 0x3C, shnum);
  put<uint16_t>(image, 0x3E, static_cast<uint16_t>(shnum - 1));
  for (size_t i = 0; i < sections.size(); ++i) {
    const size_t h = shoff + 64 * (i + 1);
    put<uint32_t>(image, h, nameAt[i]);
    put<uint32_t>(image, h + 0x04, sections[i].type);
    put<uint64_t>(image, h + 0x08, sections[i].flags);
    put<uint64_t>(image, h + 0x18, offsets[i]);
    put<uint64_t>(image, h + 0x20, sections[i].size);
  }
  const size_t h = shoff + 64 * (shnum - 1);
  put<uint32_t>(image, h, shstrtabName);
  put<uint32_t>(image, h + 0x04, 3);  // STRTAB
  put<uint64_t>(image, h + 0x18, namesOffset);
  put<uint64_t>(image, h + 0x20, names.size());
  return image;
}

constexpr uint32_t kProgbits = 1, kNobits = 8;
constexpr uint64_t kW = 1, kA = 2, kX = 4;

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

TEST(CubinSectionsTest, GivenAStatelessNvrtcCubinWhenInspectedThenItsOnlyWritableAllocatedSectionsArePerCtaShared) {
  SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    int shared = 0;
    for (const CubinSection& s : cubinSections(cubinOf(kStateless, arch))) {
      if (!(s.writable && s.allocated) || s.size == 0) continue;
      EXPECT_TRUE(s.nobits && s.name.rfind(".nv.shared.", 0) == 0) << arch << ": " << s.name;
      EXPECT_FALSE(holdsWritableGlobalData(s)) << arch << ": " << s.name;
      ++shared;
    }
    // The tile: without the per-CTA exemption the rule would refuse every kernel using shared memory.
    EXPECT_GE(shared, 1) << arch;
  }
}

TEST(CubinSectionsTest, GivenAStatefulNvrtcCubinWhenInspectedThenEveryWritableAllocatedGlobalSectionIsReported) {
  SKIP_WITHOUT_NVRTC();
  const std::string cubin = cubinOf(kCounterAndTable);
  const std::vector<std::string> found = writableGlobalData(cubin);
  std::set<std::string> names;
  for (const CubinSection& s : cubinSections(cubin)) {
    if (s.size > 0 && s.writable && s.allocated && s.name.rfind(".nv.shared.", 0) != 0) names.insert(s.name);
  }
  EXPECT_EQ(names.count(".nv.global"), 1u) << joined(found);
  EXPECT_EQ(names.count(".nv.global.init"), 1u) << joined(found);
  EXPECT_EQ(found.size(), names.size()) << joined(found);
}

TEST(CubinSectionsTest, GivenCraftedSectionsWhenInspectedThenWritableAllocatedOnesAreRefusedWhateverTheirName) {
  const std::string image = craftedElf({
      {".text.k", kProgbits, kA | kX, 256},
      {".nv.constant0.k", kProgbits, kA, 64},
      {".nv.shared.k", kNobits, kW | kA, 2048},
      {".nv.local.k", kNobits, kW | kA, 512},
      {".hk.state", kProgbits, kW | kA, 8},
      {".scratch", kNobits, kW | kA, 16},
      {".note.hk", kProgbits, kW, 32},
  });
  const std::vector<CubinSection> sections = cubinSections(image);
  ASSERT_EQ(sections.size(), 9u);
  EXPECT_TRUE(sections[3].writable && sections[3].allocated && sections[3].nobits);
  EXPECT_EQ(writableGlobalData(image), (std::vector<std::string>{".hk.state (8 bytes)", ".scratch (16 bytes)"}));
}

TEST(CubinSectionsTest, GivenSharedOrLocalSectionsWithInitialDataWhenInspectedThenTheyAreRefused) {
  // Per-CTA and per-thread memory is never initialized: such a section with bytes in the image is not one.
  const std::string image =
      craftedElf({{".nv.shared.k", kProgbits, kW | kA, 64}, {".nv.local.k", kProgbits, kW | kA, 4}});
  EXPECT_EQ(writableGlobalData(image), (std::vector<std::string>{".nv.shared.k (64 bytes)", ".nv.local.k (4 bytes)"}));
}

TEST(CubinSectionsTest, GivenGlobalDataNamesWithoutWriteOrAllocFlagsWhenInspectedThenTheyAreStillRefused) {
  const std::string image = craftedElf({{".nv.global", kNobits, 0, 4},
                                        {".nv.global.init", kProgbits, kA, 8},
                                        {".data", kProgbits, 0, 2},
                                        {".bss.x", kNobits, kW, 1},
                                        {".bss", kNobits, kW | kA, 0}});
  EXPECT_EQ(writableGlobalData(image),
            (std::vector<std::string>{".nv.global (4 bytes)", ".nv.global.init (8 bytes)", ".data (2 bytes)",
                                      ".bss.x (1 bytes)"}));
}

TEST(CubinSectionsTest, GivenOnlyReadOnlyCraftedSectionsWhenInspectedThenNothingIsReported) {
  const std::string image = craftedElf(
      {{".text.k", kProgbits, kA | kX, 128}, {".nv.constant3", kProgbits, kA, 16}, {".nv.info.k", 0x70000000u, 0, 32}});
  EXPECT_TRUE(writableGlobalData(image).empty()) << joined(writableGlobalData(image));
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
