// CPU tests of what only the softmax family does: its axes (clusters, staged
// slices, split streaming, several rows a CTA), the ranking of its space, its
// geometry, options, bytes, tolerances and JSON text. FamilyConformanceTest.cpp
// checks the contract every family meets; SoftmaxFamilyCompileTest.cpp
// compiles the template itself.

#include "hotkernel/kernels/SoftmaxFamily.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>

#include "FamilyShapes.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

using V = SoftmaxVariant;
using P = SoftmaxParams;

std::vector<V> allShapes() {
  std::vector<V> out;
  for (DType d : kAllDTypes) {
    for (auto [rows, cols] : testutil::namedSoftmaxShapes()) out.push_back({d, rows, cols});
  }
  return out;
}

std::string name(const V& v) {
  return std::string(dtypeName(v.dtype)) + "[" + std::to_string(v.rows) + "," + std::to_string(v.cols) + "]";
}

// The contract every point meets (unique, well-formed, serving a row of one
// vector) is FamilyConformanceTest's; here the softmax axes.
TEST(SoftmaxFamilyTest, GivenEveryDTypeWhenListingAllPointsThenClustersStagingAndTheRegisterBudgetFollowTheAxes) {
  for (DType d : kAllDTypes) {
    const std::vector<P> all = SoftmaxFamily::allParameterPoints(d);
    ASSERT_FALSE(all.empty());
    std::set<std::tuple<int, int, int, int>> seen;
    std::set<std::tuple<int, int, int, int, bool>> clusters;
    for (const P& p : all) {
      EXPECT_TRUE(!p.smem || p.cluster != 1) << "staged points are cluster points: " << p.describe();
      if (p.cluster != 1) {
        clusters.insert({p.threads, p.vec, p.items, p.cluster, p.smem});
        EXPECT_EQ(p.rowsPerCta, 1) << p.describe();
        if (p.items == 0) {  // split streaming (Note [Split streaming])
          EXPECT_FALSE(p.smem) << p.describe();
          EXPECT_EQ(p.vec * static_cast<int>(elementSize(d)), 16) << "split streaming takes 16-byte vectors";
          EXPECT_GE(p.threads, 512) << p.describe();
        }
        EXPECT_EQ(p.minComputeCapability(), 90) << p.describe();
      } else {
        seen.insert({p.threads, p.vec, p.items, p.rowsPerCta});
        EXPECT_EQ(p.minComputeCapability(), 0) << p.describe();
      }
      EXPECT_GE(p.items, 0);
      EXPECT_LE(p.items, 16);
      if (p.rowsPerCta > 1) EXPECT_GE(p.items, 1) << "multi-row points are register-resident: " << p.describe();
      if (!p.smem) {
        EXPECT_LE(p.items * p.vec, std::min(SoftmaxFamily::kMaxRegisterElements,
                                            SoftmaxFamily::kRegisterFileElements / p.threads))
            << p.describe();
      }
    }
    EXPECT_TRUE(seen.count({1024, 1, 0, 1})) << "no scalar streaming point";
    EXPECT_TRUE(seen.count({128, 1, 1, 32})) << "no four-threads-per-row point";
    for (int c : {2, 4, 8, 16}) EXPECT_TRUE(clusters.count({1024, 1, 1, c, false})) << "no cluster " << c << " point";
    for (int c : {2, 4, 8, 16}) {
      EXPECT_TRUE(clusters.count({256, static_cast<int>(16 / elementSize(d)), 8, c, true}))
          << "no staged cluster " << c << " point";
      for (int t : {512, 1024}) {
        EXPECT_TRUE(clusters.count({t, static_cast<int>(16 / elementSize(d)), 0, c, false}))
            << "no split-streaming cluster " << c << " point of " << t << " threads";
      }
    }
  }
}

TEST(SoftmaxFamilyTest, GivenClusterPointsWhenGuardedThenTheClusterMultipliesTheRowCapacity) {
  const P p{1024, 8, 4, 1, 4};  // 4 CTAs x 1024 threads x 8 x 4 = 131072 elements
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 8192, 128256}, p));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 131072}, p));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 131080}, p));
  // Short rows leave slices empty, which the kernel handles (masked lanes).
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 3, 8}, p));
  // Not points: a cluster of 3 or 32, a several-rows cluster point, 128-thread CTAs.
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1024}, P{1024, 8, 4, 1, 3}));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1024}, P{1024, 8, 4, 1, 32}));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1024}, P{128, 8, 1, 8, 2}));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1024}, P{128, 8, 1, 1, 2}));
}

P smemPoint(int threads, int vec, int items, int cluster) {
  P p{threads, vec, items, 1, cluster};
  p.smem = true;
  return p;
}

