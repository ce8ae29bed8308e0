// CPU tests of the softmax family's guards, parameter space and launch model.
// SoftmaxFamilyCompileTest.cpp compiles the template itself.

#include "hotkernel/kernels/SoftmaxFamily.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

using V = SoftmaxVariant;
using P = SoftmaxParams;

// The shapes the brief and the baselines name, plus edge shapes.
std::vector<V> shapesOf(DType d) {
  return {{d, 4096, 32000}, {d, 8192, 128256}, {d, 1, 128256}, {d, 7, 13},    {d, 1, 1},
          {d, 16384, 8192}, {d, 64, 24576},    {d, 1000, 50},   {d, 3, 1001}, {d, 1, 32768},
          {d, 2, 32769},    {d, 10, 2},        {d, 5, 1 << 20}};
}

std::vector<V> allShapes() {
  std::vector<V> out;
  for (DType d : kAllDTypes) {
    for (const V& v : shapesOf(d)) out.push_back(v);
  }
  return out;
}

std::string name(const V& v) {
  return std::string(dtypeName(v.dtype)) + "[" + std::to_string(v.rows) + "," + std::to_string(v.cols) + "]";
}

TEST(SoftmaxFamilyTest, givenSaneVariants_whenGuarded_thenAccepted) {
  for (const V& v : allShapes()) EXPECT_TRUE(SoftmaxFamily::guardVariant(v)) << name(v);
  EXPECT_TRUE(SoftmaxFamily::guardVariant({DType::BFloat16, 1, SoftmaxFamily::kMaxCols}));
}

TEST(SoftmaxFamilyTest, givenDegenerateOrHugeVariants_whenGuarded_thenRefused) {
  EXPECT_FALSE(SoftmaxFamily::guardVariant({DType::Float32, 0, 10}));
  EXPECT_FALSE(SoftmaxFamily::guardVariant({DType::Float32, 10, 0}));
  EXPECT_FALSE(SoftmaxFamily::guardVariant({DType::Float32, -1, 10}));
  EXPECT_FALSE(SoftmaxFamily::guardVariant({DType::Float32, 1, SoftmaxFamily::kMaxCols + 1}));
  EXPECT_FALSE(SoftmaxFamily::guardVariant({DType::Float32, INT64_MAX / 2, 1024}));
  EXPECT_FALSE(SoftmaxFamily::guardVariant({static_cast<DType>(7), 1, 1}));
}

TEST(SoftmaxFamilyTest, givenEveryDType_whenListingAllPoints_thenUniqueAndEachIsAValidPoint) {
  for (DType d : kAllDTypes) {
    const std::vector<P> all = SoftmaxFamily::allParameterPoints(d);
    ASSERT_FALSE(all.empty());
    std::set<std::tuple<int, int, int>> seen;
    for (const P& p : all) {
      EXPECT_TRUE(seen.insert({p.threads, p.vec, p.items}).second) << p.describe();
      EXPECT_GE(p.threads, 32);
      EXPECT_LE(p.threads, 1024);
      EXPECT_EQ(p.threads & (p.threads - 1), 0) << p.describe();
      EXPECT_EQ(p.vec & (p.vec - 1), 0) << p.describe();
      EXPECT_LE(p.vec * static_cast<int>(elementSize(d)), 16) << p.describe();
      EXPECT_GE(p.items, 0);
      EXPECT_LE(p.items, 16);
      EXPECT_LE(p.items * p.vec, std::min(SoftmaxFamily::kMaxRegisterElements,
                                          SoftmaxFamily::kRegisterFileElements / p.threads))
          << p.describe();
      // A one-row variant that every point can serve: cols = vec.
      EXPECT_TRUE(SoftmaxFamily::guardParams({d, 1, p.vec}, p)) << dtypeName(d) << " " << p.describe();
    }
    EXPECT_TRUE(seen.count({1024, 1, 0})) << "no scalar streaming point";
  }
}

TEST(SoftmaxFamilyTest, givenRegisterResidentPoint_whenRowFitsOrNot_thenGuardFollowsCapacity) {
  const P p{512, 8, 8};  // 32768 bf16 elements per row
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 4096, 32000}, p));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 32768}, p));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 32776}, p));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 8192, 128256}, p));
  // The same row as streaming: any length.
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 8192, 128256}, P{512, 8, 0}));
}

TEST(SoftmaxFamilyTest, givenVectorWidth_whenColsIsNotAMultiple_thenRefusedButScalarAccepted) {
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 13}, P{32, 8, 1}));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 13}, P{32, 2, 1}));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 13}, P{32, 1, 1}));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 13}, P{32, 1, 0}));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 14}, P{32, 2, 1}));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::Float32, 4, 1001}, P{256, 4, 1}));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::Float32, 4, 1001}, P{256, 1, 4}));
}

