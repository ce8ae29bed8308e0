// Tests of the rms_norm family: guards, whitelist, parameter space, options,
// geometry, bytes, tolerance (CPU), and the template compiled with NVRTC for
// sm_90a / sm_80 without spills (CPU too: NVRTC needs no GPU).

#include "hotkernel/kernels/RmsNormFamily.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <tuple>

#include "CompileCache.h"
#include "NormTestUtil.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels {
namespace {

using V = RmsNormVariant;
using P = RmsNormParams;

std::vector<V> allShapes() {
  std::vector<V> out;
  for (DType d : kAllDTypes) {
    for (bool w : {true, false}) {
      for (auto [rows, cols] : testutil::namedNormShapes()) out.push_back({d, rows, cols, w});
    }
  }
  return out;
}

std::string name(const V& v) {
  return std::string(dtypeName(v.dtype)) + "[" + std::to_string(v.rows) + "," + std::to_string(v.cols) + "]" +
         (v.hasWeight ? " w" : "");
}

// (Empty, oversized and unknown variants: FamilyConformanceTest.)
TEST(RmsNormFamilyTest, GivenAnOverflowingSizeOrTwoToThe31RowsWhenGuardedThenRefused) {
  // rows * cols * elementSize overflows int64.
  EXPECT_FALSE(RmsNormFamily::guardVariant({DType::BFloat16, int64_t{1} << 33, int64_t{1} << 30}));
  EXPECT_TRUE(RmsNormFamily::guardVariant({DType::BFloat16, (int64_t{1} << 31) - 1, int64_t{1} << 30}));
  // More rows than one launch's CTAs cover (Note [One row group a CTA]), even short ones.
  EXPECT_FALSE(RmsNormFamily::guardVariant({DType::Float32, int64_t{1} << 31, 2}));
  EXPECT_TRUE(RmsNormFamily::parameterSpace({DType::Float32, int64_t{1} << 31, 2}).empty());
}

// (Every point unique, well-formed and serving a row of one vector: FamilyConformanceTest.)
TEST(RmsNormFamilyTest, GivenEveryDTypeWhenListingAllPointsThenWithinTheRegisterBudget) {
  for (DType d : kAllDTypes) {
    const std::vector<P> all = RmsNormFamily::allParameterPoints(d);
    ASSERT_FALSE(all.empty());
    std::set<std::tuple<int, int, int, int>> seen;
    for (const P& p : all) {
      seen.insert({p.threads, p.vec, p.items, p.rowsPerCta});
      EXPECT_GE(p.items, 0);
      EXPECT_LE(p.items, 16);
      if (p.rowsPerCta > 1) EXPECT_GE(p.items, 1) << p.describe();
      // Note [Norm register budget]: the row's share as fp32 within half the registers.
      EXPECT_LE(p.items * p.vec, std::min(128, 32768 / p.threads)) << dtypeName(d) << " " << p.describe();
    }
    EXPECT_TRUE(seen.count({1024, 1, 0, 1})) << "no scalar streaming point";
    EXPECT_TRUE(seen.count({1024, 16 / static_cast<int>(elementSize(d)), 0, 1})) << "no 16-byte streaming point";
    EXPECT_TRUE(seen.count({128, 1, 1, 32})) << "no four-threads-per-row point";
  }
}

TEST(RmsNormFamilyTest, GivenTheRegisterBudgetWhenAskedForTheLongestResidentRowThen32KiForEveryDType) {
  for (DType d : kAllDTypes) {
    int64_t longest = 0;
    for (const P& p : RmsNormFamily::allParameterPoints(d)) {
      longest = std::max<int64_t>(longest, static_cast<int64_t>(p.rowThreads()) * p.vec * p.items);
    }
    EXPECT_EQ(longest, 32768) << dtypeName(d);
  }
  // bf16 rows of 16384 fit 1024 threads x 8 x 2, and 32768 x 8 x 4 (32 fp32 values a thread).
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::BFloat16, 16384, 16384}, P{1024, 8, 2}));
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::BFloat16, 16384, 32768}, P{1024, 8, 4}));
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::BFloat16, 16384, 32768}, P{1024, 8, 6}));  // 48 values
}

TEST(RmsNormFamilyTest, GivenRegisterResidentPointWhenRowFitsOrNotThenGuardFollowsCapacity) {
  const P p{256, 8, 4};  // 8192 bf16 elements per row
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::BFloat16, 16384, 8192}, p));
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::BFloat16, 16384, 8184}, p));
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::BFloat16, 16384, 8200}, p));
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::BFloat16, 16384, 8200}, P{256, 8, 0}));  // streaming: any length
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::BFloat16, 1, RmsNormFamily::kMaxCols}, P{1024, 8, 0}));
}

TEST(RmsNormFamilyTest, GivenOddColsWhenGuardedThenOnlyScalarPointsAccepted) {
  for (DType d : kAllDTypes) {
    EXPECT_FALSE(RmsNormFamily::guardParams({d, 7, 13}, P{32, 2, 1})) << dtypeName(d);
    EXPECT_TRUE(RmsNormFamily::guardParams({d, 7, 13}, P{32, 1, 1})) << dtypeName(d);
    EXPECT_TRUE(RmsNormFamily::guardParams({d, 7, 13}, P{32, 1, 0})) << dtypeName(d);
    EXPECT_FALSE(RmsNormFamily::guardParams({d, 33, 4097}, P{1024, 4, 0})) << dtypeName(d);
    EXPECT_TRUE(RmsNormFamily::guardParams({d, 33, 4097}, P{1024, 1, 0})) << dtypeName(d);
    EXPECT_TRUE(RmsNormFamily::guardParams({d, 33, 4097}, P{1024, 1, 6})) << dtypeName(d);
  }
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::BFloat16, 4, 4100}, P{512, 8, 1}));  // 4100 % 8 != 0
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::BFloat16, 4, 4100}, P{512, 4, 3}));
}