TEST(SoftmaxFamilyTest, GivenSharedMemoryPointsWhenGuardedThenClusterAndSixteenByteVectorsOnly) {
  const V v{DType::BFloat16, 8192, 128256};
  EXPECT_TRUE(SoftmaxFamily::guardParams(v, smemPoint(256, 8, 8, 8)));  // 8 x 256 x 8 x 8 = 131072 >= 128256
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, smemPoint(256, 8, 6, 8)));  // 98304 elements: the row does not fit
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, smemPoint(256, 4, 8, 8)));  // 8-byte vectors: no cp.async.cg
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, smemPoint(256, 8, 8, 1)));  // no cluster
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, smemPoint(1024, 8, 4, 8)));  // not a staged CTA size
  EXPECT_TRUE(SoftmaxFamily::guardParams(v, smemPoint(256, 8, 16, 4)));  // 64 KiB a CTA: 256 x 16 x 16 bytes
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, smemPoint(256, 8, 24, 8)));  // not a staged items count
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::Float32, 4, 4096}, smemPoint(256, 4, 1, 4)));
  EXPECT_EQ(smemPoint(256, 8, 8, 8).minComputeCapability(), 90);
  // Every staged point is listed, and none is a register point.
  const std::vector<P> all = SoftmaxFamily::allParameterPoints(DType::BFloat16);
  EXPECT_NE(std::find(all.begin(), all.end(), smemPoint(256, 8, 8, 8)), all.end());
  EXPECT_NE(std::find(all.begin(), all.end(), P{256, 8, 8, 1, 8}), all.end());
  EXPECT_NE(smemPoint(256, 8, 8, 8), (P{256, 8, 8, 1, 8}));
}

TEST(SoftmaxFamilyTest, GivenASharedMemoryPointWhenAskedForGeometryAndOptionsThenItsStageAndTheDefine) {
  const LaunchGeometry g = SoftmaxFamily::launchGeometry({DType::BFloat16, 8192, 128256}, smemPoint(256, 8, 8, 8));
  EXPECT_EQ(g.gridX, 8192u * 8);
  EXPECT_EQ(g.sharedBytes, 256u * 8 * 16);
  // The stage depends on the point only: every shape the harness sweeps launches with the same bytes.
  EXPECT_EQ(SoftmaxFamily::launchGeometry({DType::BFloat16, 3, 50000}, smemPoint(256, 8, 8, 8)).sharedBytes,
            g.sharedBytes);
  EXPECT_EQ(SoftmaxFamily::launchGeometry({DType::BFloat16, 8192, 128256}, P{256, 8, 8, 1, 8}).sharedBytes, 0u);
  const std::vector<std::string> o = SoftmaxFamily::compileOptions(DType::BFloat16, smemPoint(256, 8, 8, 8));
  EXPECT_NE(std::find(o.begin(), o.end(), "-DHK_SMEM=1"), o.end());
  const std::vector<std::string> r = SoftmaxFamily::compileOptions(DType::BFloat16, P{256, 8, 8, 1, 8});
  EXPECT_EQ(std::find(r.begin(), r.end(), "-DHK_SMEM=1"), r.end());
}

TEST(SoftmaxFamilyTest, GivenSplitStreamingPointsWhenGuardedThenAnyRowLengthWithSixteenByteVectors) {
  // Note [Split streaming]: a cluster streams the row twice, so no length limit.
  const P p{1024, 8, 0, 1, 4};
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 8192, 128256}, p));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1000000}, p));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1 << 30}, p));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 3, 8}, p));  // slices past the row's end are empty
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::Float32, 2, 1000004}, P{512, 4, 0, 1, 16}));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1000001}, p));  // cols % vec
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1024}, P{1024, 4, 0, 1, 4}));  // 8-byte vectors
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1024}, P{256, 8, 0, 1, 4}));   // not its CTA size
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1024}, P{1024, 8, 0, 1, 3}));  // not a cluster size
  P staged = p;
  staged.smem = true;  // nothing to stage
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 1024}, staged));
  EXPECT_EQ(p.minComputeCapability(), 90);
  EXPECT_EQ(p.describe(), "threads=1024 vec=8 items=0 cluster=4 (streaming)");
  const LaunchGeometry g = SoftmaxFamily::launchGeometry({DType::BFloat16, 8192, 128256}, p);
  EXPECT_EQ(g.gridX, 8192u * 4);
  EXPECT_EQ(g.blockX, 1024u);
  EXPECT_EQ(g.sharedBytes, 0u);
  const std::vector<std::string> o = SoftmaxFamily::compileOptions(DType::BFloat16, p);
  EXPECT_NE(std::find(o.begin(), o.end(), "-DHK_ITEMS=0"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "-DHK_CLUSTER=4"), o.end());
  EXPECT_EQ(std::find(o.begin(), o.end(), "-DHK_SMEM=1"), o.end());
  EXPECT_EQ(P::fromJson(p.toJson()), p);
}

TEST(SoftmaxFamilyTest, GivenManyLongRowsOnHopperWhenAskedForTheSpaceThenSplitStreamingThenStagedTwins) {
  const std::vector<P> space = SoftmaxFamily::parameterSpace({DType::BFloat16, 8192, 128256}, 90);
  ASSERT_FALSE(space.empty());
  // Rows of 250 KB: split streaming first (Note [Split streaming]), then the staged points.
  ASSERT_GE(space.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(space[i].cluster > 1 && space[i].items == 0) << space[i].describe();
  }
  EXPECT_TRUE(space[3].smem) << space[3].describe();
  // Rows of 64 KB (one-CTA streaming keeps them in L2): no split streaming.
  for (const P& q : SoftmaxFamily::parameterSpace({DType::BFloat16, 4096, 32000}, 90)) {
    EXPECT_FALSE(q.cluster > 1 && q.items == 0) << q.describe();
  }
  for (size_t i = 0; i < space.size(); ++i) {
    if (!space[i].smem) continue;
    P reg = space[i];
    reg.smem = false;
    const auto it = std::find(space.begin(), space.end(), reg);
    if (it != space.end()) EXPECT_GT(it - space.begin(), static_cast<std::ptrdiff_t>(i)) << reg.describe();
  }
  // Few rows: the register point first (one row per cluster: nothing to overlap).
  const std::vector<P> few = SoftmaxFamily::parameterSpace({DType::BFloat16, 32, 128256}, 90);
  EXPECT_FALSE(few.front().smem) << few.front().describe();
}