TEST(SoftmaxFamilyTest, givenPointsOutsideTheSpace_whenGuarded_thenRefused) {
  const V v{DType::BFloat16, 4096, 32000};
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{512, 16, 4}));     // 32-byte vectors
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::Float32, 4096, 32000}, P{512, 8, 8}));  // 32 bytes of fp32
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{384, 8, 8}));      // not a power of two
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{2048, 8, 0}));     // over the CTA limit
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{16, 1, 0}));       // under a warp
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{512, 8, 5}));      // not an item choice
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{512, 3, 0}));      // not a power of two
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{512, 0, 0}));
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{1024, 8, 8}));     // 64 registers of data at 1024 threads
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{128, 8, 32}));     // over 16 items
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 0, 32000}, P{512, 8, 8}));
}

TEST(SoftmaxFamilyTest, givenNamedVariants_whenAskedForTheSpace_thenSmallNonEmptyAndEveryPointGuarded) {
  for (const V& v : allShapes()) {
    const std::vector<P> space = SoftmaxFamily::parameterSpace(v);
    ASSERT_FALSE(space.empty()) << name(v);
    EXPECT_LE(space.size(), 12u) << name(v);
    std::set<std::tuple<int, int, int>> seen;
    bool streaming = false, scalar = false;
    for (const P& p : space) {
      EXPECT_TRUE(SoftmaxFamily::guardParams(v, p)) << name(v) << " " << p.describe();
      EXPECT_TRUE(seen.insert({p.threads, p.vec, p.items}).second) << name(v) << " dup " << p.describe();
      streaming = streaming || !p.registerResident();
      scalar = scalar || p.vec == 1;
    }
    EXPECT_TRUE(streaming) << name(v) << " has no streaming point";
    EXPECT_TRUE(scalar) << name(v) << " has no vec=1 point";
  }
}

TEST(SoftmaxFamilyTest, givenLlamaVocabRowsOfBf16_whenAskedForTheSpace_thenTheFirstGuessIsRegisterResidentWide) {
  const std::vector<P> space = SoftmaxFamily::parameterSpace({DType::BFloat16, 4096, 32000});
  ASSERT_FALSE(space.empty());
  EXPECT_TRUE(space.front().registerResident()) << space.front().describe();
  EXPECT_EQ(space.front().vec, 8);
  EXPECT_GE(space.front().threads * space.front().vec * space.front().items, 32000);
  EXPECT_NE(std::find(space.begin(), space.end(), P{512, 8, 8}), space.end());
}

TEST(SoftmaxFamilyTest, givenRowsTooLongForRegisters_whenAskedForTheSpace_thenOnlyStreamingPoints) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 8192, 128256}, V{d, 1, 128256}, V{d, 5, 1 << 20}}) {
      const std::vector<P> space = SoftmaxFamily::parameterSpace(v);
      for (const P& p : space) EXPECT_FALSE(p.registerResident()) << name(v) << " " << p.describe();
      EXPECT_EQ(space.front().vec, static_cast<int>(16 / elementSize(d))) << name(v);
    }
  }
}

TEST(SoftmaxFamilyTest, givenTinyRows_whenAskedForTheSpace_thenOneWarpCtas) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 1, 1}, V{d, 7, 13}}) {
      const std::vector<P> space = SoftmaxFamily::parameterSpace(v);
      EXPECT_EQ(space.front().threads, 32) << name(v);
      EXPECT_EQ(space.front().vec, 1) << name(v);
      for (const P& p : space) EXPECT_EQ(p.threads, 32) << name(v) << " " << p.describe();
    }
  }
}

TEST(SoftmaxFamilyTest, givenInvalidVariant_whenAskedForTheSpace_thenEmpty) {
  EXPECT_TRUE(SoftmaxFamily::parameterSpace({DType::Float32, 0, 128}).empty());
  EXPECT_TRUE(SoftmaxFamily::parameterSpace({DType::Float32, 4, SoftmaxFamily::kMaxCols * 2}).empty());
}

TEST(SoftmaxFamilyTest, givenPointers_whenAlignedOrNot_thenGuardFollowsVectorWidth) {
  alignas(64) static unsigned char buffer[256];
  const P wide{512, 8, 8}, scalar{512, 1, 0};
  EXPECT_EQ(SoftmaxFamily::requiredAlignment(DType::BFloat16, wide), 16u);
  EXPECT_EQ(SoftmaxFamily::requiredAlignment(DType::Float32, P{256, 4, 4}), 16u);
  EXPECT_EQ(SoftmaxFamily::requiredAlignment(DType::Float16, scalar), 2u);
  EXPECT_TRUE(SoftmaxFamily::guardPointers(buffer, buffer + 64, DType::BFloat16, wide));
  EXPECT_TRUE(SoftmaxFamily::guardPointers(buffer, buffer, DType::BFloat16, wide));  // in place
  EXPECT_FALSE(SoftmaxFamily::guardPointers(buffer + 2, buffer + 64, DType::BFloat16, wide));
  EXPECT_FALSE(SoftmaxFamily::guardPointers(buffer, buffer + 8, DType::BFloat16, wide));
  EXPECT_TRUE(SoftmaxFamily::guardPointers(buffer + 2, buffer + 6, DType::BFloat16, scalar));
  EXPECT_FALSE(SoftmaxFamily::guardPointers(nullptr, buffer, DType::BFloat16, scalar));
  EXPECT_FALSE(SoftmaxFamily::guardPointers(buffer, nullptr, DType::BFloat16, scalar));
}