TEST(RmsNormFamilyTest, GivenPointsOutsideTheSpaceWhenGuardedThenRefused) {
  const V v{DType::BFloat16, 4096, 4096};
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{512, 16, 1}));                          // 32-byte vectors
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::Float32, 4096, 4096}, P{512, 8, 1}));  // 32 bytes of fp32
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{384, 8, 2}));                           // not a power of two
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{2048, 8, 0}));                          // over the CTA limit
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{16, 1, 0}));                            // under a warp
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{512, 8, 5}));                           // not an item choice
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{512, 3, 0}));
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{512, 0, 0}));
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{1024, 8, 6}));   // 48 fp32 values at 1024 threads
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{128, 8, 0, 8}));  // multi-row points are register-resident
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{128, 8, 1, 2}));  // 64 threads per row span warps
  EXPECT_FALSE(RmsNormFamily::guardParams(v, P{64, 8, 1, 4}));   // not the multi-row CTA size
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::BFloat16, 0, 4096}, P{512, 8, 1}));
}

// Every space also holds a streaming point and launches without shared memory;
// the rest of the contract of a space is FamilyConformanceTest's.
TEST(RmsNormFamilyTest, GivenNamedShapesAndASweepWhenAskedForTheSpaceThenAStreamingPointAndNoSharedMemory) {
  std::vector<V> variants = allShapes();
  std::vector<int64_t> colsList;
  for (int64_t c = 1; c <= 300; ++c) colsList.push_back(c);
  for (int64_t c = 256; c <= (int64_t{1} << 20); c *= 2) {
    for (int64_t d : {-1, 0, 1, 8, 24}) colsList.push_back(c + d);
  }
  for (DType d : kAllDTypes) {
    for (int64_t rows : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{100000}}) {
      for (int64_t cols : colsList) variants.push_back({d, rows, cols});
    }
  }
  for (const V& v : variants) {
    bool streaming = false;
    for (const P& p : RmsNormFamily::parameterSpace(v)) {
      streaming = streaming || !p.registerResident();
      ASSERT_EQ(RmsNormFamily::launchGeometry(v, p).sharedBytes, 0u) << name(v) << " " << p.describe();
    }
    ASSERT_TRUE(streaming) << name(v) << " has no streaming point";
  }
}

TEST(RmsNormFamilyTest, GivenLlamaHiddenRowsWhenAskedForTheSpaceThenTheFirstGuessIsRegisterResidentAt16Bytes) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 16384, 8192}, V{d, 4096, 4096}, V{d, 1, 8192}}) {
      const std::vector<P> space = RmsNormFamily::parameterSpace(v);
      ASSERT_FALSE(space.empty()) << name(v);
      EXPECT_TRUE(space.front().registerResident()) << name(v) << " " << space.front().describe();
      EXPECT_EQ(space.front().vec * static_cast<int>(elementSize(d)), 16) << name(v);
      EXPECT_GE(static_cast<int64_t>(space.front().rowThreads()) * space.front().vec * space.front().items, v.cols);
    }
  }
  // bf16 [16384, 8192]: 256 threads x 8 x 4, as softmax's best for this shape.
  EXPECT_EQ(RmsNormFamily::parameterSpace({DType::BFloat16, 16384, 8192}).front(), (P{256, 8, 4}));
}

TEST(RmsNormFamilyTest, GivenRowsTooLongForRegistersWhenAskedForTheSpaceThenOnlyStreamingPoints) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 1, 1000003}, V{d, 5, 1 << 20}, V{d, 2, 32769}, V{d, 64, 40960}}) {
      const std::vector<P> space = RmsNormFamily::parameterSpace(v);
      ASSERT_FALSE(space.empty()) << name(v);
      for (const P& p : space) EXPECT_FALSE(p.registerResident()) << name(v) << " " << p.describe();
    }
    EXPECT_EQ(RmsNormFamily::parameterSpace({d, 1, 1000003}).front().vec, 1);  // odd
    EXPECT_EQ(RmsNormFamily::parameterSpace({d, 5, 1 << 20}).front().vec, static_cast<int>(16 / elementSize(d)));
  }
}

TEST(RmsNormFamilyTest, GivenTinyRowsWhenAskedForTheSpaceThenOneWarpCtas) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 1, 1}, V{d, 7, 13}}) {
      const std::vector<P> space = RmsNormFamily::parameterSpace(v);
      ASSERT_FALSE(space.empty()) << name(v);
      EXPECT_EQ(space.front().vec, 1) << name(v);
      for (const P& p : space) EXPECT_EQ(p.threads, 32) << name(v) << " " << p.describe();
    }
  }
}

TEST(RmsNormFamilyTest, GivenManyShortRowsWhenAskedForTheSpaceThenSeveralRowsPerCtaComeFirst) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 32768, 128}, V{d, 4096, 1024}, V{d, 1000, 50}}) {
      const std::vector<P> space = RmsNormFamily::parameterSpace(v);
      ASSERT_FALSE(space.empty()) << name(v);
      EXPECT_GT(space.front().rowsPerCta, 1) << name(v) << " " << space.front().describe();
      EXPECT_GE(space.front().rowThreads() * space.front().vec * space.front().items, v.cols) << name(v);
    }
  }
  for (const V& v : {V{DType::BFloat16, 16384, 8192}, V{DType::BFloat16, 7, 13}, V{DType::BFloat16, 100, 128}}) {
    for (const P& p : RmsNormFamily::parameterSpace(v)) EXPECT_EQ(p.rowsPerCta, 1) << name(v) << " " << p.describe();
  }
}

