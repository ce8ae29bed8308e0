// Tests of the cross_entropy family on the CPU: the call guard (what the
// override refuses), the variant / parameter / pointer guards, the whitelist
// and its register budget, the parameter space, geometry, workspace and
// tolerance; and the template compiled with NVRTC (no GPU needed): every
// point for sm_90a and every non-cluster point for sm_80 at reduction mean
// (the most code), a spread of points at none and sum, without spills.

#include "hotkernel/kernels/CrossEntropyFamily.h"

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "CompileCache.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels {
namespace {

using R = CrossEntropyReduction;
using P = CrossEntropyParams;
using V = CrossEntropyVariant;

constexpr R kAllReductions[] = {R::None, R::Mean, R::Sum};

// A call the family serves: bf16 logits [4096, 32000], int64 labels, mean.
CrossEntropyCall servedCall() {
  CrossEntropyCall c;
  c.dtype = DType::BFloat16;
  c.logitsSizes = {4096, 32000};
  c.logitsStrides = {32000, 1};
  c.labelsSizes = {4096};
  c.labelsStrides = {1};
  c.reduction = 1;
  return c;
}

TEST(CrossEntropyFamilyTest, GivenAPlainCallWhenGuardedThenServedWithItsVariant) {
  V v;
  ASSERT_TRUE(CrossEntropyFamily::guardCall(servedCall(), &v));
  EXPECT_EQ(v.dtype, DType::BFloat16);
  EXPECT_EQ(v.rows, 4096);
  EXPECT_EQ(v.cols, 32000);
  EXPECT_EQ(v.reduction, R::Mean);
  for (int64_t r : {0, 1, 2}) {
    CrossEntropyCall c = servedCall();
    c.reduction = r;
    ASSERT_TRUE(CrossEntropyFamily::guardCall(c, &v)) << r;
    EXPECT_EQ(static_cast<int64_t>(v.reduction), r);
  }
  EXPECT_STREQ(reductionName(R::None), "none");
  EXPECT_STREQ(reductionName(R::Mean), "mean");
  EXPECT_STREQ(reductionName(R::Sum), "sum");
}

TEST(CrossEntropyFamilyTest, GivenWeightsSmoothingOrProbabilitiesWhenGuardedThenRefused) {
  CrossEntropyCall c = servedCall();
  c.hasWeight = true;
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "class weights";
  c = servedCall();
  c.labelSmoothing = 0.1;
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "label smoothing";
  c = servedCall();
  c.labelSmoothing = -0.0;  // equal to 0: the plain formula
  EXPECT_TRUE(CrossEntropyFamily::guardCall(c, nullptr));
  c = servedCall();
  c.labelsInt64 = false;  // class probabilities [rows, cols] (or int32 indices)
  c.labelsSizes = {4096, 32000};
  c.labelsStrides = {32000, 1};
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "probabilities as labels";
  c = servedCall();
  c.labelsInt64 = false;
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "non-int64 indices";
  c = servedCall();
  c.logitsFloating = false;
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "float64 / integer logits";
  c = servedCall();
  c.sameDevice = false;
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "two devices";
  c = servedCall();
  c.reduction = 3;
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "unknown reduction";
}

TEST(CrossEntropyFamilyTest, GivenNonContiguousOrNon2DCallsWhenGuardedThenRefused) {
  CrossEntropyCall c = servedCall();
  c.logitsStrides = {1, 4096};  // x.t()
  c.logitsSizes = {4096, 32000};
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "transposed logits";
  c = servedCall();
  c.logitsStrides = {64000, 1};  // every other row
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "strided rows";
  c = servedCall();
  c.labelsStrides = {2};
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "strided labels";
  c = servedCall();
  c.logitsSizes = {32000};
  c.logitsStrides = {1};
  c.labelsSizes = {};
  c.labelsStrides = {};
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "1-D logits (nll_loss's 1-D kernel)";
  c = servedCall();
  c.logitsSizes = {8, 32000, 512};  // [N, C, d1]: classes in dim 1, not last
  c.logitsStrides = {32000 * 512, 512, 1};
  c.labelsSizes = {8, 512};
  c.labelsStrides = {512, 1};
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "K-dimensional loss";
  c = servedCall();
  c.labelsSizes = {4095};
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "labels of another length";
  // Size-1 dims may carry any stride (torch calls them contiguous).
  c = servedCall();
  c.logitsSizes = {1, 32000};
  c.logitsStrides = {7, 1};
  c.labelsSizes = {1};
  c.labelsStrides = {3};
  EXPECT_TRUE(CrossEntropyFamily::guardCall(c, nullptr));
  c = servedCall();
  c.logitsSizes = {0, 32000};
  c.labelsSizes = {0};
  EXPECT_FALSE(CrossEntropyFamily::guardCall(c, nullptr)) << "empty batch: ATen's own special case";
}

// (The named shapes, empty, oversized and unknown variants: FamilyConformanceTest.)
TEST(CrossEntropyFamilyTest, GivenMoreThanTwoToThe24RowsWhenGuardedThenRefused) {
  EXPECT_TRUE(CrossEntropyFamily::guardVariant({DType::Float32, CrossEntropyFamily::kMaxRows, 2, R::Mean}));
  EXPECT_FALSE(CrossEntropyFamily::guardVariant({DType::Float32, CrossEntropyFamily::kMaxRows + 1, 2, R::Mean}));
}

// (Every point unique, well-formed, serving a row of one vector and round-tripping
// through JSON: FamilyConformanceTest.)
TEST(CrossEntropyFamilyTest, GivenEveryDTypeWhenListingAllPointsThenClustersAndTheRegisterBudgetFollowTheAxes) {
  for (DType d : kAllDTypes) {
    const std::vector<P> all = CrossEntropyFamily::allParameterPoints(d);
    ASSERT_FALSE(all.empty());
    std::set<std::tuple<int, int, int, int, int>> seen;
    for (const P& p : all) {
      seen.insert({p.threads, p.vec, p.unroll, p.rowsPerCta, p.cluster});
      // Note [Cross entropy register budget].
      EXPECT_LE(p.unroll * p.vec * static_cast<int>(elementSize(d)), std::min(128, 65536 / p.threads))
          << dtypeName(d) << " " << p.describe();
      if (p.cluster > 1) {
        EXPECT_EQ(p.rowsPerCta, 1) << p.describe();
        EXPECT_EQ(p.minComputeCapability(), 90) << p.describe();
      } else {
        EXPECT_EQ(p.minComputeCapability(), 0) << p.describe();
      }
    }
    const int wide = 16 / static_cast<int>(elementSize(d));
    EXPECT_TRUE(seen.count({1024, 1, 1, 1, 1})) << "no scalar point";
    EXPECT_TRUE(seen.count({1024, wide, 64 / 16, 1, 1})) << "no 16-byte 1024-thread point at 64 bytes in flight";
    EXPECT_FALSE(seen.count({1024, wide, 8, 1, 1})) << "over budget at 1024 threads";
    EXPECT_TRUE(seen.count({512, wide, 8, 1, 1}));
    EXPECT_TRUE(seen.count({128, 1, 1, 32, 1})) << "no four-threads-per-row point";
    EXPECT_TRUE(seen.count({1024, wide, 4, 1, 8})) << "no 8-CTA cluster point";
    EXPECT_TRUE(seen.count({256, wide, 4, 1, 16})) << "no 16-CTA (non-portable) cluster point";
    EXPECT_TRUE(seen.count({1024, 1, 1, 1, 16})) << "no scalar 16-CTA cluster point";
  }
}

TEST(CrossEntropyFamilyTest, GivenPointsOutsideTheWhitelistWhenGuardedThenRefused) {
  const V v{DType::BFloat16, 64, 4096, R::Sum};
  // (Threads and vector widths off the axes: FamilyConformanceTest.)
  EXPECT_FALSE(CrossEntropyFamily::guardParams(v, P{256, 8, 3, 1, 1}));
  EXPECT_FALSE(CrossEntropyFamily::guardParams(v, P{256, 8, 16, 1, 1}));
  EXPECT_FALSE(CrossEntropyFamily::guardParams(v, P{128, 8, 1, 2, 1}));   // 64 threads a row: spans warps
  EXPECT_FALSE(CrossEntropyFamily::guardParams(v, P{256, 8, 1, 1, 32}));  // wider than a warp of peers
  EXPECT_FALSE(CrossEntropyFamily::guardParams(v, P{256, 8, 1, 1, 12}));
  EXPECT_FALSE(CrossEntropyFamily::guardParams(v, P{128, 8, 1, 1, 16}));  // cluster CTAs of 128
  EXPECT_FALSE(CrossEntropyFamily::guardParams(v, P{128, 8, 1, 1, 2}));   // cluster CTAs of 128
  EXPECT_FALSE(CrossEntropyFamily::guardParams(v, P{128, 8, 1, 8, 2}));   // cluster with several rows
  EXPECT_THROW(CrossEntropyFamily::compileOptions(DType::BFloat16, P{256, 8, 1, 1, 1}, static_cast<R>(5)), Error);
}

TEST(CrossEntropyFamilyTest, GivenAClusterOfSixteenWhenGuardedThenAcceptedAsAnSm90PointWithItsGeometry) {
  const V v{DType::BFloat16, 32, 128256, R::Mean};
  const P p{256, 8, 4, 1, 16};
  EXPECT_TRUE(CrossEntropyFamily::guardParams(v, p));
  EXPECT_TRUE(CrossEntropyFamily::guardParams({DType::BFloat16, 1, 128256, R::None}, p));
  EXPECT_FALSE(CrossEntropyFamily::guardParams({DType::BFloat16, 1, 128257, R::None}, p)) << "cols % vec != 0";
  EXPECT_FALSE(CrossEntropyFamily::guardParams(v, P{256, 8, 4, 2, 16})) << "several rows per CTA";
  EXPECT_EQ(p.minComputeCapability(), 90);
  const std::vector<std::string> o = CrossEntropyFamily::compileOptions(DType::BFloat16, p, R::Mean);
  EXPECT_EQ(std::count(o.begin(), o.end(), "-DHK_CLUSTER=16"), 1);
  const LaunchGeometry g = CrossEntropyFamily::launchGeometry(v, p);
  EXPECT_EQ(g.gridX, 32u * 16);
  EXPECT_EQ(g.blockX, 256u);
  EXPECT_TRUE(CrossEntropyFamily::needsCounter(v, p));
  EXPECT_FALSE(CrossEntropyFamily::needsCounter({DType::BFloat16, 1, 128256, R::Mean}, p)) << "one cluster";
  EXPECT_EQ(P::fromJson(nlohmann::json::parse(p.toJson().dump())), p);
  EXPECT_EQ(p.toJson().dump(), R"({"cluster":16,"rowsPerCta":1,"threads":256,"unroll":4,"vec":8})");
  EXPECT_EQ(p.describe(), "threads=256 vec=8 unroll=4 cluster=16");
}

TEST(CrossEntropyFamilyTest, GivenClassesNotAMultipleOfTheVectorWhenGuardedThenOnlyNarrowerPointsAccepted) {
  for (DType d : kAllDTypes) {
    EXPECT_FALSE(CrossEntropyFamily::guardParams({d, 7, 13, R::None}, P{32, 2, 1, 1, 1})) << dtypeName(d);
    EXPECT_TRUE(CrossEntropyFamily::guardParams({d, 7, 13, R::None}, P{32, 1, 1, 1, 1})) << dtypeName(d);
    EXPECT_FALSE(CrossEntropyFamily::guardParams({d, 4, 32002, R::Mean}, P{1024, 4, 1, 1, 1})) << dtypeName(d);
    EXPECT_TRUE(CrossEntropyFamily::guardParams({d, 4, 32002, R::Mean}, P{1024, 2, 1, 1, 1})) << dtypeName(d);
  }
}

TEST(CrossEntropyFamilyTest, GivenPointersWhenGuardedThenAlignmentAndWorkspaceDecide) {
  alignas(64) static unsigned char buf[256];
  const V mean{DType::BFloat16, 8, 4096, R::Mean};
  const V none{DType::BFloat16, 8, 4096, R::None};
  const P p{256, 8, 2, 1, 1};  // 16-byte vectors
  EXPECT_EQ(CrossEntropyFamily::requiredAlignment(DType::BFloat16, p), 16u);
  EXPECT_TRUE(CrossEntropyFamily::guardPointers(buf, buf + 64, buf + 128, buf + 192, mean, p));
  EXPECT_FALSE(CrossEntropyFamily::guardPointers(buf + 2, buf + 64, buf + 128, buf + 192, mean, p)) << "logits";
  EXPECT_FALSE(CrossEntropyFamily::guardPointers(buf, buf + 68, buf + 128, buf + 192, mean, p)) << "labels";
  EXPECT_FALSE(CrossEntropyFamily::guardPointers(buf, buf + 64, buf + 129, buf + 192, mean, p)) << "out";
  EXPECT_FALSE(CrossEntropyFamily::guardPointers(buf, buf + 64, buf + 128, buf + 194, mean, p)) << "work";
  EXPECT_FALSE(CrossEntropyFamily::guardPointers(buf, buf + 64, buf + 128, nullptr, mean, p)) << "no work";
  EXPECT_TRUE(CrossEntropyFamily::guardPointers(buf, buf + 64, buf + 128, nullptr, none, p)) << "none needs none";
  EXPECT_TRUE(CrossEntropyFamily::guardPointers(buf, buf + 64, buf + 128, nullptr, V{DType::BFloat16, 1, 4096, R::Mean},
                                                p))
      << "one row needs none";
  EXPECT_FALSE(CrossEntropyFamily::guardPointers(nullptr, buf + 64, buf + 128, buf + 192, mean, p));
  EXPECT_TRUE(CrossEntropyFamily::guardPointers(buf + 2, buf + 64, buf + 130, buf + 196, mean, P{256, 1, 1, 1, 1}));
}

TEST(CrossEntropyFamilyTest, GivenDecodeShapesOnHopperWhenAskedForTheSpaceThenTheLargestClusterFirst) {
  for (int64_t rows : {1, 32}) {
    for (R r : kAllReductions) {
      const V v{DType::BFloat16, rows, 128256, r};
      const std::vector<P> space = CrossEntropyFamily::parameterSpace(v, 90);
      ASSERT_FALSE(space.empty());
      EXPECT_LE(space.size(), 12u);
      // Note [Cross entropy parameter ranking]: cluster 16 x 256 threads, ~4
      // vectors a thread in one batch of 4, then 512 threads in one batch of 2;
      // then cluster 8, led by the point the H200 served [1, 128256] with.
      ASSERT_GE(space.size(), 3u);
      EXPECT_EQ(space[0], (P{256, 8, 4, 1, 16})) << space[0].describe();
      EXPECT_EQ(space[1], (P{512, 8, 2, 1, 16})) << space[1].describe();
      EXPECT_EQ(space[2], (P{512, 8, 4, 1, 8})) << space[2].describe();
      for (const P& p : space) {
        EXPECT_TRUE(CrossEntropyFamily::guardParams(v, p)) << p.describe();
        if (p.cluster == 1) continue;
        // A cluster point's threads issue their share of the slice in one batch
        // where the register budget allows it (it does for every cluster here).
        const int64_t slice = (128256 / p.vec + p.cluster - 1) / p.cluster;
        EXPECT_GE(static_cast<int64_t>(p.threads) * p.unroll, slice) << p.describe() << ": more than one batch";
        EXPECT_LE(p.threads, slice) << p.describe() << ": idle threads";
      }
    }
  }
  // Below sm_90: no cluster; many rows: no non-portable cluster.
  for (int cc : {0, 80, 89}) {
    for (const P& p : CrossEntropyFamily::parameterSpace({DType::BFloat16, 32, 128256, R::Mean}, cc)) {
      EXPECT_EQ(p.cluster, 1) << "cc " << cc << " " << p.describe();
    }
  }
  for (int64_t rows : {264, 8192}) {
    for (const P& p : CrossEntropyFamily::parameterSpace({DType::BFloat16, rows, 128256, R::Mean}, 90)) {
      EXPECT_LE(p.cluster, 8) << rows << " rows: " << p.describe();
    }
  }
  // A slice that leaves most of a 256-thread CTA idle gets no cluster of that size.
  for (const P& p : CrossEntropyFamily::parameterSpace({DType::BFloat16, 64, 4096, R::Mean}, 90)) {
    EXPECT_LE(p.cluster, 4) << p.describe();  // 512 vectors: 128 a CTA of 4, 64 of 8
  }
  // Without clusters the same shapes still get one-CTA-a-row points.
  for (const P& p : CrossEntropyFamily::parameterSpace({DType::BFloat16, 1, 128256, R::Mean}, 80)) {
    EXPECT_EQ(p.cluster, 1) << p.describe();
  }
  // Many long rows: one CTA a row first, at the widest vector.
  const P first = CrossEntropyFamily::parameterSpace({DType::BFloat16, 8192, 128256, R::Mean}, 90).front();
  EXPECT_EQ(first.cluster, 1) << first.describe();
  EXPECT_EQ(first.vec, 8) << first.describe();
  EXPECT_GE(first.threads, 512) << first.describe();
  // Short rows, many of them: several rows per CTA first.
  const P shortFirst = CrossEntropyFamily::parameterSpace({DType::BFloat16, 32768, 128, R::None}, 90).front();
  EXPECT_GT(shortFirst.rowsPerCta, 1) << shortFirst.describe();
}

TEST(CrossEntropyFamilyTest, GivenPointsWhenAskedForGeometryThenOneGroupPerRowAndCountersOnlyForManyGroups) {
  const V v{DType::BFloat16, 32, 128256, R::Mean};
  LaunchGeometry g = CrossEntropyFamily::launchGeometry(v, P{1024, 8, 4, 1, 8});
  EXPECT_EQ(g.gridX, 256u);
  EXPECT_EQ(g.blockX, 1024u);
  EXPECT_EQ(g.sharedBytes, 0u);
  EXPECT_TRUE(CrossEntropyFamily::needsCounter(v, P{1024, 8, 4, 1, 8}));
  EXPECT_FALSE(CrossEntropyFamily::needsCounter({DType::BFloat16, 1, 128256, R::Mean}, P{1024, 8, 4, 1, 8}))
      << "one row writes its result itself";
  EXPECT_TRUE(CrossEntropyFamily::needsCounter({DType::BFloat16, 2, 128256, R::Sum}, P{1024, 8, 4, 1, 8}))
      << "cluster rows take a ticket each";
  EXPECT_FALSE(CrossEntropyFamily::needsCounter({DType::BFloat16, 32, 128256, R::None}, P{1024, 8, 4, 1, 8}));
  EXPECT_FALSE(CrossEntropyFamily::needsCounter({DType::Float32, 30, 64, R::Sum}, P{128, 2, 1, 32, 1}));
  EXPECT_TRUE(CrossEntropyFamily::needsCounter({DType::Float32, 33, 64, R::Sum}, P{128, 2, 1, 32, 1}));
  g = CrossEntropyFamily::launchGeometry({DType::Float32, 33, 64, R::Sum}, P{128, 2, 1, 32, 1});
  EXPECT_EQ(g.gridX, 2u);
  EXPECT_EQ(CrossEntropyFamily::workspaceFloats({DType::Float32, 33, 64, R::Sum}), 34);
  EXPECT_EQ(CrossEntropyFamily::workspaceFloats({DType::Float32, 33, 64, R::None}), 0);
  EXPECT_EQ(CrossEntropyFamily::workspaceFloats({DType::Float32, 2, 64, R::Mean}), 3);
  EXPECT_EQ(CrossEntropyFamily::workspaceFloats({DType::BFloat16, 1, 128256, R::Mean}), 0)
      << "one row writes its loss itself: no workspace";
  EXPECT_EQ(CrossEntropyFamily::workspaceFloats({DType::BFloat16, 1, 128256, R::Sum}), 0);
  // Bytes: the logits once dominate; FLOPs: 4 a logit.
  const double bytes = CrossEntropyFamily::bytesMoved({DType::BFloat16, 8192, 128256, R::Mean});
  EXPECT_GT(bytes, 8192.0 * 128256 * 2);
  EXPECT_LT(bytes, 8192.0 * 128256 * 2 * 1.001);
  EXPECT_EQ(CrossEntropyFamily::flops({DType::BFloat16, 2, 10, R::None}), 80.0);
}

TEST(CrossEntropyFamilyTest, GivenTheToleranceTableWhenComparingThenRowAndReducedBoundsFollowTheNote) {
  const CrossEntropyTolerance bf = CrossEntropyFamily::tolerance(DType::BFloat16, 128256);
  EXPECT_EQ(bf.rowRel, 1.0 / 128);
  EXPECT_NEAR(bf.rowAbs, 4e-6 * std::sqrt(128256.0 / 16384.0), 1e-12);
  EXPECT_TRUE(bf.rowWithin(12.0625, 12.0));      // one bf16 step at 12 (ulp 2^-4)
  EXPECT_FALSE(bf.rowWithin(12.25, 12.0));       // four steps
  EXPECT_TRUE(bf.rowWithin(NAN, NAN));
  EXPECT_FALSE(bf.rowWithin(0.0, NAN));
  EXPECT_TRUE(bf.rowWithin(INFINITY, INFINITY));
  EXPECT_FALSE(bf.rowWithin(1e30, INFINITY));
  const CrossEntropyTolerance f32 = CrossEntropyFamily::tolerance(DType::Float32, 1000);
  EXPECT_EQ(f32.rowAbs, 4e-6);
  EXPECT_FALSE(f32.rowWithin(10.0 + 1e-4, 10.0));
  // Mean of 8192 losses near 12: a wrong labels (loss off by ~1 a row) moves
  // the mean by far more than the bound; a one-ulp flip of a few rows does not.
  const double meanBound = bf.reducedBound(R::Mean, 8192, 8192 * 12.0, 15.0, 12.0);
  EXPECT_LT(meanBound, 0.1);
  EXPECT_GT(meanBound, 12.0 / 128);  // at least the final rounding (one bf16 step at 12 is 2^-4 < 12 / 128)
  const double f32Mean = f32.reducedBound(R::Mean, 8192, 8192 * 12.0, 15.0, 12.0);
  EXPECT_LT(f32Mean, 1e-3);
  EXPECT_GT(f32Mean, 4e-6);
  // Sum: the count's share is not divided away.
  EXPECT_NEAR(f32.reducedBound(R::Sum, 100, 1200.0, 15.0, 1200.0) - std::ldexp(1.0, -23) * 1200.0,
              100 * (f32.reducedBound(R::Mean, 100, 1200.0, 15.0, 0.0)), 1e-12);
}

// ---- NVRTC compiles (CPU) ---------------------------------------------------------------------

struct Job {
  DType dtype;
  P params;
  R reduction;
  std::string arch;
};

struct Result {
  bool ok = false;
  std::string error;
  int registers = -1, spillBytes = -1, stackBytes = -1;
};

std::string name(const Job& j) {
  return std::string(dtypeName(j.dtype)) + " " + j.params.describe() + " " + reductionName(j.reduction) + " " + j.arch;
}

int firstInt(const std::string& log, const std::regex& re) {
  std::smatch m;
  return std::regex_search(log, m, re) ? std::stoi(m[1].str()) : -1;
}

std::vector<Result> compileAll(const std::vector<Job>& jobs) {
  const std::string source = CrossEntropyFamily::source();
  std::vector<Result> results(jobs.size());
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
    Result& r = results[i];
    try {
      std::vector<std::string> options =
          CrossEntropyFamily::compileOptions(jobs[i].dtype, jobs[i].params, jobs[i].reduction);
      options.push_back("--ptxas-options=-v");
      const NvrtcOutput out = hotkernel::testutil::compileCached(source, "cross_entropy.cu", jobs[i].arch, options);
      static const std::regex kRegisters(R"(Used (\d+) registers)");
      static const std::regex kStack(R"((\d+) bytes stack frame)");
      static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
      static const std::regex kSpillLoads(R"((\d+) bytes spill loads)");
      r.registers = firstInt(out.log, kRegisters);
      r.stackBytes = firstInt(out.log, kStack);
      const int stores = firstInt(out.log, kSpillStores), loads = firstInt(out.log, kSpillLoads);
      r.spillBytes = stores < 0 || loads < 0 ? -1 : stores + loads;
      r.ok = out.cubin.size() > 4 && out.cubin.compare(0, 4, "\x7f" "ELF") == 0 &&
             out.cubin.find(CrossEntropyFamily::kKernelName) != std::string::npos;
      if (!r.ok) r.error = "not an ELF image holding hk_cross_entropy";
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  });
  return results;
}

