// Tests of the layer_norm family: guards, whitelist, parameter space, options,
// geometry, bytes, tolerance (CPU), and the template compiled with NVRTC for
// sm_90a / sm_80 without spills (CPU too: NVRTC needs no GPU). The parameter
// machinery shared with rms_norm (src/NormCommon.cpp) is covered in
// RmsNormFamilyTest.cpp; this file checks what differs: the bias flag, mean
// and rstd, four weight / bias combinations.

#include "hotkernel/kernels/LayerNormFamily.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <tuple>

#include "CompileCache.h"
#include "NormTestUtil.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels {
namespace {

using V = LayerNormVariant;
using P = LayerNormParams;

std::vector<V> allShapes() {
  std::vector<V> out;
  for (DType d : kAllDTypes) {
    for (auto [w, b] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}, std::pair{false, false}}) {
      for (auto [rows, cols] : testutil::namedNormShapes()) out.push_back({d, rows, cols, w, b});
    }
  }
  return out;
}

std::string name(const V& v) {
  return std::string(dtypeName(v.dtype)) + "[" + std::to_string(v.rows) + "," + std::to_string(v.cols) + "]" +
         (v.hasWeight ? " w" : "") + (v.hasBias ? " b" : "");
}

// (Empty, oversized and unknown variants: FamilyConformanceTest.)
TEST(LayerNormFamilyTest, GivenAnOverflowingSizeOrTwoToThe31RowsWhenGuardedThenRefused) {
  EXPECT_FALSE(LayerNormFamily::guardVariant({DType::Float32, INT64_MAX / 4, 8}));
  // More rows than one launch's CTAs cover (Note [One row group a CTA] in rms_norm.cu).
  EXPECT_FALSE(LayerNormFamily::guardVariant({DType::Float32, int64_t{1} << 31, 2}));
  EXPECT_TRUE(LayerNormFamily::guardVariant({DType::Float32, (int64_t{1} << 31) - 1, 2}));
}

// (Every point unique, well-formed and serving a row of one vector: FamilyConformanceTest.)
TEST(LayerNormFamilyTest, GivenEveryDTypeWhenListingAllPointsThenRmsNormsWhitelistWithinTheRegisterBudget) {
  for (DType d : kAllDTypes) {
    const std::vector<P> all = LayerNormFamily::allParameterPoints(d);
    ASSERT_FALSE(all.empty());
    std::set<std::tuple<int, int, int, int>> seen;
    for (const P& p : all) {
      seen.insert({p.threads, p.vec, p.items, p.rowsPerCta});
      EXPECT_LE(p.items * p.vec, std::min(128, 32768 / p.threads)) << dtypeName(d) << " " << p.describe();
    }
    EXPECT_TRUE(seen.count({1024, 1, 0, 1})) << "no scalar streaming point";
    EXPECT_TRUE(seen.count({128, 1, 1, 32})) << "no four-threads-per-row point";
    // The same whitelist as rms_norm (Note [Norm register budget]: weight and
    // bias are loaded after the reductions and do not count), cluster and grid-split points included.
    EXPECT_EQ(all, detail::normAllPoints(d)) << dtypeName(d);
    EXPECT_EQ(all, RmsNormFamily::allParameterPoints(d)) << dtypeName(d);
  }
}

// Note [Split layer norm rows] over a cooperative grid: rms_norm's points, a (mean, M2) pair a CTA.
TEST(LayerNormFamilyTest, GivenAGridSplitPointWhenAskedForGeometryWorkspaceAndSpaceThenACooperativeGridOfPairs) {
  const V four{DType::BFloat16, 4, int64_t{1} << 21, true, true};
  const P p{1024, 8, 0, 1, 1, 32};
  ASSERT_TRUE(LayerNormFamily::guardParams(four, p));
  const LaunchGeometry g = LayerNormFamily::launchGeometry(four, p);
  EXPECT_EQ(g.gridX, 128u);
  EXPECT_TRUE(g.cooperative);
  EXPECT_EQ(LayerNormFamily::workspaceFloats(four, p), 2 * 4 * 32 + 1);
  EXPECT_EQ(LayerNormFamily::workspaceFloats(four, P{1024, 8, 0, 1, 16}), 0);
  EXPECT_EQ(LayerNormFamily::maxWorkspaceFloats(4), 2 * 4 * 64 + 1);
  EXPECT_EQ(LayerNormFamily::maxWorkspaceFloats(100000), 2 * 1024 + 1);
  const std::vector<std::string> o = LayerNormFamily::compileOptions(DType::BFloat16, p, true, true);
  EXPECT_NE(std::find(o.begin(), o.end(), "-DHK_SPLIT=32"), o.end());
  // The space leads with them for 4 rows of 2M, as rms_norm's does.
  EXPECT_EQ(LayerNormFamily::parameterSpace(four, 90).front(), p);
  EXPECT_EQ(LayerNormFamily::parameterSpace(four, 90), RmsNormFamily::parameterSpace({DType::BFloat16, 4, int64_t{1} << 21, true}, 90));
}