TEST(RmsNormFamilyTest, GivenPointersWhenAlignedOrNotThenGuardFollowsVectorWidthAndTheWeightFlag) {
  alignas(64) static unsigned char buffer[512];
  float* rstd = reinterpret_cast<float*>(buffer + 256);
  const V withWeight{DType::BFloat16, 4, 4096, true}, noWeight{DType::BFloat16, 4, 4096, false};
  const P wide{256, 8, 2}, scalar{256, 1, 0};
  EXPECT_EQ(RmsNormFamily::requiredAlignment(DType::BFloat16, wide), 16u);
  EXPECT_EQ(RmsNormFamily::requiredAlignment(DType::Float32, P{256, 4, 4}), 16u);
  EXPECT_EQ(RmsNormFamily::requiredAlignment(DType::Float16, scalar), 2u);
  EXPECT_TRUE(RmsNormFamily::guardPointers(buffer, buffer + 64, buffer + 128, rstd, withWeight, wide));
  EXPECT_TRUE(RmsNormFamily::guardPointers(buffer, buffer + 64, buffer, rstd, withWeight, wide));  // in place
  EXPECT_FALSE(RmsNormFamily::guardPointers(buffer + 2, buffer + 64, buffer + 128, rstd, withWeight, wide));
  EXPECT_FALSE(RmsNormFamily::guardPointers(buffer, buffer + 72, buffer + 128, rstd, withWeight, wide));
  EXPECT_FALSE(RmsNormFamily::guardPointers(buffer, buffer + 64, buffer + 136, rstd, withWeight, wide));
  EXPECT_FALSE(RmsNormFamily::guardPointers(buffer, nullptr, buffer + 128, rstd, withWeight, wide));
  EXPECT_TRUE(RmsNormFamily::guardPointers(buffer, nullptr, buffer + 128, rstd, noWeight, wide));
  EXPECT_TRUE(RmsNormFamily::guardPointers(buffer, buffer + 72, buffer + 128, rstd, noWeight, wide));  // ignored
  EXPECT_FALSE(RmsNormFamily::guardPointers(buffer, nullptr, buffer + 128, nullptr, noWeight, wide));
  EXPECT_FALSE(RmsNormFamily::guardPointers(buffer, nullptr, buffer + 128,
                                            reinterpret_cast<const float*>(buffer + 258), noWeight, wide));
  EXPECT_TRUE(RmsNormFamily::guardPointers(buffer + 2, buffer + 6, buffer + 10, rstd, withWeight, scalar));
  EXPECT_FALSE(RmsNormFamily::guardPointers(nullptr, buffer, buffer, rstd, withWeight, scalar));
  EXPECT_FALSE(RmsNormFamily::guardPointers(buffer, buffer, nullptr, rstd, withWeight, scalar));
}

TEST(RmsNormFamilyTest, GivenAPointWhenAskedForCompileOptionsThenTheSixDefines) {
  EXPECT_EQ(RmsNormFamily::compileOptions(DType::BFloat16, P{256, 8, 4}, true),
            (std::vector<std::string>{"-DHK_DTYPE=2", "-DHK_THREADS=256", "-DHK_ROWS=1", "-DHK_VEC=8", "-DHK_ITEMS=4",
                                      "-DHK_HAS_WEIGHT=1"}));
  EXPECT_EQ(RmsNormFamily::compileOptions(DType::Float32, P{1024, 4, 0}, false),
            (std::vector<std::string>{"-DHK_DTYPE=0", "-DHK_THREADS=1024", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=0",
                                      "-DHK_HAS_WEIGHT=0"}));
  EXPECT_EQ(RmsNormFamily::compileOptions(DType::Float16, P{128, 8, 1, 8}, true)[2], "-DHK_ROWS=8");
  EXPECT_THROW(RmsNormFamily::compileOptions(DType::Float32, P{512, 8, 1}, true), Error);
  EXPECT_THROW(RmsNormFamily::compileOptions(DType::BFloat16, P{1024, 8, 6}, false), Error);
}

TEST(RmsNormFamilyTest, GivenAVariantsColumnsWhenAskedForCompileOptionsThenTheyAreSpecialized) {
  const std::vector<std::string> o = RmsNormFamily::compileOptions(DType::BFloat16, P{512, 8, 0}, true, 8192);
  ASSERT_EQ(o.size(), 7u);
  EXPECT_EQ(o.back(), "-DHK_COLS=8192LL");
  EXPECT_EQ(std::vector<std::string>(o.begin(), o.end() - 1), RmsNormFamily::compileOptions(DType::BFloat16,
                                                                                           P{512, 8, 0}, true));
  EXPECT_THROW(RmsNormFamily::compileOptions(DType::BFloat16, P{512, 8, 0}, true, -1), Error);
  EXPECT_THROW(RmsNormFamily::compileOptions(DType::BFloat16, P{512, 8, 0}, true, RmsNormFamily::kMaxCols + 1),
               Error);
}

// The streaming point twice as wide as the smallest covering one (Note [One row
// group a CTA]: 512 x vec 8 on 8192 columns was the closest to torch.compile).
TEST(RmsNormFamilyTest, GivenEightThousandColumnsWhenAskedForTheSpaceThenBothStreamingWidthsAreIn) {
  const std::vector<P> space = RmsNormFamily::parameterSpace({DType::BFloat16, 16384, 8192, true});
  EXPECT_NE(std::find(space.begin(), space.end(), P{256, 8, 0}), space.end());
  EXPECT_NE(std::find(space.begin(), space.end(), P{512, 8, 0}), space.end());
}

TEST(RmsNormFamilyTest, GivenVariantsWhenAskedForGeometryThenOneCtaPerRowsPerCtaRows) {
  const LaunchGeometry g = RmsNormFamily::launchGeometry({DType::BFloat16, 16384, 8192}, P{256, 8, 4});
  EXPECT_EQ(g.gridX, 16384u);
  EXPECT_EQ(g.blockX, 256u);
  EXPECT_EQ(g.sharedBytes, 0u);
  EXPECT_EQ(RmsNormFamily::launchGeometry({DType::Float32, 1, 1}, P{32, 1, 1}).gridX, 1u);
  const LaunchGeometry multi = RmsNormFamily::launchGeometry({DType::BFloat16, 32769, 128}, P{128, 8, 1, 8});
  EXPECT_EQ(multi.gridX, 4097u);
  EXPECT_EQ(multi.blockX, 128u);
  EXPECT_EQ(RmsNormFamily::launchGeometry({DType::Float32, (int64_t{1} << 31) - 1, 2}, P{32, 1, 1}).gridX,
            2147483647u);
  // Past the guard the grid would not cover the rows: a bug, not a clamp.
  EXPECT_THROW(RmsNormFamily::launchGeometry({DType::Float32, int64_t{1} << 33, 2}, P{32, 1, 1}), Error);
}