void expectAllCompiledWithoutSpills(const std::vector<Job>& jobs, const std::vector<Result>& results) {
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Result& r = results[i];
    EXPECT_TRUE(r.ok) << name(jobs[i]) << ": " << r.error;
    if (!r.ok) continue;
    EXPECT_EQ(r.spillBytes, 0) << name(jobs[i]) << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stackBytes, 0) << name(jobs[i]) << " uses a stack frame";
    EXPECT_GT(r.registers, 0) << name(jobs[i]) << ": no register count in the ptxas report";
    EXPECT_LE(r.registers, 65536 / jobs[i].params.threads) << name(jobs[i]);
  }
}

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

TEST(CrossEntropyFamilyCompileTest, GivenEveryPointAtMeanWhenCompiledForSm90aAndSm80ThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<Job> jobs;
  for (DType d : kAllDTypes) {
    for (const P& p : CrossEntropyFamily::allParameterPoints(d)) {
      jobs.push_back({d, p, R::Mean, "sm_90a"});
      if (p.minComputeCapability() <= 80) jobs.push_back({d, p, R::Mean, "sm_80"});
    }
  }
  // The decode points of Note [Cross entropy parameter ranking] are among them.
  for (const P& decode : {P{256, 8, 4, 1, 16}, P{512, 8, 2, 1, 16}}) {
    EXPECT_TRUE(std::any_of(jobs.begin(), jobs.end(), [&](const Job& j) {
      return j.dtype == DType::BFloat16 && j.params == decode && j.arch == "sm_90a";
    })) << decode.describe();
  }
  const std::vector<Result> results = compileAll(jobs);
  expectAllCompiledWithoutSpills(jobs, results);
  std::map<std::string, std::string> rows;  // the register report (printed, not asserted)
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].arch != "sm_90a") continue;
    const P& p = jobs[i].params;
    char key[80];
    std::snprintf(key, sizeof(key), "%-8s t=%4d r=%2d c=%d v=%d", dtypeName(jobs[i].dtype), p.threads, p.rowsPerCta,
                  p.cluster, p.vec);
    rows[key] += " u" + std::to_string(p.unroll) + ":" + std::to_string(results[i].registers);
  }
  std::printf("registers per point (sm_90a, mean), unroll:registers\n");
  for (const auto& [key, line] : rows) std::printf("  %s %s\n", key.c_str(), line.c_str());
}