TEST(SoftmaxFamilyTest, GivenLongOrFewRowsOnHopperWhenAskedForTheSpaceThenClusterPointsComeFirst) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 8192, 128256}, V{d, 1, 128256}, V{d, 32, 128256}, V{d, 1, 32000}}) {
      const std::vector<P> space = SoftmaxFamily::parameterSpace(v, 90);
      ASSERT_FALSE(space.empty()) << name(v);
      EXPECT_GT(space.front().cluster, 1) << name(v) << " " << space.front().describe();
      for (const P& p : space) EXPECT_TRUE(SoftmaxFamily::guardParams(v, p)) << name(v) << " " << p.describe();
      // Few rows: the largest cluster first (Note [Decode clusters]).
      if (v.rows < 264) EXPECT_EQ(space.front().cluster, 16) << name(v);
      EXPECT_LE(space.size(), 12u);
      EXPECT_TRUE(std::any_of(space.begin(), space.end(), [](const P& p) { return p.items == 0; })) << name(v);
    }
    // Without clusters (sm_80, or unknown), no cluster point.
    for (int cc : {0, 80}) {
      for (const P& p : SoftmaxFamily::parameterSpace({d, 8192, 128256}, cc)) EXPECT_EQ(p.cluster, 1) << p.describe();
    }
  }
  // Many medium rows: the one-CTA guesses first, one or two cluster points to try.
  const std::vector<P> medium = SoftmaxFamily::parameterSpace({DType::BFloat16, 4096, 32000}, 90);
  EXPECT_EQ(medium.front().cluster, 1);
  EXPECT_TRUE(std::any_of(medium.begin(), medium.end(), [](const P& p) { return p.cluster > 1; }));
  // Short rows never get clusters.
  for (const P& p : SoftmaxFamily::parameterSpace({DType::BFloat16, 32768, 128}, 90)) EXPECT_EQ(p.cluster, 1);
}

TEST(SoftmaxFamilyTest, GivenAClusterOfSixteenWhenGuardedThenSixteenSlicesOfTheRowOnSm90Only) {
  const P p{256, 8, 4, 1, 16};  // 16 CTAs x 256 threads x 8 x 4 = 131072 elements
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 128256}, p));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 32, 128256}, p));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 131072}, p));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 131080}, p));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 128260}, p)) << "cols % vec != 0";
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 128256}, smemPoint(256, 8, 4, 16)));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 128256}, P{256, 8, 4, 2, 16})) << "several rows";
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 128256}, P{128, 8, 8, 1, 16})) << "128 threads";
  // sm_90+ only: the callers compare minComputeCapability with the GPU's.
  EXPECT_EQ(p.minComputeCapability(), 90);
  EXPECT_EQ(smemPoint(256, 8, 4, 16).minComputeCapability(), 90);
  const std::vector<std::string> o = SoftmaxFamily::compileOptions(DType::BFloat16, p);
  EXPECT_EQ(std::count(o.begin(), o.end(), "-DHK_CLUSTER=16"), 1);
  const LaunchGeometry g = SoftmaxFamily::launchGeometry({DType::BFloat16, 32, 128256}, p);
  EXPECT_EQ(g.gridX, 32u * 16);
  EXPECT_EQ(g.blockX, 256u);
  EXPECT_EQ(g.sharedBytes, 0u);
  EXPECT_EQ(SoftmaxFamily::launchGeometry({DType::BFloat16, 1, 128256}, smemPoint(256, 8, 4, 16)).sharedBytes,
            256u * 4 * 16);
  // Beyond the grid limit: a whole number of 16-CTA clusters.
  const unsigned huge = SoftmaxFamily::launchGeometry({DType::Float32, int64_t{1} << 33, 2}, P{256, 1, 1, 1, 16}).gridX;
  EXPECT_EQ(huge % 16, 0u);
  EXPECT_GT(huge, 2147483647u - 16);
}