// --- split rows over a cluster (Note [Split norm rows over a cluster]) ----------------------

TEST(RmsNormFamilyTest, GivenClusterPointsWhenGuardedThenTheClustersRowFitsAndTheGridStaysWithinALaunch) {
  const V few{DType::Float32, 8, int64_t{1} << 22, true};
  EXPECT_TRUE(RmsNormFamily::guardParams(few, P{1024, 4, 0, 1, 16}));
  EXPECT_TRUE(RmsNormFamily::guardParams(few, P{512, 4, 0, 1, 2}));
  // A register slice: the cluster's row within cluster * threads * vec * items.
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::Float32, 8, 524288}, P{1024, 4, 8, 1, 16}));
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::Float32, 8, 524292}, P{1024, 4, 8, 1, 16}));
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::Float32, 8, 524288}, P{1024, 4, 8, 1, 8}));
  // The grid is rows * cluster CTAs.
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::Float32, ((int64_t{1} << 31) - 1) / 16, 16}, P{512, 4, 0, 1, 16}));
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::Float32, (int64_t{1} << 31) / 16, 16}, P{512, 4, 0, 1, 16}));
  // Outside the whitelist: cluster sizes, several rows a CTA, narrow or small streamed slices, CTA sizes.
  EXPECT_FALSE(RmsNormFamily::guardParams(few, P{1024, 4, 0, 1, 3}));
  EXPECT_FALSE(RmsNormFamily::guardParams(few, P{1024, 4, 0, 1, 32}));
  EXPECT_FALSE(RmsNormFamily::guardParams(few, P{128, 4, 1, 8, 4}));
  EXPECT_FALSE(RmsNormFamily::guardParams(few, P{1024, 2, 0, 1, 4}));
  EXPECT_FALSE(RmsNormFamily::guardParams(few, P{256, 4, 0, 1, 4}));
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::Float32, 8, 65536}, P{128, 4, 16, 1, 4}));
  // The register budget holds for cluster points too (1024 threads: 32 fp32 values a thread).
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::Float32, 8, 65536}, P{1024, 4, 12, 1, 4}));
  for (DType d : kAllDTypes) {
    size_t clusterPoints = 0;
    for (const P& p : RmsNormFamily::allParameterPoints(d)) {
      if (p.cluster == 1) continue;
      ++clusterPoints;
      EXPECT_EQ(p.rowsPerCta, 1) << p.describe();
      EXPECT_EQ(p.minComputeCapability(), 90) << p.describe();
      EXPECT_LE(p.items * p.vec, std::min(128, 32768 / p.threads)) << dtypeName(d) << " " << p.describe();
    }
    EXPECT_GT(clusterPoints, 0u) << dtypeName(d);
  }
  EXPECT_EQ((P{1024, 8, 0}).minComputeCapability(), 0);
}

TEST(RmsNormFamilyTest, GivenClusterParamsWhenWrittenAsJsonOrTextThenTheClusterOnlyWhenSplit) {
  EXPECT_EQ((P{1024, 8, 0, 1, 16}.toJson().dump()),
            R"({"cluster":16,"items":0,"rowsPerCta":1,"threads":1024,"vec":8})");
  EXPECT_EQ(P::fromJson(P{1024, 8, 0, 1, 16}.toJson()), (P{1024, 8, 0, 1, 16}));
  EXPECT_EQ(P::fromJson({{"threads", 1024}, {"vec", 8}, {"items", 0}}).cluster, 1);
  EXPECT_THROW(P::fromJson({{"threads", 1024}, {"vec", 8}, {"items", 0}, {"cluster", "16"}}), Error);
  EXPECT_EQ(P({1024, 8, 0, 1, 16}).describe(), "threads=1024 vec=8 items=0 cluster=16 (streaming)");
  EXPECT_NE((P{1024, 8, 0, 1, 16}), (P{1024, 8, 0}));
}

TEST(RmsNormFamilyTest, GivenFewLongRowsOnSm90WhenAskedForTheSpaceThenSplitRowPointsComeFirst) {
  // [8, 4M] fp32: 16 CTAs a row make 128, a wave; slices of 64K vectors are streamed.
  const V eight{DType::Float32, 8, int64_t{1} << 22, true};
  const std::vector<P> space = RmsNormFamily::parameterSpace(eight, 90);
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(space.front(), (P{1024, 4, 0, 1, 16}));
  size_t split = 0;
  for (const P& p : space) {
    EXPECT_TRUE(RmsNormFamily::guardParams(eight, p)) << p.describe();
    split += p.cluster > 1 ? 1 : 0;
  }
  EXPECT_GE(split, 2u);
  EXPECT_LE(split, 6u);
  EXPECT_NE(std::find(space.begin(), space.end(), P{1024, 4, 0}), space.end()) << "the one-CTA streaming point";
  EXPECT_TRUE(std::any_of(space.begin(), space.end(), [](const P& p) { return p.vec == 1; }));
  // 32 rows: 4 CTAs a row make the wave; one row of bf16 65536: no cluster reaches it, the widest first,
  // its 512-vector slice held in registers by 1024 threads of one item.
  EXPECT_EQ(RmsNormFamily::parameterSpace({DType::BFloat16, 32, 1 << 20, true}, 90).front().cluster, 4);
  EXPECT_EQ(RmsNormFamily::parameterSpace({DType::BFloat16, 1, 65536, true}, 90).front(), (P{1024, 8, 1, 1, 16}));
  // No cluster point: before sm_90, for many rows, for short rows.
  for (int cc : {0, 80, 89}) {
    for (const P& p : RmsNormFamily::parameterSpace(eight, cc)) EXPECT_EQ(p.cluster, 1) << cc << " " << p.describe();
  }
  for (const P& p : RmsNormFamily::parameterSpace({DType::BFloat16, 16384, 8192, true}, 90)) {
    EXPECT_EQ(p.cluster, 1) << p.describe();
  }
  for (const P& p : RmsNormFamily::parameterSpace({DType::BFloat16, 8, 2048, true}, 90)) {
    EXPECT_EQ(p.cluster, 1) << p.describe();
  }
  // Decode's hidden sizes keep their one-CTA spaces (Note [Norm split-row points]).
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 4096}, {32, 4096}, {1, 8192}, {16, 16384}, {8, 32768}}) {
    const V v{DType::BFloat16, rows, cols, true};
    EXPECT_EQ(RmsNormFamily::parameterSpace(v, 90), RmsNormFamily::parameterSpace(v, 0)) << name(v);
  }
}