TEST(LayerNormFamilyTest, GivenTheRegisterBudgetWhenAskedForTheLongestResidentRowThen32KiForEveryDType) {
  for (DType d : kAllDTypes) {
    int64_t longest = 0;
    for (const P& p : LayerNormFamily::allParameterPoints(d)) {
      longest = std::max<int64_t>(longest, static_cast<int64_t>(p.rowThreads()) * p.vec * p.items);
    }
    EXPECT_EQ(longest, 32768) << dtypeName(d);
  }
  EXPECT_TRUE(LayerNormFamily::guardParams({DType::BFloat16, 64, 16384}, P{1024, 8, 2}));
  EXPECT_TRUE(LayerNormFamily::guardParams({DType::Float32, 64, 32768}, P{1024, 4, 8}));
  EXPECT_FALSE(LayerNormFamily::guardParams({DType::Float32, 64, 32768}, P{1024, 4, 12}));  // 48 values
}

TEST(LayerNormFamilyTest, GivenOddOrUnalignedColsWhenGuardedThenOnlyNarrowPointsAccepted) {
  for (DType d : kAllDTypes) {
    EXPECT_FALSE(LayerNormFamily::guardParams({d, 7, 13}, P{32, 2, 1})) << dtypeName(d);
    EXPECT_TRUE(LayerNormFamily::guardParams({d, 7, 13}, P{32, 1, 1})) << dtypeName(d);
    EXPECT_FALSE(LayerNormFamily::guardParams({d, 33, 4097}, P{512, 2, 0})) << dtypeName(d);
    EXPECT_TRUE(LayerNormFamily::guardParams({d, 33, 4097}, P{512, 1, 0})) << dtypeName(d);
    EXPECT_TRUE(LayerNormFamily::guardParams({d, 33, 4097}, P{1024, 1, 6})) << dtypeName(d);
  }
  EXPECT_FALSE(LayerNormFamily::guardParams({DType::Float16, 4, 4100}, P{512, 8, 1}));
  EXPECT_TRUE(LayerNormFamily::guardParams({DType::Float16, 4, 4100}, P{512, 4, 3}));
}

// Every space also holds a streaming point and launches without shared memory;
// the rest of the contract of a space is FamilyConformanceTest's.
TEST(LayerNormFamilyTest, GivenNamedShapesAndASweepWhenAskedForTheSpaceThenAStreamingPointAndNoSharedMemory) {
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
    for (const P& p : LayerNormFamily::parameterSpace(v)) {
      streaming = streaming || !p.registerResident();
      ASSERT_EQ(LayerNormFamily::launchGeometry(v, p).sharedBytes, 0u) << name(v) << " " << p.describe();
    }
    ASSERT_TRUE(streaming) << name(v) << " has no streaming point";
  }
}

TEST(LayerNormFamilyTest, GivenHiddenRowsWhenAskedForTheSpaceThenTheFirstGuessIsRegisterResidentAt16Bytes) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 16384, 8192}, V{d, 4096, 4096}, V{d, 1, 8192}}) {
      const std::vector<P> space = LayerNormFamily::parameterSpace(v);
      ASSERT_FALSE(space.empty()) << name(v);
      EXPECT_TRUE(space.front().registerResident()) << name(v) << " " << space.front().describe();
      EXPECT_EQ(space.front().vec * static_cast<int>(elementSize(d)), 16) << name(v);
    }
  }
  EXPECT_EQ(LayerNormFamily::parameterSpace({DType::BFloat16, 16384, 8192}).front(), (P{256, 8, 4}));
  EXPECT_EQ(LayerNormFamily::parameterSpace({DType::Float32, 16384, 8192}).front(), (P{512, 4, 4}));
}