TEST(SoftmaxFamilyTest, GivenDecodeShapesOnHopperWhenAskedForTheSpaceThenClusterSixteenPointsAndTheClusterEightWinner) {
  for (int64_t rows : {1, 32}) {
    const V v{DType::BFloat16, rows, 128256};
    const std::vector<P> space = SoftmaxFamily::parameterSpace(v, 90);
    EXPECT_LE(space.size(), 12u) << name(v);
    auto at = [&](const P& p) { return std::find(space.begin(), space.end(), p) - space.begin(); };
    const std::ptrdiff_t absent = static_cast<std::ptrdiff_t>(space.size());
    // Note [Decode clusters]: 16 CTAs x 256 threads x 4 items first, its
    // shared-memory twin, 512 threads x 2 items; then cluster 8, led by the
    // point the H200 served these shapes with.
    EXPECT_EQ(at(P{256, 8, 4, 1, 16}), 0) << name(v);
    EXPECT_EQ(at(smemPoint(256, 8, 4, 16)), 1) << name(v);
    EXPECT_EQ(at(P{512, 8, 2, 1, 16}), 2) << name(v);
    EXPECT_EQ(at(P{256, 8, 8, 1, 8}), 3) << name(v);
    EXPECT_LT(at(P{512, 8, 4, 1, 8}), absent) << name(v);
    for (const P& p : space) EXPECT_TRUE(SoftmaxFamily::guardParams(v, p)) << name(v) << " " << p.describe();
    // Below sm_90 (or unknown): no cluster at all.
    for (int cc : {0, 80, 89}) {
      for (const P& p : SoftmaxFamily::parameterSpace(v, cc)) {
        EXPECT_EQ(p.cluster, 1) << name(v) << " cc " << cc << " " << p.describe();
      }
    }
  }
  // Many rows fill the GPU without non-portable clusters.
  for (const P& p : SoftmaxFamily::parameterSpace({DType::BFloat16, 8192, 128256}, 90)) {
    EXPECT_LE(p.cluster, 8) << p.describe();
  }
  for (const P& p : SoftmaxFamily::parameterSpace({DType::BFloat16, 264, 128256}, 90)) {
    EXPECT_LE(p.cluster, 8) << p.describe();
  }
}

// (Every space's size, guards and scalar point: FamilyConformanceTest.)
TEST(SoftmaxFamilyTest, GivenASweepOfShapesOnHopperWhenAskedForTheSpaceThenClustersOfSixteenForFewRowsAndAStreamingPoint) {
  std::vector<int64_t> colsList;
  for (int64_t c = 256; c <= (int64_t{1} << 20); c *= 2) {
    for (int64_t d : {-1, 0, 8, 24}) colsList.push_back(c + d);
  }
  for (int64_t c : {32000, 50257, 128256, 151936, 256000}) colsList.push_back(c);
  for (DType d : kAllDTypes) {
    for (int64_t rows : {int64_t{1}, int64_t{32}, int64_t{263}, int64_t{264}, int64_t{8192}}) {
      for (int64_t cols : colsList) {
        const V v{d, rows, cols};
        bool streaming = false, portableStaged = false, wideCluster = false;
        for (const P& p : SoftmaxFamily::parameterSpace(v, 90)) {
          // Many rows: a 16-CTA cluster only staged (Note [Tight staged slices]).
          if (p.cluster > 8 && rows >= 264) ASSERT_TRUE(p.smem) << name(v) << " " << p.describe();
          portableStaged = portableStaged || (p.smem && p.cluster <= 8);
          wideCluster = wideCluster || p.cluster > 8;
          streaming = streaming || !p.registerResident();
        }
        ASSERT_TRUE(streaming) << name(v);
        if (rows >= 264) ASSERT_FALSE(wideCluster && portableStaged) << name(v) << ": a 16-CTA cluster beside a staged portable one";
      }
    }
  }
}

// Note [Tight staged slices]: float32 rows of 400,000 columns, many of them: no portable cluster stages the
// row, so the 16-CTA cluster's tight slices are seeds (13 items of 512 threads: 104 KB, two CTAs an SM); few rows
// get each staged point's tight twin beside it.
TEST(SoftmaxFamilyTest, GivenRowsNoPortableClusterStagesWhenAskedForTheSpaceThenTheSixteenCtaTightSlicesAreSeeds) {
  const V many{DType::Float32, 4096, 400000};
  const std::vector<P> space = SoftmaxFamily::parameterSpace(many, 90);
  P tight{512, 4, 13, 1, 16};
  tight.smem = true;
  EXPECT_NE(std::find(space.begin(), space.end(), tight), space.end());
  EXPECT_EQ(SoftmaxFamily::launchGeometry(many, tight).sharedBytes, 512u * 13 * 16);
  P loose = tight;
  loose.items = 16;
  const V few{DType::Float32, 32, 400000};
  const std::vector<P> fewSpace = SoftmaxFamily::parameterSpace(few, 90);
  EXPECT_NE(std::find(fewSpace.begin(), fewSpace.end(), tight), fewSpace.end());
  EXPECT_NE(std::find(fewSpace.begin(), fewSpace.end(), loose), fewSpace.end());
  P twelve = tight;
  twelve.items = 12;  // 6,144 vectors: short of the slice
  EXPECT_FALSE(SoftmaxFamily::guardParams(many, twelve));
  // The whitelist takes any staged count up to 16 (a cached tight point loads); the listed points stay the family's.
  EXPECT_TRUE(SoftmaxFamily::guardParams(many, tight));
  P seventeen = tight;
  seventeen.items = 17;
  EXPECT_FALSE(SoftmaxFamily::guardParams(many, seventeen));
  const std::vector<P> all = SoftmaxFamily::allParameterPoints(DType::Float32);
  EXPECT_EQ(std::find(all.begin(), all.end(), tight), all.end());
  // A row a portable cluster stages keeps clusters of at most 8 for many rows.
  for (const P& p : SoftmaxFamily::parameterSpace({DType::BFloat16, 8192, 128256}, 90)) EXPECT_LE(p.cluster, 8);
}