TEST(RmsNormFamilyTest, GivenAClusterPointWhenAskedForGeometryAndOptionsThenAClusterARowAndTheDefine) {
  const LaunchGeometry g = RmsNormFamily::launchGeometry({DType::Float32, 8, int64_t{1} << 22}, P{1024, 4, 0, 1, 16});
  EXPECT_EQ(g.gridX, 128u);
  EXPECT_EQ(g.blockX, 1024u);
  EXPECT_EQ(g.sharedBytes, 0u);
  const std::vector<std::string> o = RmsNormFamily::compileOptions(DType::Float32, P{1024, 4, 0, 1, 16}, true);
  EXPECT_NE(std::find(o.begin(), o.end(), "-DHK_CLUSTER=16"), o.end());
  for (const std::string& option : RmsNormFamily::compileOptions(DType::Float32, P{1024, 4, 0}, true)) {
    EXPECT_EQ(option.rfind("-DHK_CLUSTER", 0), std::string::npos) << option;
  }
}

// --- split rows over a cooperative grid (Note [Split norm rows over a cooperative grid]) -------

// A grid-split point: `split` CTAs a row, streamed, at the dtype's widest vector.
P gridPoint(int threads, int vec, int split) { return P{threads, vec, 0, 1, 1, split}; }

TEST(RmsNormFamilyTest, GivenGridSplitPointsWhenGuardedThenStreamedWidestSlicesAndAGridOfAtMost1024Ctas) {
  const V four{DType::BFloat16, 4, int64_t{1} << 21, true};
  EXPECT_TRUE(RmsNormFamily::guardParams(four, gridPoint(1024, 8, 32)));
  EXPECT_TRUE(RmsNormFamily::guardParams(four, gridPoint(512, 8, 64)));
  // The grid is rows * split CTAs, at most detail::kNormMaxGridCtas (the workspace's bound).
  EXPECT_TRUE(RmsNormFamily::guardParams({DType::BFloat16, 16, 1 << 20}, gridPoint(1024, 8, 64)));
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::BFloat16, 17, 1 << 20}, gridPoint(1024, 8, 64)));
  // Outside the whitelist: register slices, narrow vectors, several rows a CTA, with a cluster, other
  // splits and CTA sizes.
  EXPECT_FALSE(RmsNormFamily::guardParams(four, P{1024, 8, 4, 1, 1, 32}));
  EXPECT_FALSE(RmsNormFamily::guardParams(four, gridPoint(1024, 4, 32)));
  EXPECT_FALSE(RmsNormFamily::guardParams(four, P{128, 8, 0, 8, 1, 32}));
  EXPECT_FALSE(RmsNormFamily::guardParams(four, P{1024, 8, 0, 1, 4, 32}));
  EXPECT_FALSE(RmsNormFamily::guardParams(four, gridPoint(1024, 8, 24)));
  EXPECT_FALSE(RmsNormFamily::guardParams(four, gridPoint(1024, 8, 128)));
  EXPECT_FALSE(RmsNormFamily::guardParams(four, gridPoint(256, 8, 32)));
  // Columns the widest vector does not divide.
  EXPECT_FALSE(RmsNormFamily::guardParams({DType::BFloat16, 4, (int64_t{1} << 21) + 4}, gridPoint(1024, 8, 32)));
  for (DType d : kAllDTypes) {
    size_t gridPoints = 0;
    for (const P& p : RmsNormFamily::allParameterPoints(d)) {
      if (p.split == 1) continue;
      ++gridPoints;
      EXPECT_EQ(p.items, 0) << p.describe();
      EXPECT_EQ(p.cluster, 1) << p.describe();
      EXPECT_EQ(p.vec, static_cast<int>(16 / elementSize(d))) << p.describe();
      EXPECT_EQ(p.minComputeCapability(), 70) << p.describe();
    }
    EXPECT_EQ(gridPoints, 10u) << dtypeName(d) << ": splits 4 to 64 at 512 and 1024 threads";
  }
}

TEST(RmsNormFamilyTest, GivenGridSplitParamsWhenWrittenAsJsonOrTextThenTheSplitOnlyWhenGridSplit) {
  EXPECT_EQ(gridPoint(1024, 8, 32).toJson().dump(), R"({"items":0,"rowsPerCta":1,"split":32,"threads":1024,"vec":8})");
  EXPECT_EQ(P::fromJson(gridPoint(1024, 8, 32).toJson()), gridPoint(1024, 8, 32));
  EXPECT_EQ(P::fromJson({{"threads", 1024}, {"vec", 8}, {"items", 0}}).split, 1);
  EXPECT_EQ((P{1024, 8, 0}.toJson().count("split")), 0u) << "one-CTA entries keep their bytes";
  EXPECT_THROW(P::fromJson({{"threads", 1024}, {"vec", 8}, {"items", 0}, {"split", 32.5}}), Error);
  EXPECT_EQ(gridPoint(1024, 8, 32).describe(), "threads=1024 vec=8 items=0 split=32 (streaming)");
  EXPECT_NE(gridPoint(1024, 8, 32), (P{1024, 8, 0}));
  EXPECT_NE(gridPoint(1024, 8, 32), (P{1024, 8, 0, 1, 32}));
}