TEST(LayerNormFamilyTest, GivenRowsTooLongForRegistersWhenAskedForTheSpaceThenOnlyStreamingPoints) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 1, 1000003}, V{d, 5, 1 << 20}, V{d, 2, 32769}, V{d, 64, 40960}}) {
      for (const P& p : LayerNormFamily::parameterSpace(v)) EXPECT_FALSE(p.registerResident()) << name(v);
    }
  }
  // Up to 32768 elements a row stay in registers, in every dtype.
  for (DType d : kAllDTypes) {
    EXPECT_TRUE(LayerNormFamily::parameterSpace({d, 4, 32768}).front().registerResident()) << dtypeName(d);
    EXPECT_TRUE(LayerNormFamily::parameterSpace({d, 4, 24576}).front().registerResident()) << dtypeName(d);
  }
}

TEST(LayerNormFamilyTest, GivenManyShortRowsWhenAskedForTheSpaceThenSeveralRowsPerCtaComeFirst) {
  for (DType d : kAllDTypes) {
    for (const V& v : {V{d, 32768, 128}, V{d, 4096, 1024}, V{d, 1000, 50}}) {
      const std::vector<P> space = LayerNormFamily::parameterSpace(v);
      ASSERT_FALSE(space.empty()) << name(v);
      EXPECT_GT(space.front().rowsPerCta, 1) << name(v) << " " << space.front().describe();
    }
    for (const P& p : LayerNormFamily::parameterSpace({d, 7, 13})) EXPECT_EQ(p.threads, 32) << p.describe();
  }
}

TEST(LayerNormFamilyTest, GivenPointersWhenAlignedOrNotThenGuardFollowsVectorWidthAndTheFlags) {
  alignas(64) static unsigned char buffer[512];
  const float* mean = reinterpret_cast<const float*>(buffer + 256);
  const float* rstd = reinterpret_cast<const float*>(buffer + 384);
  const P wide{256, 8, 2};
  const V both{DType::BFloat16, 4, 4096, true, true}, none{DType::BFloat16, 4, 4096, false, false};
  const V weightOnly{DType::BFloat16, 4, 4096, true, false}, biasOnly{DType::BFloat16, 4, 4096, false, true};
  unsigned char* in = buffer;
  unsigned char* w = buffer + 64;
  unsigned char* b = buffer + 96;
  unsigned char* out = buffer + 128;
  EXPECT_EQ(LayerNormFamily::requiredAlignment(DType::BFloat16, wide), 16u);
  EXPECT_TRUE(LayerNormFamily::guardPointers(in, w, b, out, mean, rstd, both, wide));
  EXPECT_TRUE(LayerNormFamily::guardPointers(in, w, b, in, mean, rstd, both, wide));  // in place
  EXPECT_FALSE(LayerNormFamily::guardPointers(in, w, nullptr, out, mean, rstd, both, wide));
  EXPECT_FALSE(LayerNormFamily::guardPointers(in, nullptr, b, out, mean, rstd, both, wide));
  EXPECT_FALSE(LayerNormFamily::guardPointers(in, w, b + 8, out, mean, rstd, both, wide));
  EXPECT_FALSE(LayerNormFamily::guardPointers(in, w + 4, b, out, mean, rstd, both, wide));
  EXPECT_TRUE(LayerNormFamily::guardPointers(in, nullptr, nullptr, out, mean, rstd, none, wide));
  EXPECT_TRUE(LayerNormFamily::guardPointers(in, w, nullptr, out, mean, rstd, weightOnly, wide));
  EXPECT_TRUE(LayerNormFamily::guardPointers(in, nullptr, b, out, mean, rstd, biasOnly, wide));
  EXPECT_FALSE(LayerNormFamily::guardPointers(in, nullptr, b + 2, out, mean, rstd, biasOnly, wide));
  EXPECT_FALSE(LayerNormFamily::guardPointers(in + 8, w, b, out, mean, rstd, both, wide));
  EXPECT_FALSE(LayerNormFamily::guardPointers(in, w, b, out + 8, mean, rstd, both, wide));
  EXPECT_FALSE(LayerNormFamily::guardPointers(in, w, b, out, nullptr, rstd, both, wide));
  EXPECT_FALSE(LayerNormFamily::guardPointers(in, w, b, out, mean, nullptr, both, wide));
  EXPECT_FALSE(LayerNormFamily::guardPointers(in, w, b, out, reinterpret_cast<const float*>(buffer + 258), rstd, both,
                                              wide));
  EXPECT_TRUE(LayerNormFamily::guardPointers(in + 2, w + 2, b + 2, out + 2, mean, rstd, both, P{256, 1, 0}));
}