// Note [Pipelined slices]: many rows get each staged point's pipelined twin (16 rows a cluster) right after it;
// the twin takes its staged point's one stage of shared memory, a sixteenth of the clusters and the define; the
// whitelist takes 16 and 4 rows a cluster of staged points, nothing else.
TEST(SoftmaxFamilyTest, GivenManyRowsOfAStagedLengthWhenAskedForTheSpaceThenEachStagedPointHasItsPipelinedTwin) {
  const V many{DType::Float32, 4096, 400000};
  const std::vector<P> space = SoftmaxFamily::parameterSpace(many, 90);
  P tight{512, 4, 13, 1, 16};
  tight.smem = true;
  P piped = tight;
  piped.clusterRows = 16;
  const auto at = std::find(space.begin(), space.end(), tight);
  ASSERT_NE(at, space.end());
  ASSERT_NE(at + 1, space.end());
  EXPECT_EQ(*(at + 1), piped);
  const LaunchGeometry g = SoftmaxFamily::launchGeometry(many, piped);
  EXPECT_EQ(g.sharedBytes, 512u * 13 * 16);
  EXPECT_EQ(g.sharedBytes, SoftmaxFamily::launchGeometry(many, tight).sharedBytes);
  EXPECT_EQ(g.gridX, 4096u / 16 * 16);
  EXPECT_EQ(SoftmaxFamily::launchGeometry({DType::Float32, 4097, 400000}, piped).gridX, (4096u / 16 + 1) * 16);
  const std::vector<std::string> options = SoftmaxFamily::compileOptions(DType::Float32, piped);
  EXPECT_NE(std::find(options.begin(), options.end(), "-DHK_PIPE=1"), options.end());
  const std::vector<std::string> plain = SoftmaxFamily::compileOptions(DType::Float32, tight);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "-DHK_PIPE=1"), plain.end());
  // The whitelist: 16 and 4 rows a cluster, staged points only.
  P four = piped;
  four.clusterRows = 4;
  EXPECT_TRUE(SoftmaxFamily::guardParams(many, four));
  EXPECT_EQ(SoftmaxFamily::launchGeometry(many, four).gridX, 4096u / 4 * 16);
  P two = piped;
  two.clusterRows = 2;
  EXPECT_FALSE(SoftmaxFamily::guardParams(many, two));
  P registers{1024, 4, 4, 1, 16};
  ASSERT_TRUE(SoftmaxFamily::guardParams({DType::Float32, 3, 100000}, registers));
  registers.clusterRows = 4;
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::Float32, 3, 100000}, registers));
  P wide = smemPoint(512, 4, 16, 16);  // 128 KB: the widest stage, one a CTA
  ASSERT_TRUE(SoftmaxFamily::guardParams(many, wide));
  wide.clusterRows = 4;
  EXPECT_TRUE(SoftmaxFamily::guardParams(many, wide));
  EXPECT_EQ(SoftmaxFamily::launchGeometry(many, wide).sharedBytes, 512u * 16 * 16);
  // Few rows (a row per cluster already leaves nothing to pipeline) get none; nor do the listed points.
  for (const P& p : SoftmaxFamily::parameterSpace({DType::Float32, 32, 400000}, 90)) EXPECT_EQ(p.clusterRows, 1);
  for (DType d : kAllDTypes) {
    for (const P& p : SoftmaxFamily::allParameterPoints(d)) EXPECT_EQ(p.clusterRows, 1) << p.describe();
  }
  // A pipelined twin is only offered where it fits and is valid.
  for (const P& p : space) EXPECT_TRUE(SoftmaxFamily::guardParams(many, p)) << p.describe();
}

TEST(SoftmaxFamilyTest, GivenAClusterPointWhenAskedForGeometryThenClusterCtasPerRowInWholeClusters) {
  const LaunchGeometry g = SoftmaxFamily::launchGeometry({DType::BFloat16, 8192, 128256}, P{1024, 8, 4, 1, 4});
  EXPECT_EQ(g.gridX, 8192u * 4);
  EXPECT_EQ(g.blockX, 1024u);
  EXPECT_EQ(SoftmaxFamily::launchGeometry({DType::BFloat16, 1, 128256}, P{1024, 8, 2, 1, 8}).gridX, 8u);
  // Beyond the grid limit: a whole number of clusters, the kernel strides over rows.
  const unsigned huge = SoftmaxFamily::launchGeometry({DType::Float32, int64_t{1} << 33, 2}, P{256, 1, 1, 1, 8}).gridX;
  EXPECT_EQ(huge % 8, 0u);
  EXPECT_GT(huge, 2147483647u - 8);
}

TEST(SoftmaxFamilyTest, GivenLogSoftmaxWhenAskedForOptionsAndNamesThenTheLogDefineAndItsOwnFamilyName) {
  const std::vector<std::string> plain = SoftmaxFamily::compileOptions(DType::BFloat16, P{512, 8, 8});
  const std::vector<std::string> log = SoftmaxFamily::compileOptions(DType::BFloat16, P{512, 8, 8}, SoftmaxOp::LogSoftmax);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "-DHK_LOG=1"), 0);
  EXPECT_EQ(std::count(log.begin(), log.end(), "-DHK_LOG=1"), 1);
  const std::vector<std::string> cl = SoftmaxFamily::compileOptions(DType::BFloat16, P{1024, 8, 4, 1, 4});
  EXPECT_EQ(std::count(cl.begin(), cl.end(), "-DHK_CLUSTER=4"), 1);
  EXPECT_STREQ(softmaxOpName(SoftmaxOp::Softmax), "aten::_softmax");
  EXPECT_STREQ(softmaxOpName(SoftmaxOp::LogSoftmax), "aten::_log_softmax");
  EXPECT_STREQ(softmaxFamilyName(SoftmaxOp::Softmax), "softmax_lastdim");
  EXPECT_STREQ(softmaxFamilyName(SoftmaxOp::LogSoftmax), "log_softmax_lastdim");
  EXPECT_DOUBLE_EQ(SoftmaxFamily::logSoftmaxTolerance(DType::BFloat16).relative, 1.0 / 128);
  EXPECT_DOUBLE_EQ(SoftmaxFamily::logSoftmaxTolerance(DType::Float16).relative, 1.0 / 1024);
  EXPECT_GT(SoftmaxFamily::logSoftmaxTolerance(DType::Float32).absolute, 0.0);
}