TEST(RmsNormFamilyTest, GivenFourRowsOfTwoMillionWhenAskedForTheSpaceThenGridSplitPointsLeadAndClustersFollow) {
  // 4 rows: clusters of 16 reach 64 CTAs; a grid of 32 CTAs a row makes a wave of 128 (one CTA an SM)
  // at 1024 and 512 threads, then half of it; then the cluster points.
  const V four{DType::BFloat16, 4, int64_t{1} << 21, true};
  const std::vector<P> space = RmsNormFamily::parameterSpace(four, 90);
  ASSERT_GE(space.size(), 6u);
  EXPECT_EQ(space[0], gridPoint(1024, 8, 32));
  EXPECT_EQ(space[1], gridPoint(512, 8, 32));
  EXPECT_EQ(space[2], gridPoint(1024, 8, 16));
  EXPECT_EQ(space[3], gridPoint(512, 8, 16));
  EXPECT_GT(space[4].cluster, 1) << space[4].describe();
  EXPECT_GT(space[5].cluster, 1) << space[5].describe();
  for (const P& p : space) EXPECT_TRUE(RmsNormFamily::guardParams(four, p)) << p.describe();
  // One row of 65536: too short for the grid to lead; the clusters do, two grid points follow.
  const std::vector<P> one = RmsNormFamily::parameterSpace({DType::BFloat16, 1, 65536, true}, 90);
  EXPECT_GT(one.front().cluster, 1) << one.front().describe();
  EXPECT_EQ(std::count_if(one.begin(), one.end(), [](const P& p) { return p.split > 1; }), 2);
  // Without clusters (sm_80) the grid points alone lead; without a known GPU none.
  const std::vector<P> sm80 = RmsNormFamily::parameterSpace(four, 80);
  EXPECT_EQ(sm80.front(), gridPoint(1024, 8, 32));
  for (const P& p : sm80) EXPECT_EQ(p.cluster, 1) << p.describe();
  for (const P& p : RmsNormFamily::parameterSpace(four, 0)) EXPECT_EQ(p.split, 1) << p.describe();
  // 8 rows of fp32 4M: clusters of 16 make a wave and lead; two grid points follow.
  const std::vector<P> eight = RmsNormFamily::parameterSpace({DType::Float32, 8, int64_t{1} << 22, true}, 90);
  EXPECT_EQ(eight.front(), (P{1024, 4, 0, 1, 16}));
  EXPECT_EQ(std::count_if(eight.begin(), eight.end(), [](const P& p) { return p.split > 1; }), 2);
  // Many rows, short rows, and columns the widest vector does not divide: no grid point.
  for (const V& v : {V{DType::BFloat16, 16384, 8192, true}, V{DType::BFloat16, 4, 32768, true},
                     V{DType::BFloat16, 4, (int64_t{1} << 21) + 4, true}}) {
    for (const P& p : RmsNormFamily::parameterSpace(v, 90)) EXPECT_EQ(p.split, 1) << name(v) << p.describe();
  }
}

TEST(RmsNormFamilyTest, GivenAGridSplitPointWhenAskedForGeometryWorkspaceAndOptionsThenACooperativeGridAndTheDefine) {
  const V four{DType::BFloat16, 4, int64_t{1} << 21, true};
  const LaunchGeometry g = RmsNormFamily::launchGeometry(four, gridPoint(1024, 8, 32));
  EXPECT_EQ(g.gridX, 128u);
  EXPECT_EQ(g.blockX, 1024u);
  EXPECT_EQ(g.sharedBytes, 0u);
  EXPECT_TRUE(g.cooperative);
  EXPECT_FALSE(RmsNormFamily::launchGeometry(four, P{1024, 8, 0, 1, 16}).cooperative);
  EXPECT_FALSE(RmsNormFamily::launchGeometry(four, P{1024, 8, 0}).cooperative);
  // One partial a CTA, then the counter; nothing for the other points.
  EXPECT_EQ(RmsNormFamily::workspaceFloats(four, gridPoint(1024, 8, 32)), 4 * 32 + 1);
  EXPECT_EQ(RmsNormFamily::workspaceFloats(four, P{1024, 8, 0, 1, 16}), 0);
  EXPECT_EQ(RmsNormFamily::workspaceFloats(four, P{1024, 8, 0}), 0);
  // The harness's: enough for every point of the row count.
  for (int64_t rows : {1, 4, 15, 16, 17, 1000, 100000}) {
    const V v{DType::BFloat16, rows, int64_t{1} << 20, true};
    for (const P& p : RmsNormFamily::allParameterPoints(DType::BFloat16)) {
      if (RmsNormFamily::guardParams(v, p)) {
        EXPECT_LE(RmsNormFamily::workspaceFloats(v, p), RmsNormFamily::maxWorkspaceFloats(rows)) << p.describe();
      }
    }
  }
  EXPECT_EQ(RmsNormFamily::maxWorkspaceFloats(4), 4 * 64 + 1);
  EXPECT_EQ(RmsNormFamily::maxWorkspaceFloats(100000), 1024 + 1);
  const std::vector<std::string> o = RmsNormFamily::compileOptions(DType::BFloat16, gridPoint(1024, 8, 32), true);
  EXPECT_NE(std::find(o.begin(), o.end(), "-DHK_SPLIT=32"), o.end());
  for (const std::string& option : RmsNormFamily::compileOptions(DType::BFloat16, P{1024, 8, 0, 1, 16}, true)) {
    EXPECT_EQ(option.rfind("-DHK_SPLIT", 0), std::string::npos) << option;
  }
}

TEST(RmsNormFamilyTest, GivenVariantsWhenAskedForBytesThenOneReadOneWriteTheWeightAndRstd) {
  EXPECT_DOUBLE_EQ(RmsNormFamily::bytesMoved({DType::BFloat16, 16384, 8192, true}),
                   2.0 * 16384 * 8192 * 2 + 8192 * 2 + 16384 * 4);
  EXPECT_DOUBLE_EQ(RmsNormFamily::bytesMoved({DType::Float32, 4096, 4096, false}), 2.0 * 4096 * 4096 * 4 + 4096 * 4);
}