TEST(LayerNormFamilyTest, GivenAPointWhenAskedForCompileOptionsThenTheSevenDefines) {
  EXPECT_EQ(LayerNormFamily::compileOptions(DType::BFloat16, P{256, 8, 4}, true, true),
            (std::vector<std::string>{"-DHK_DTYPE=2", "-DHK_THREADS=256", "-DHK_ROWS=1", "-DHK_VEC=8", "-DHK_ITEMS=4",
                                      "-DHK_HAS_WEIGHT=1", "-DHK_HAS_BIAS=1"}));
  EXPECT_EQ(LayerNormFamily::compileOptions(DType::Float32, P{1024, 4, 0}, false, true),
            (std::vector<std::string>{"-DHK_DTYPE=0", "-DHK_THREADS=1024", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=0",
                                      "-DHK_HAS_WEIGHT=0", "-DHK_HAS_BIAS=1"}));
  EXPECT_EQ(LayerNormFamily::compileOptions(DType::Float16, P{128, 8, 1, 16}, true, false).back(), "-DHK_HAS_BIAS=0");
  EXPECT_THROW(LayerNormFamily::compileOptions(DType::Float32, P{1024, 4, 12}, true, true), Error);
  // Note [Specialized columns] in rms_norm.cu: the variant's column count last.
  EXPECT_EQ(LayerNormFamily::compileOptions(DType::BFloat16, P{256, 8, 4}, true, true, 8192).back(),
            "-DHK_COLS=8192LL");
  EXPECT_THROW(LayerNormFamily::compileOptions(DType::BFloat16, P{256, 8, 4}, true, true, -8), Error);
  EXPECT_THROW(LayerNormFamily::compileOptions(DType::BFloat16, P{100, 8, 1}, true, true), Error);
}

TEST(LayerNormFamilyTest, GivenVariantsWhenAskedForGeometryAndBytesThenOneCtaPerRowAndOneReadOneWrite) {
  const LaunchGeometry g = LayerNormFamily::launchGeometry({DType::BFloat16, 16384, 8192}, P{256, 8, 4});
  EXPECT_EQ(g.gridX, 16384u);
  EXPECT_EQ(g.blockX, 256u);
  EXPECT_EQ(g.sharedBytes, 0u);
  EXPECT_EQ(LayerNormFamily::launchGeometry({DType::BFloat16, 1001, 64}, P{128, 8, 1, 16}).gridX, 63u);
  EXPECT_DOUBLE_EQ(LayerNormFamily::bytesMoved({DType::BFloat16, 16384, 8192, true, true}),
                   2.0 * 16384 * 8192 * 2 + 2.0 * 8192 * 2 + 16384 * 8);
  EXPECT_DOUBLE_EQ(LayerNormFamily::bytesMoved({DType::Float32, 10, 100, false, true}), 2.0 * 1000 * 4 + 400 + 80);
  EXPECT_DOUBLE_EQ(LayerNormFamily::bytesMoved({DType::Float32, 10, 100, false, false}), 2.0 * 1000 * 4 + 80);
}

TEST(LayerNormFamilyTest, GivenDTypesWhenAskedForToleranceThenOneOutputUlpPlusFp32NoiseAndAWiderFloor) {
  const double s = 4e-6;
  for (DType d : kAllDTypes) {
    const NormTolerance t = LayerNormFamily::tolerance(d, 4096);
    EXPECT_DOUBLE_EQ(t.statRel, s) << dtypeName(d);
    EXPECT_DOUBLE_EQ(t.outAbs, 4 * s) << dtypeName(d);
  }
  EXPECT_DOUBLE_EQ(LayerNormFamily::tolerance(DType::Float32, 8192).outRel, s);
  EXPECT_DOUBLE_EQ(LayerNormFamily::tolerance(DType::Float16, 8192).outRel, 1.0 / 1024 + s);
  EXPECT_DOUBLE_EQ(LayerNormFamily::tolerance(DType::BFloat16, 8192).outRel, 1.0 / 128 + s);
  EXPECT_DOUBLE_EQ(LayerNormFamily::tolerance(DType::BFloat16, 16384 * 16).statRel, 4 * s);
  // Mean near zero: the bound follows the row's spread.
  const NormTolerance t = LayerNormFamily::tolerance(DType::Float32, 4096);
  EXPECT_TRUE(t.meanWithin(3e-6, 0.0, 1.0));
  EXPECT_TRUE(t.meanWithin(100.0 + 3e-4, 100.0, 1.0));  // 4e-6 * 101
  EXPECT_FALSE(t.meanWithin(100.001, 100.0, 1.0));
  EXPECT_TRUE(t.meanWithin(std::nan(""), std::nan(""), std::nan("")));
}