TEST(SoftmaxFamilyTest, GivenRegisterResidentPointWhenRowFitsOrNotThenGuardFollowsCapacity) {
  const P p{512, 8, 8};  // 32768 bf16 elements per row
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 4096, 32000}, p));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 32768}, p));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 1, 32776}, p));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 8192, 128256}, p));
  // The same row as streaming: any length.
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 8192, 128256}, P{512, 8, 0}));
}

TEST(SoftmaxFamilyTest, GivenVectorWidthWhenColsIsNotAMultipleThenRefusedButScalarAccepted) {
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 13}, P{32, 8, 1}));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 13}, P{32, 2, 1}));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 13}, P{32, 1, 1}));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 13}, P{32, 1, 0}));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::BFloat16, 7, 14}, P{32, 2, 1}));
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::Float32, 4, 1001}, P{256, 4, 1}));
  EXPECT_TRUE(SoftmaxFamily::guardParams({DType::Float32, 4, 1001}, P{256, 1, 4}));
}

TEST(SoftmaxFamilyTest, GivenPointsOutsideTheSpaceWhenGuardedThenRefused) {
  const V v{DType::BFloat16, 4096, 32000};
  // (Threads and vector widths off the axes: FamilyConformanceTest.)
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{512, 8, 5}));      // not an item choice
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{1024, 8, 8}));     // 64 registers of data at 1024 threads
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{128, 8, 32}));     // over 16 items
  EXPECT_FALSE(SoftmaxFamily::guardParams({DType::BFloat16, 0, 32000}, P{512, 8, 8}));
}

// Every space also holds a streaming point (any row length); the rest of the
// contract of a space is FamilyConformanceTest's.
TEST(SoftmaxFamilyTest, GivenNamedShapesAndASweepWhenAskedForTheSpaceThenAlwaysAStreamingPoint) {
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
    const std::vector<P> space = SoftmaxFamily::parameterSpace(v);
    ASSERT_TRUE(std::any_of(space.begin(), space.end(), [](const P& p) { return !p.registerResident(); }))
        << name(v) << " has no streaming point";
  }
}

TEST(SoftmaxFamilyTest, GivenLlamaVocabRowsOfBf16WhenAskedForTheSpaceThenTheFirstGuessIsRegisterResidentWide) {
  const std::vector<P> space = SoftmaxFamily::parameterSpace({DType::BFloat16, 4096, 32000});
  ASSERT_FALSE(space.empty());
  EXPECT_TRUE(space.front().registerResident()) << space.front().describe();
  EXPECT_EQ(space.front().vec, 8);
  EXPECT_GE(space.front().threads * space.front().vec * space.front().items, 32000);
  EXPECT_NE(std::find(space.begin(), space.end(), P{512, 8, 8}), space.end());
}

TEST(SoftmaxFamilyTest, GivenRowsTooLongForRegistersWhenAskedForTheSpaceThenOnlyStreamingPoints) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 8192, 128256}, V{d, 1, 128256}, V{d, 5, 1 << 20}}) {
      const std::vector<P> space = SoftmaxFamily::parameterSpace(v);
      for (const P& p : space) EXPECT_FALSE(p.registerResident()) << name(v) << " " << p.describe();
      EXPECT_EQ(space.front().vec, static_cast<int>(16 / elementSize(d))) << name(v);
    }
  }
}

// Note [Streaming point widths]: both neighbours of the covering guess are
// seeds, so the search does not need luck to try 512 threads on 4000 vectors.
TEST(SoftmaxFamilyTest, GivenRowsUnder4096VectorsWhenAskedForTheSpaceThenStreamingWidthsAroundTheGuess) {
  for (DType d : {DType::BFloat16, DType::Float16}) {
    const std::vector<P> space = SoftmaxFamily::parameterSpace({d, 4096, 32000}, 90);
    EXPECT_NE(std::find(space.begin(), space.end(), P{1024, 8, 0}), space.end()) << dtypeName(d);
    EXPECT_NE(std::find(space.begin(), space.end(), P{512, 8, 0}), space.end()) << dtypeName(d);
  }
  // 1000 vectors: 256 covers them; 128 and 512 around it.
  const std::vector<P> mid = SoftmaxFamily::parameterSpace({DType::BFloat16, 4096, 8000}, 90);
  for (int t : {128, 256, 512}) EXPECT_NE(std::find(mid.begin(), mid.end(), P{t, 8, 0}), mid.end()) << t;
}