TEST(RmsNormFamilyTest, GivenDTypesWhenAskedForToleranceThenOneOutputUlpPlusFp32NoiseGrowingWithCols) {
  const double s = 4e-6;
  const NormTolerance bf = RmsNormFamily::tolerance(DType::BFloat16, 8192);
  EXPECT_DOUBLE_EQ(bf.outRel, 1.0 / 128 + s);
  EXPECT_DOUBLE_EQ(bf.outAbs, s);
  EXPECT_DOUBLE_EQ(bf.statRel, s);
  EXPECT_DOUBLE_EQ(RmsNormFamily::tolerance(DType::Float16, 16384).outRel, 1.0 / 1024 + s);
  EXPECT_DOUBLE_EQ(RmsNormFamily::tolerance(DType::Float32, 1).outRel, s);
  EXPECT_DOUBLE_EQ(RmsNormFamily::tolerance(DType::Float32, 16384 * 4).statRel, 2 * s);
  EXPECT_GT(RmsNormFamily::tolerance(DType::Float32, 1 << 20).statRel, RmsNormFamily::tolerance(DType::Float32, 1 << 16).statRel);
  // The checks: relative plus absolute floor; NaN meets NaN, infinities equal.
  EXPECT_TRUE(bf.outputWithin(1.0078125, 1.0));  // one bf16 ulp above 1
  EXPECT_FALSE(bf.outputWithin(1.0234375, 1.0));  // three
  EXPECT_TRUE(bf.outputWithin(0.0, 0.0));
  EXPECT_TRUE(bf.outputWithin(std::nan(""), std::nan("")));
  EXPECT_FALSE(bf.outputWithin(0.0, std::nan("")));
  EXPECT_FALSE(bf.outputWithin(std::nan(""), 0.0));
  EXPECT_TRUE(bf.outputWithin(INFINITY, INFINITY));
  EXPECT_FALSE(bf.outputWithin(-INFINITY, INFINITY));
  EXPECT_FALSE(bf.outputWithin(3e38, INFINITY));
  EXPECT_TRUE(bf.rstdWithin(2.0 * (1 + 3e-6), 2.0));
  EXPECT_FALSE(bf.rstdWithin(2.0 * (1 + 1e-5), 2.0));
  // The mean's bound scales with the row's spread (1 / rstd), not the mean alone.
  EXPECT_TRUE(bf.meanWithin(1e-6, 0.0, 1.0));
  EXPECT_FALSE(bf.meanWithin(1e-4, 0.0, 1.0));
}

TEST(RmsNormFamilyTest, GivenNoEpsWhenAskedForTheDefaultThenFloatEpsilonForEveryDType) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(RmsNormFamily::defaultEps(d), std::numeric_limits<float>::epsilon()) << dtypeName(d);
    EXPECT_EQ(RmsNormFamily::defaultEps(d), std::ldexp(1.0f, -23)) << dtypeName(d);
  }
}

// (Every point's round trip and malformed JSON: FamilyConformanceTest.)
TEST(RmsNormFamilyTest, GivenParamsWhenWrittenAsJsonOrTextThenTheirFields) {
  EXPECT_EQ((P{256, 8, 4}.toJson().dump()), R"({"items":4,"rowsPerCta":1,"threads":256,"vec":8})");
  EXPECT_EQ(P::fromJson({{"threads", 512}, {"vec", 8}, {"items", 2}}), (P{512, 8, 2, 1}));
  EXPECT_EQ(P({256, 8, 4}).describe(), "threads=256 vec=8 items=4 (register-resident)");
  EXPECT_EQ(P({128, 8, 1, 8}).describe(), "threads=128 vec=8 items=1 rowsPerCta=8 (register-resident)");
  EXPECT_EQ(P({1024, 8, 0}).describe(), "threads=1024 vec=8 items=0 (streaming)");
}

// --- NVRTC -------------------------------------------------------------------

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

std::vector<testutil::CompileResult> compileRms(const std::vector<testutil::CompileJob>& jobs) {
  return testutil::compileAll(RmsNormFamily::source(), "rms_norm.cu", RmsNormFamily::kKernelName, jobs,
                              [](const testutil::CompileJob& j) {
                                std::vector<std::string> o = detail::normCompileOptions(j.dtype, j.params);
                                o.insert(o.end(), j.flags.begin(), j.flags.end());
                                return o;
                              });
}

// Every one-CTA point of every dtype and a sample of the split-row points (testutil::clusterSample),
// with the weight (the register budget's case).
TEST(RmsNormFamilyCompileTest, GivenEveryPointWithWeightWhenCompiledForSm90aThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::CompileJob> jobs;
  for (DType d : kAllDTypes) {
    for (const P& p : testutil::compiledPoints(d, RmsNormFamily::allParameterPoints(d))) {
      jobs.push_back({d, p, {"-DHK_HAS_WEIGHT=1"}, "sm_90a"});
    }
  }
  const auto results = compileRms(jobs);
  testutil::expectAllCompiledWithoutSpills(jobs, results);
  testutil::printRegisters("rms_norm with weight, registers per point (sm_90a)", jobs, results);
}

// Without the weight: a spread of points (every point under
// HOTKERNEL_NORM_COMPILE_ALL=1), through the public compileOptions.
TEST(RmsNormFamilyCompileTest, GivenPointsWithoutWeightWhenCompiledForSm90aThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::CompileJob> jobs;
  for (DType d : kAllDTypes) {
    for (const P& p : testutil::otherCombinationPoints(d, RmsNormFamily::allParameterPoints(d))) {
      jobs.push_back({d, p, {"-DHK_HAS_WEIGHT=0"}, "sm_90a"});
    }
  }
  const auto results = testutil::compileAll(RmsNormFamily::source(), "rms_norm.cu", RmsNormFamily::kKernelName, jobs,
                                            [](const testutil::CompileJob& j) {
                                              return RmsNormFamily::compileOptions(j.dtype, j.params, false);
                                            });
  testutil::expectAllCompiledWithoutSpills(jobs, results);
}