TEST(SoftmaxFamilyTest, givenAPoint_whenAskedForCompileOptions_thenTheFourDefines) {
  EXPECT_EQ(SoftmaxFamily::compileOptions(DType::BFloat16, P{512, 8, 8}),
            (std::vector<std::string>{"-DHK_DTYPE=2", "-DHK_THREADS=512", "-DHK_VEC=8", "-DHK_ITEMS=8"}));
  EXPECT_EQ(SoftmaxFamily::compileOptions(DType::Float32, P{1024, 4, 0}),
            (std::vector<std::string>{"-DHK_DTYPE=0", "-DHK_THREADS=1024", "-DHK_VEC=4", "-DHK_ITEMS=0"}));
  EXPECT_EQ(SoftmaxFamily::compileOptions(DType::Float16, P{32, 1, 1})[0], "-DHK_DTYPE=1");
  EXPECT_THROW(SoftmaxFamily::compileOptions(DType::Float32, P{512, 8, 8}), Error);
}

TEST(SoftmaxFamilyTest, givenVariants_whenAskedForGeometry_thenOneCtaPerRowOfThreads) {
  const LaunchGeometry g = SoftmaxFamily::launchGeometry({DType::BFloat16, 4096, 32000}, P{512, 8, 8});
  EXPECT_EQ(g.gridX, 4096u);
  EXPECT_EQ(g.blockX, 512u);
  EXPECT_EQ(g.sharedBytes, 0u);
  EXPECT_EQ(SoftmaxFamily::launchGeometry({DType::Float32, 1, 1}, P{32, 1, 1}).gridX, 1u);
  // Beyond cuLaunchKernel's grid limit the kernel strides over rows.
  EXPECT_EQ(SoftmaxFamily::launchGeometry({DType::Float32, int64_t{1} << 33, 2}, P{32, 1, 1}).gridX, 2147483647u);
}

TEST(SoftmaxFamilyTest, givenVariants_whenAskedForBytes_thenOneReadAndOneWrite) {
  EXPECT_DOUBLE_EQ(SoftmaxFamily::bytesMoved({DType::BFloat16, 4096, 32000}), 2.0 * 4096 * 32000 * 2);
  EXPECT_DOUBLE_EQ(SoftmaxFamily::bytesMoved({DType::Float32, 8192, 128256}), 2.0 * 8192 * 128256 * 4);
}

TEST(SoftmaxFamilyTest, givenDTypes_whenAskedForTolerance_thenOneUlpOfTheOutputTypeOrFp32Noise) {
  EXPECT_DOUBLE_EQ(SoftmaxFamily::tolerance(DType::BFloat16, 32000), 1.0 / 256);
  EXPECT_DOUBLE_EQ(SoftmaxFamily::tolerance(DType::Float16, 32000), 1.0 / 2048);
  EXPECT_LE(SoftmaxFamily::tolerance(DType::Float32, 128256), 2e-6);
  EXPECT_GT(SoftmaxFamily::tolerance(DType::Float32, 128256), 0.0);
}

TEST(SoftmaxFamilyTest, givenParams_whenJsonRoundTripped_thenEqual) {
  for (const P& p : SoftmaxFamily::allParameterPoints(DType::BFloat16)) {
    EXPECT_EQ(P::fromJson(p.toJson()), p);
    EXPECT_EQ(P::fromJson(nlohmann::json::parse(p.toJson().dump())), p);
  }
  EXPECT_EQ((P{512, 8, 8}.toJson().dump()), R"({"items":8,"threads":512,"vec":8})");
}

TEST(SoftmaxFamilyTest, givenMalformedJson_whenParsed_thenThrows) {
  EXPECT_THROW(P::fromJson(nlohmann::json::array()), Error);
  EXPECT_THROW(P::fromJson({{"threads", 512}, {"vec", 8}}), Error);
  EXPECT_THROW(P::fromJson({{"threads", "512"}, {"vec", 8}, {"items", 0}}), Error);
  EXPECT_THROW(P::fromJson({{"threads", 512.5}, {"vec", 8}, {"items", 0}}), Error);
}

TEST(SoftmaxFamilyTest, givenParams_whenDescribed_thenNamesEveryFieldAndTheAlgorithm) {
  EXPECT_EQ(P({512, 8, 8}).describe(), "threads=512 vec=8 items=8 (register-resident)");
  EXPECT_EQ(P({1024, 4, 0}).describe(), "threads=1024 vec=4 items=0 (streaming)");
}

TEST(SoftmaxFamilyTest, givenTheFamily_whenAskedForSource_thenTheEmbeddedTemplate) {
  const std::string s = SoftmaxFamily::source();
  EXPECT_NE(s.find(SoftmaxFamily::kKernelName), std::string::npos);
  EXPECT_NE(s.find("__launch_bounds__(HK_THREADS)"), std::string::npos);
}

}  // namespace
}  // namespace hotkernel::kernels