TEST(SoftmaxFamilyTest, GivenTinyRowsWhenAskedForTheSpaceThenOneWarpCtas) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 1, 1}, V{d, 7, 13}}) {
      const std::vector<P> space = SoftmaxFamily::parameterSpace(v);
      EXPECT_EQ(space.front().threads, 32) << name(v);
      EXPECT_EQ(space.front().vec, 1) << name(v);
      for (const P& p : space) EXPECT_EQ(p.threads, 32) << name(v) << " " << p.describe();
    }
  }
}

TEST(SoftmaxFamilyTest, GivenManyShortRowsWhenAskedForTheSpaceThenSeveralRowsPerCtaComeFirst) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 32768, 128}, V{d, 4096, 1024}, V{d, 1000, 50}}) {
      const std::vector<P> space = SoftmaxFamily::parameterSpace(v);
      ASSERT_FALSE(space.empty()) << name(v);
      EXPECT_GT(space.front().rowsPerCta, 1) << name(v) << " " << space.front().describe();
      EXPECT_GE(space.front().rowThreads() * space.front().vec * space.front().items, v.cols) << name(v);
    }
  }
  // Long rows or few rows: one row per CTA only.
  for (const V& v : {V{DType::BFloat16, 4096, 32000}, V{DType::BFloat16, 7, 13}, V{DType::BFloat16, 100, 128}}) {
    for (const P& p : SoftmaxFamily::parameterSpace(v)) EXPECT_EQ(p.rowsPerCta, 1) << name(v) << " " << p.describe();
  }
}

TEST(SoftmaxFamilyTest, GivenMultiRowPointsWhenGuardedThenRowThreadsBoundTheRowLength) {
  const V v{DType::BFloat16, 32768, 128};
  EXPECT_TRUE(SoftmaxFamily::guardParams(v, P{128, 8, 1, 8}));    // 16 threads x 8 = 128
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{128, 8, 1, 16}));  // 8 threads x 8 = 64 < 128
  EXPECT_TRUE(SoftmaxFamily::guardParams(v, P{128, 8, 2, 16}));
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{256, 8, 1, 16}));  // multi-row CTAs have 128 threads
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{128, 8, 1, 2}));   // 64 threads per row: spans warps
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{128, 8, 0, 8}));   // multi-row points are register-resident
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{128, 8, 3, 8}));   // not a multi-row item choice
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{64, 8, 1, 4}));    // not a multi-row CTA size
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{128, 8, 1, 3}));   // does not divide the CTA
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{128, 8, 1, 0}));
  EXPECT_FALSE(SoftmaxFamily::guardParams(v, P{128, 8, 1, 64}));  // 2 threads per row
}