TEST(RmsNormFamilyCompileTest, GivenASpreadOfPointsWhenCompiledForSm80ThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::CompileJob> jobs;
  for (DType d : kAllDTypes) {
    for (const P& p : testutil::spreadOf(d, RmsNormFamily::allParameterPoints(d))) {
      jobs.push_back({d, p, {"-DHK_HAS_WEIGHT=1"}, "sm_80"});
    }
  }
  testutil::expectAllCompiledWithoutSpills(jobs, compileRms(jobs));
}

// Note [Specialized columns]: what the optimizer compiles. The benchmarked
// shapes' and odd column counts' points compile without spills; the streaming
// 512 x vec 8 point on 8192 columns unrolls into fewer registers than with
// `cols` read at run time (the H200 probe: 29 against 32).
// The specialized streaming point (HK_COLS, Note [Specialized columns]) has
// the column count compiled in: a different image from the generic point's,
// and never more registers (with `cols` at run time it needed 32, specialized
// 29 before Note [Streaming L1 hints]; with the L1 hints both need 29).
TEST(RmsNormFamilyCompileTest, GivenVariantColumnsWhenCompiledSpecializedThenNoSpillsAndTheColumnsAreCompiledIn) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::CompileJob> jobs;
  const std::pair<DType, int64_t> variants[] = {{DType::BFloat16, 8192},  {DType::BFloat16, 4096},
                                                {DType::Float16, 4097},   {DType::Float32, 13},
                                                {DType::BFloat16, 24576}, {DType::Float32, 1000000}};
  for (auto [d, cols] : variants) {
    for (const P& p : RmsNormFamily::parameterSpace({d, 16384, cols, true})) {
      testutil::CompileJob j{d, p, {"-DHK_HAS_WEIGHT=1", "-DHK_COLS=" + std::to_string(cols) + "LL"}, "sm_90a"};
      jobs.push_back(j);
    }
  }
  const size_t streaming = jobs.size();
  jobs.push_back({DType::BFloat16, P{512, 8, 0}, {"-DHK_HAS_WEIGHT=1", "-DHK_COLS=8192LL"}, "sm_90a"});
  jobs.push_back({DType::BFloat16, P{512, 8, 0}, {"-DHK_HAS_WEIGHT=1"}, "sm_90a"});
  const auto results = compileRms(jobs);
  testutil::expectAllCompiledWithoutSpills(jobs, results);
  ASSERT_EQ(results.size(), streaming + 2);
  EXPECT_LE(results[streaming].registers, 32);
  EXPECT_LE(results[streaming].registers, results[streaming + 1].registers);
  EXPECT_NE(results[streaming].cubin, results[streaming + 1].cubin) << "else the specialization changed nothing";
}

TEST(RmsNormFamilyCompileTest, GivenDefinesOutsideTheTemplatesLimitsWhenCompiledThenTheTemplateRefuses) {
  SKIP_WITHOUT_NVRTC();
  const std::string source = RmsNormFamily::source();
  const std::vector<std::vector<std::string>> bad = {
      {"-DHK_DTYPE=2", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=16", "-DHK_ITEMS=0", "-DHK_HAS_WEIGHT=1"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=384", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=0", "-DHK_HAS_WEIGHT=1"},
      {"-DHK_DTYPE=3", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=0", "-DHK_HAS_WEIGHT=1"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=17", "-DHK_HAS_WEIGHT=1"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=128", "-DHK_ROWS=2", "-DHK_VEC=4", "-DHK_ITEMS=1", "-DHK_HAS_WEIGHT=1"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=128", "-DHK_ROWS=8", "-DHK_VEC=4", "-DHK_ITEMS=0", "-DHK_HAS_WEIGHT=1"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=0", "-DHK_HAS_WEIGHT=2"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=0"},  // no HK_HAS_WEIGHT
      {"-DHK_DTYPE=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=0", "-DHK_HAS_WEIGHT=1",
       "-DHK_CLUSTER=3"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=128", "-DHK_ROWS=8", "-DHK_VEC=4", "-DHK_ITEMS=1", "-DHK_HAS_WEIGHT=1",
       "-DHK_CLUSTER=4"},
  };
  for (const std::vector<std::string>& options : bad) {
    std::string joined;
    for (const std::string& o : options) joined += o + " ";
    EXPECT_THROW(hotkernel::testutil::compileCached(source, "rms_norm.cu", "sm_90a", options), Error) << joined;
  }
  // A cluster needs sm_90.
  EXPECT_THROW(hotkernel::testutil::compileCached(source, "rms_norm.cu", "sm_80",
                              RmsNormFamily::compileOptions(DType::Float32, P{1024, 4, 0, 1, 4}, true)),
               Error);
  // A grid split streams one row a CTA, without a cluster.
  const std::vector<std::string> split = {"-DHK_DTYPE=0", "-DHK_THREADS=1024", "-DHK_VEC=4", "-DHK_HAS_WEIGHT=1",
                                          "-DHK_SPLIT=32"};
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {"-DHK_ROWS=1", "-DHK_ITEMS=4"}, {"-DHK_ROWS=2", "-DHK_ITEMS=0"}, {"-DHK_ROWS=1", "-DHK_ITEMS=0", "-DHK_CLUSTER=4"}}) {
    std::vector<std::string> options = split;
    options.insert(options.end(), extra.begin(), extra.end());
    EXPECT_THROW(hotkernel::testutil::compileCached(source, "rms_norm.cu", "sm_90a", options), Error) << extra.back();
  }
}

// The grid split needs sm_70's acquire / release atomics, not clusters: it compiles for sm_80.
TEST(RmsNormFamilyCompileTest, GivenAGridSplitPointWhenCompiledForSm80ThenACubinWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  const std::vector<testutil::CompileJob> jobs = {{DType::BFloat16, gridPoint(1024, 8, 32), {"-DHK_HAS_WEIGHT=1"}, "sm_80"},
                                                  {DType::Float32, gridPoint(512, 4, 64), {"-DHK_HAS_WEIGHT=0"}, "sm_80"}};
  testutil::expectAllCompiledWithoutSpills(jobs, compileRms(jobs));
}

}  // namespace
}  // namespace hotkernel::kernels