// (The template's path, entry point and prelude: FamilyConformanceTest.)
TEST(LayerNormFamilyTest, GivenTheFamilyWhenAskedForSourceThenATemplateOfItsOwn) {
  EXPECT_NE(kernelSource("rms_norm").sha256(), kernelSource(LayerNormFamily::kName).sha256());
}

// --- NVRTC -------------------------------------------------------------------

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

std::vector<testutil::CompileResult> compileLayer(const std::vector<testutil::CompileJob>& jobs) {
  return testutil::compileAll(LayerNormFamily::source(), "layer_norm.cu", LayerNormFamily::kKernelName, jobs,
                              [](const testutil::CompileJob& j) {
                                std::vector<std::string> o = detail::normCompileOptions(j.dtype, j.params);
                                o.insert(o.end(), j.flags.begin(), j.flags.end());
                                return o;
                              });
}

// Every one-CTA point of every dtype and a sample of the split-row points (testutil::clusterSample),
// with weight and bias (the register budget's case).
TEST(LayerNormFamilyCompileTest, GivenEveryPointWithWeightAndBiasWhenCompiledForSm90aThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::CompileJob> jobs;
  for (DType d : kAllDTypes) {
    for (const P& p : testutil::compiledPoints(d, LayerNormFamily::allParameterPoints(d))) {
      jobs.push_back({d, p, {"-DHK_HAS_WEIGHT=1", "-DHK_HAS_BIAS=1"}, "sm_90a"});
    }
  }
  const auto results = compileLayer(jobs);
  testutil::expectAllCompiledWithoutSpills(jobs, results);
  testutil::printRegisters("layer_norm with weight and bias, registers per point (sm_90a)", jobs, results);
}

// The other weight / bias combinations: a spread of points (every point under
// HOTKERNEL_NORM_COMPILE_ALL=1), through the public compileOptions.
TEST(LayerNormFamilyCompileTest, GivenPointsWithOneOrNoArrayWhenCompiledForSm90aThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::CompileJob> jobs;
  for (DType d : kAllDTypes) {
    for (const P& p : testutil::otherCombinationPoints(d, LayerNormFamily::allParameterPoints(d))) {
      jobs.push_back({d, p, {"-DHK_HAS_WEIGHT=1", "-DHK_HAS_BIAS=0"}, "sm_90a"});
      jobs.push_back({d, p, {"-DHK_HAS_WEIGHT=0", "-DHK_HAS_BIAS=1"}, "sm_90a"});
      jobs.push_back({d, p, {"-DHK_HAS_WEIGHT=0", "-DHK_HAS_BIAS=0"}, "sm_90a"});
    }
  }
  const auto results = testutil::compileAll(
      LayerNormFamily::source(), "layer_norm.cu", LayerNormFamily::kKernelName, jobs, [](const testutil::CompileJob& j) {
        return LayerNormFamily::compileOptions(j.dtype, j.params, j.flags[0] == "-DHK_HAS_WEIGHT=1",
                                               j.flags[1] == "-DHK_HAS_BIAS=1");
      });
  testutil::expectAllCompiledWithoutSpills(jobs, results);
}

// Note [Specialized columns] in rms_norm.cu, what the optimizer compiles: the
// spaces of the benchmarked and some odd column counts, without spills.
TEST(LayerNormFamilyCompileTest, GivenVariantColumnsWhenCompiledSpecializedThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::CompileJob> jobs;
  const std::pair<DType, int64_t> variants[] = {
      {DType::BFloat16, 8192}, {DType::BFloat16, 4096}, {DType::Float16, 4097}, {DType::Float32, 13},
      {DType::Float32, 1000000}};
  for (auto [d, cols] : variants) {
    for (const P& p : LayerNormFamily::parameterSpace({d, 4096, cols, true, true})) {
      jobs.push_back({d, p, {std::to_string(cols)}, "sm_90a"});
    }
  }
  const auto results = testutil::compileAll(
      LayerNormFamily::source(), "layer_norm.cu", LayerNormFamily::kKernelName, jobs, [](const testutil::CompileJob& j) {
        return LayerNormFamily::compileOptions(j.dtype, j.params, true, true, std::stoll(j.flags[0]));
      });
  testutil::expectAllCompiledWithoutSpills(jobs, results);
}