TEST(CrossEntropyFamilyCompileTest, GivenASpreadOfPointsAtNoneAndSumWhenCompiledThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  // Per (threads, rowsPerCta, cluster) shape at the narrowest and widest
  // vector, the largest unroll (most registers).
  std::vector<Job> jobs;
  for (DType d : kAllDTypes) {
    std::map<std::tuple<int, int, int, int>, P> largest;
    for (const P& p : CrossEntropyFamily::allParameterPoints(d)) {
      if (p.vec != 1 && p.vec != static_cast<int>(16 / elementSize(d))) continue;
      largest[{p.threads, p.rowsPerCta, p.cluster, p.vec}] = p;  // unroll ascends within a shape
    }
    for (const auto& [key, p] : largest) {
      for (R r : {R::None, R::Sum}) {
        jobs.push_back({d, p, r, "sm_90a"});
        if (p.minComputeCapability() <= 80) jobs.push_back({d, p, r, "sm_80"});
      }
    }
  }
  expectAllCompiledWithoutSpills(jobs, compileAll(jobs));
}

TEST(CrossEntropyFamilyCompileTest, GivenAClusterPointWhenCompiledForSm80ThenTheTemplateRefusesIt) {
  SKIP_WITHOUT_NVRTC();
  for (const P& p : {P{1024, 8, 4, 1, 8}, P{256, 8, 4, 1, 16}}) {
    EXPECT_THROW(hotkernel::testutil::compileCached(CrossEntropyFamily::source(), "cross_entropy.cu", "sm_80",
                                CrossEntropyFamily::compileOptions(DType::BFloat16, p, R::Mean)),
                 Error)
        << p.describe();
  }
}