TEST(SoftmaxFamilyTest, GivenPointersWhenAlignedOrNotThenGuardFollowsVectorWidth) {
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

TEST(SoftmaxFamilyTest, GivenAPointWhenAskedForCompileOptionsThenTheFiveDefines) {
  EXPECT_EQ(SoftmaxFamily::compileOptions(DType::BFloat16, P{512, 8, 8}),
            (std::vector<std::string>{"-DHK_DTYPE=2", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=8",
                                      "-DHK_ITEMS=8"}));
  EXPECT_EQ(SoftmaxFamily::compileOptions(DType::Float32, P{1024, 4, 0}),
            (std::vector<std::string>{"-DHK_DTYPE=0", "-DHK_THREADS=1024", "-DHK_ROWS=1", "-DHK_VEC=4",
                                      "-DHK_ITEMS=0"}));
  EXPECT_EQ(SoftmaxFamily::compileOptions(DType::BFloat16, P{128, 8, 1, 8})[2], "-DHK_ROWS=8");
  EXPECT_EQ(SoftmaxFamily::compileOptions(DType::Float16, P{32, 1, 1})[0], "-DHK_DTYPE=1");
  EXPECT_THROW(SoftmaxFamily::compileOptions(DType::Float32, P{512, 8, 8}), Error);
}

TEST(SoftmaxFamilyTest, GivenVariantsWhenAskedForGeometryThenOneCtaPerRowsPerCtaRows) {
  const LaunchGeometry g = SoftmaxFamily::launchGeometry({DType::BFloat16, 4096, 32000}, P{512, 8, 8});
  EXPECT_EQ(g.gridX, 4096u);
  EXPECT_EQ(g.blockX, 512u);
  EXPECT_EQ(g.sharedBytes, 0u);
  EXPECT_EQ(SoftmaxFamily::launchGeometry({DType::Float32, 1, 1}, P{32, 1, 1}).gridX, 1u);
  // Several rows per CTA: ceil(rows / rowsPerCta) CTAs.
  const LaunchGeometry multi = SoftmaxFamily::launchGeometry({DType::BFloat16, 32769, 128}, P{128, 8, 1, 8});
  EXPECT_EQ(multi.gridX, 4097u);
  EXPECT_EQ(multi.blockX, 128u);
  // Beyond cuLaunchKernel's grid limit the kernel strides over rows.
  EXPECT_EQ(SoftmaxFamily::launchGeometry({DType::Float32, int64_t{1} << 33, 2}, P{32, 1, 1}).gridX, 2147483647u);
}

TEST(SoftmaxFamilyTest, GivenVariantsWhenAskedForBytesThenOneReadAndOneWrite) {
  EXPECT_DOUBLE_EQ(SoftmaxFamily::bytesMoved({DType::BFloat16, 4096, 32000}), 2.0 * 4096 * 32000 * 2);
  EXPECT_DOUBLE_EQ(SoftmaxFamily::bytesMoved({DType::Float32, 8192, 128256}), 2.0 * 8192 * 128256 * 4);
}

TEST(SoftmaxFamilyTest, GivenDTypesWhenAskedForToleranceThenOneUlpOfTheOutputTypeOrTwiceFp32SummationNoise) {
  EXPECT_DOUBLE_EQ(SoftmaxFamily::tolerance(DType::BFloat16, 32000), 1.0 / 256);
  EXPECT_DOUBLE_EQ(SoftmaxFamily::tolerance(DType::Float16, 32000), 1.0 / 2048);
  EXPECT_DOUBLE_EQ(SoftmaxFamily::tolerance(DType::Float32, 128256), 2e-6);
  EXPECT_DOUBLE_EQ(SoftmaxFamily::tolerance(DType::Float32, 1), 2e-6);
}

// (Every point's round trip: FamilyConformanceTest.) The text of the JSON, and
// entries without the optional keys.
TEST(SoftmaxFamilyTest, GivenParamsWhenJsonRoundTrippedThenTheirTextAndDefaults) {
  EXPECT_EQ(P::fromJson(P{128, 8, 2, 16}.toJson()), (P{128, 8, 2, 16}));
  EXPECT_EQ((P{512, 8, 8}.toJson().dump()), R"({"items":8,"rowsPerCta":1,"threads":512,"vec":8})");
  EXPECT_EQ((P{1024, 8, 4, 1, 4}.toJson().dump()), R"({"cluster":4,"items":4,"rowsPerCta":1,"threads":1024,"vec":8})");
  EXPECT_EQ(P::fromJson(P{1024, 8, 4, 1, 4}.toJson()).cluster, 4);
  EXPECT_EQ(smemPoint(256, 8, 8, 8).toJson().dump(),
            R"({"cluster":8,"items":8,"rowsPerCta":1,"smem":true,"threads":256,"vec":8})");
  EXPECT_TRUE(P::fromJson(smemPoint(256, 8, 8, 8).toJson()).smem);
  EXPECT_EQ((P{256, 8, 4, 1, 16}.toJson().dump()), R"({"cluster":16,"items":4,"rowsPerCta":1,"threads":256,"vec":8})");
  EXPECT_EQ(P::fromJson(nlohmann::json::parse(P{256, 8, 4, 1, 16}.toJson().dump())), (P{256, 8, 4, 1, 16}));
  EXPECT_EQ(P::fromJson(nlohmann::json::parse(smemPoint(256, 8, 4, 16).toJson().dump())), smemPoint(256, 8, 4, 16));
  P piped = smemPoint(512, 4, 13, 16);
  piped.clusterRows = 4;
  EXPECT_EQ(piped.toJson().dump(),
            R"({"cluster":16,"clusterRows":4,"items":13,"rowsPerCta":1,"smem":true,"threads":512,"vec":4})");
  EXPECT_EQ(P::fromJson(nlohmann::json::parse(piped.toJson().dump())), piped);
  EXPECT_THROW(P::fromJson({{"threads", 512}, {"vec", 4}, {"items", 13}, {"clusterRows", "4"}}), Error);
  // Entries written before clusterRows existed read as a row a cluster.
  EXPECT_EQ(P::fromJson(smemPoint(512, 4, 13, 16).toJson()).clusterRows, 1);
  // Entries written before rowsPerCta existed read as one row per CTA.
  EXPECT_EQ(P::fromJson({{"threads", 512}, {"vec", 8}, {"items", 8}}), (P{512, 8, 8, 1}));
}

// (Other malformed JSON: FamilyConformanceTest.)
TEST(SoftmaxFamilyTest, GivenAnIntegerSmemWhenParsedThenThrows) {
  EXPECT_THROW(P::fromJson({{"threads", 256}, {"vec", 8}, {"items", 8}, {"cluster", 8}, {"smem", 1}}), Error);
}

TEST(SoftmaxFamilyTest, GivenParamsWhenDescribedThenNamesEveryFieldAndTheAlgorithm) {
  EXPECT_EQ(P({512, 8, 8}).describe(), "threads=512 vec=8 items=8 (register-resident)");
  EXPECT_EQ(P({1024, 4, 0}).describe(), "threads=1024 vec=4 items=0 (streaming)");
  EXPECT_EQ(P({128, 8, 1, 8}).describe(), "threads=128 vec=8 items=1 rowsPerCta=8 (register-resident)");
  EXPECT_EQ(smemPoint(256, 8, 8, 8).describe(), "threads=256 vec=8 items=8 cluster=8 (shared-memory-resident)");
  EXPECT_EQ(P({256, 8, 4, 1, 16}).describe(), "threads=256 vec=8 items=4 cluster=16 (register-resident)");
  P piped = smemPoint(512, 4, 13, 16);
  piped.clusterRows = 4;
  EXPECT_EQ(piped.describe(), "threads=512 vec=4 items=13 cluster=16 clusterRows=4 (shared-memory-resident)");
}

// (The template's path, entry point and prelude: FamilyConformanceTest.)
TEST(SoftmaxFamilyTest, GivenTheFamilyWhenAskedForSourceThenItBoundsLaunchesByTheCtaSize) {
  EXPECT_NE(SoftmaxFamily::source().find("__launch_bounds__(HK_THREADS)"), std::string::npos);
}

}  // namespace
}  // namespace hotkernel::kernels