TEST(LayerNormFamilyCompileTest, GivenASpreadOfPointsWhenCompiledForSm80ThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::CompileJob> jobs;
  for (DType d : kAllDTypes) {
    for (const P& p : testutil::spreadOf(d, LayerNormFamily::allParameterPoints(d))) {
      jobs.push_back({d, p, {"-DHK_HAS_WEIGHT=1", "-DHK_HAS_BIAS=1"}, "sm_80"});
    }
  }
  testutil::expectAllCompiledWithoutSpills(jobs, compileLayer(jobs));
}

TEST(LayerNormFamilyCompileTest, GivenDefinesOutsideTheTemplatesLimitsWhenCompiledThenTheTemplateRefuses) {
  SKIP_WITHOUT_NVRTC();
  const std::string source = LayerNormFamily::source();
  const std::vector<std::string> good = {"-DHK_DTYPE=2", "-DHK_THREADS=256", "-DHK_ROWS=1",    "-DHK_VEC=8",
                                         "-DHK_ITEMS=4", "-DHK_HAS_WEIGHT=1", "-DHK_HAS_BIAS=1"};
  EXPECT_NO_THROW(hotkernel::testutil::compileCached(source, "layer_norm.cu", "sm_90a", good));
  auto with = [&](size_t index, const std::string& option) {
    std::vector<std::string> o = good;
    if (option.empty()) {
      o.erase(o.begin() + static_cast<std::ptrdiff_t>(index));
    } else {
      o[index] = option;
    }
    return o;
  };
  const std::vector<std::vector<std::string>> bad = {
      with(0, "-DHK_DTYPE=5"),      with(1, "-DHK_THREADS=96"),   with(2, "-DHK_ROWS=2"),
      with(3, "-DHK_VEC=16"),       with(4, "-DHK_ITEMS=20"),     with(5, "-DHK_HAS_WEIGHT=3"),
      with(6, "-DHK_HAS_BIAS=-1"),  with(6, ""),                  with(5, ""),
  };
  for (const std::vector<std::string>& options : bad) {
    std::string joined;
    for (const std::string& o : options) joined += o + " ";
    EXPECT_THROW(hotkernel::testutil::compileCached(source, "layer_norm.cu", "sm_90a", options), Error) << joined;
  }
  // Clusters: 2, 4, 8 or 16 CTAs, one row a CTA, sm_90.
  std::vector<std::string> clustered = good;
  clustered.push_back("-DHK_CLUSTER=4");
  EXPECT_NO_THROW(hotkernel::testutil::compileCached(source, "layer_norm.cu", "sm_90a", clustered));
  EXPECT_THROW(hotkernel::testutil::compileCached(source, "layer_norm.cu", "sm_80", clustered), Error);
  clustered.back() = "-DHK_CLUSTER=3";
  EXPECT_THROW(hotkernel::testutil::compileCached(source, "layer_norm.cu", "sm_90a", clustered), Error);
}

// Split rows (Note [Split layer norm rows]): the space and the options, as rms_norm's.
TEST(LayerNormFamilyTest, GivenFewLongRowsOnSm90WhenAskedForTheSpaceThenSplitRowPointsAndTheClusterDefine) {
  const LayerNormVariant eight{DType::Float32, 8, int64_t{1} << 22, true, true};
  const std::vector<P> space = LayerNormFamily::parameterSpace(eight, 90);
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(space.front(), (P{1024, 4, 0, 1, 16}));
  for (const P& p : space) EXPECT_TRUE(LayerNormFamily::guardParams(eight, p)) << p.describe();
  for (const P& p : LayerNormFamily::parameterSpace(eight)) EXPECT_EQ(p.cluster, 1) << p.describe();
  const std::vector<std::string> o = LayerNormFamily::compileOptions(DType::Float32, P{1024, 4, 0, 1, 16}, true, true);
  EXPECT_NE(std::find(o.begin(), o.end(), "-DHK_CLUSTER=16"), o.end());
  EXPECT_EQ(LayerNormFamily::launchGeometry(eight, P{1024, 4, 0, 1, 16}).gridX, 128u);
}

}  // namespace
}  // namespace hotkernel::kernels