TEST(CrossEntropyFamilyCompileTest, GivenDefinesOutsideTheTemplatesLimitsWhenCompiledThenTheTemplateRefuses) {
  SKIP_WITHOUT_NVRTC();
  const std::string source = CrossEntropyFamily::source();
  const std::vector<std::vector<std::string>> bad = {
      {"-DHK_DTYPE=2", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=16", "-DHK_UNROLL=1", "-DHK_REDUCTION=0"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=384", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_UNROLL=1", "-DHK_REDUCTION=0"},
      {"-DHK_DTYPE=3", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_UNROLL=1", "-DHK_REDUCTION=0"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_UNROLL=9", "-DHK_REDUCTION=0"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=128", "-DHK_ROWS=2", "-DHK_VEC=4", "-DHK_UNROLL=1", "-DHK_REDUCTION=0"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_UNROLL=1", "-DHK_REDUCTION=3"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_UNROLL=1"},  // missing define
      {"-DHK_DTYPE=2", "-DHK_THREADS=128", "-DHK_ROWS=8", "-DHK_VEC=8", "-DHK_UNROLL=1", "-DHK_REDUCTION=1",
       "-DHK_CLUSTER=2"},
      {"-DHK_DTYPE=2", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=8", "-DHK_UNROLL=1", "-DHK_REDUCTION=1",
       "-DHK_CLUSTER=3"},
      {"-DHK_DTYPE=2", "-DHK_THREADS=256", "-DHK_ROWS=1", "-DHK_VEC=8", "-DHK_UNROLL=4", "-DHK_REDUCTION=1",
       "-DHK_CLUSTER=32"},
  };
  for (const std::vector<std::string>& options : bad) {
    EXPECT_THROW(hotkernel::testutil::compileCached(source, "cross_entropy.cu", "sm_90a", options), Error) << options.back();
  }
}

}  // namespace
}  // namespace hotkernel::kernels
