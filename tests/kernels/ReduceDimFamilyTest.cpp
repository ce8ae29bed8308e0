// Tests of the middle-dim reduction family on the CPU: the variant, parameter
// and pointer guards, the whitelist and its shared memory bound, the parameter
// space, options, geometry and bytes; and the template compiled with NVRTC (no
// GPU needed): every op and dtype at the points of the largest shared memory,
// the most threads and the widest tiles, for sm_90a, without spills.

#include "hotkernel/kernels/ReduceDimFamily.h"

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "CompileCache.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels {
namespace {

using P = ReduceDimParams;
using V = ReduceDimVariant;

// x.sum(dim=1) on a contiguous float32 [32, 4096, 4096]: ~2 GB.
V middle(ReduceOp op = ReduceOp::Sum, DType d = DType::Float32) { return V{d, 32, 4096, 4096, op}; }

TEST(ReduceDimFamilyTest, GivenVariantsWhenGuardedThenOnlyMiddleDimsWithinTheLimits) {
  for (ReduceOp op : kAllReduceOps) EXPECT_TRUE(ReduceDimFamily::guardVariant(middle(op))) << reduceOpName(op);
  EXPECT_TRUE(ReduceDimFamily::guardVariant({DType::BFloat16, 1, 7, 2, ReduceOp::Argmin}));  // dim 0 of [7, 2]
  EXPECT_FALSE(ReduceDimFamily::guardVariant({DType::Float32, 32, 4096, 1, ReduceOp::Sum}));  // the last dim
  EXPECT_FALSE(ReduceDimFamily::guardVariant({DType::Float32, 0, 4096, 64, ReduceOp::Sum}));
  EXPECT_FALSE(ReduceDimFamily::guardVariant({DType::Float32, 4, 0, 64, ReduceOp::Sum}));
  EXPECT_FALSE(ReduceDimFamily::guardVariant({DType::Float32, 1, ReduceDimFamily::kMaxReduced + 1, 2, ReduceOp::Sum}));
  EXPECT_FALSE(ReduceDimFamily::guardVariant({DType::Float32, int64_t{1} << 40, int64_t{1} << 20, 64, ReduceOp::Sum}));
  EXPECT_FALSE(ReduceDimFamily::guardVariant({static_cast<DType>(9), 4, 4, 4, ReduceOp::Sum}));
  EXPECT_FALSE(ReduceDimFamily::guardVariant({DType::Float32, 4, 4, 4, static_cast<ReduceOp>(kReduceOpCount)}));
}

// A call the family serves: x.sum(dim=1) on a contiguous bf16 [8, 512, 4096].
ReduceCall middleCall(ReduceOp op = ReduceOp::Sum) {
  ReduceCall c;
  c.op = op;
  c.dtype = DType::BFloat16;
  c.sizes = {8, 512, 4096};
  c.strides = {512 * 4096, 4096, 1};
  c.dims = std::vector<int64_t>{1};
  return c;
}

TEST(ReduceDimFamilyTest, GivenOneDimThatIsNotTheLastWhenAskedForTheMiddleDimThenItNormalizedElseMinusOne) {
  const int64_t one[] = {1}, minusTwo[] = {-2}, zero[] = {0}, last[] = {2}, minusOne[] = {-1}, two[] = {0, 1},
                outOfRange[] = {-4};
  EXPECT_EQ(ReduceDimFamily::middleDim(3, one, 1), 1);
  EXPECT_EQ(ReduceDimFamily::middleDim(3, minusTwo, 1), 1);
  EXPECT_EQ(ReduceDimFamily::middleDim(3, zero, 1), 0);
  EXPECT_EQ(ReduceDimFamily::middleDim(3, last, 1), -1);
  EXPECT_EQ(ReduceDimFamily::middleDim(3, minusOne, 1), -1);
  EXPECT_EQ(ReduceDimFamily::middleDim(3, two, 2), -1);
  EXPECT_EQ(ReduceDimFamily::middleDim(3, outOfRange, 1), -1);
  EXPECT_EQ(ReduceDimFamily::middleDim(3, one, 0), -1);
  EXPECT_EQ(ReduceDimFamily::middleDim(1, zero, 1), -1);  // the only dim is the last
}

TEST(ReduceDimFamilyTest, GivenMiddleDimCallsOfEveryOpWhenGuardedThenServedAsOuterReducedInner) {
  for (ReduceOp op : kAllReduceOps) {
    V v;
    ASSERT_TRUE(ReduceDimFamily::guardCall(middleCall(op), &v)) << reduceOpName(op);
    EXPECT_EQ(v.dtype, DType::BFloat16);
    EXPECT_EQ(v.outer, 8);
    EXPECT_EQ(v.reduced, 512);
    EXPECT_EQ(v.inner, 4096);
    EXPECT_EQ(v.op, op);
  }
  ReduceCall first = middleCall(ReduceOp::Argmin);
  first.dims = std::vector<int64_t>{-3};  // dim 0: outer 1
  V v;
  ASSERT_TRUE(ReduceDimFamily::guardCall(first, &v));
  EXPECT_EQ(v.outer, 1);
  EXPECT_EQ(v.reduced, 8);
  EXPECT_EQ(v.inner, 512 * 4096);
  ReduceCall fourD = middleCall(ReduceOp::Mean);
  fourD.sizes = {2, 3, 5, 7};
  fourD.strides = {105, 35, 7, 1};
  fourD.dims = std::vector<int64_t>{-3};
  ASSERT_TRUE(ReduceDimFamily::guardCall(fourD, &v));
  EXPECT_EQ(v.outer, 2);
  EXPECT_EQ(v.reduced, 3);
  EXPECT_EQ(v.inner, 35);
  ReduceCall kept = middleCall(ReduceOp::Amax);
  kept.keepdim = true;
  kept.sizes = {8, 512, 1, 4096};
  kept.strides = {512 * 4096, 4096, 17, 1};  // the stride of a size-1 dim does not matter
  ASSERT_TRUE(ReduceDimFamily::guardCall(kept, &v));
  EXPECT_EQ(v.inner, 4096);
}

TEST(ReduceDimFamilyTest, GivenCallsTheMiddleDimLayoutMustNotServeWhenGuardedThenRefused) {
  auto refused = [](const ReduceCall& c) { return !ReduceDimFamily::guardCall(c, nullptr); };
  ReduceCall c = middleCall();
  c.dims = std::vector<int64_t>{-1};  // the last dim: the last-dim layout's
  EXPECT_TRUE(refused(c));
  c.dims = std::nullopt;  // every dim
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{};
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{0, 1};  // two dims
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{3};  // out of range (ATen raises)
  EXPECT_TRUE(refused(c));
  c = middleCall();
  c.dtypeGiven = true;  // sum(dim=1, dtype=float32)
  EXPECT_TRUE(refused(c));
  c = middleCall();
  c.floating = false;
  EXPECT_TRUE(refused(c));
  c = middleCall();
  c.strides = {512 * 4096, 1, 512};  // transposed
  EXPECT_TRUE(refused(c));
  c = middleCall();
  c.sizes = {8, 512, 1};  // nothing kept after the dim: inner 1
  c.strides = {512, 1, 1};
  EXPECT_TRUE(refused(c));
  c = middleCall();
  c.sizes = {8, 0, 4096};  // empty
  EXPECT_TRUE(refused(c));
  c = middleCall();
  c.sizes = {2, int64_t{1} << 31, 2};  // reduced past int32
  c.strides = {int64_t{1} << 32, 2, 1};
  EXPECT_TRUE(refused(c));
  c = middleCall();
  c.dtype = static_cast<DType>(9);
  EXPECT_TRUE(refused(c));
}

TEST(ReduceDimFamilyTest, GivenServedCallsWhenAskedForTheOutputSizesThenTheReducedDimDroppedOrKeptAsOne) {
  ReduceCall c = middleCall();
  EXPECT_EQ(ReduceDimFamily::outputSizes(c), (std::vector<int64_t>{8, 4096}));
  c.keepdim = true;
  EXPECT_EQ(ReduceDimFamily::outputSizes(c), (std::vector<int64_t>{8, 1, 4096}));
  c.dims = std::vector<int64_t>{-3};
  EXPECT_EQ(ReduceDimFamily::outputSizes(c), (std::vector<int64_t>{1, 512, 4096}));
  c.keepdim = false;
  EXPECT_EQ(ReduceDimFamily::outputSizes(c), (std::vector<int64_t>{512, 4096}));
}

TEST(ReduceDimFamilyTest, GivenAVariantWhenTurnedIntoAKeyAndBackThenTheSameWithTheInnerExtent) {
  const V v{DType::Float16, 32, 4096, 1024, ReduceOp::Argmax};
  const VariantKey key = reduceDimKeyOf(v, 3);
  EXPECT_EQ(key.device, 3);
  EXPECT_EQ(key.rows, 32);
  EXPECT_EQ(key.cols, 4096);
  EXPECT_EQ(key.inner, 1024);
  EXPECT_EQ(key.options, 0);
  const V back = reduceDimVariantOf(key, ReduceOp::Argmax);
  EXPECT_EQ(back.dtype, v.dtype);
  EXPECT_EQ(back.outer, v.outer);
  EXPECT_EQ(back.reduced, v.reduced);
  EXPECT_EQ(back.inner, v.inner);
}

TEST(ReduceDimFamilyTest, GivenPointsWhenAskedForAlignmentsThenVecElementsOfTheInputAndOfTheOutput) {
  EXPECT_EQ(ReduceDimFamily::requiredAlignment(DType::BFloat16, {32, 1, 8}), 16u);
  EXPECT_EQ(ReduceDimFamily::requiredAlignment(DType::Float32, {32, 1, 1}), 4u);
  EXPECT_EQ(ReduceDimFamily::outputAlignment(ReduceOp::Argmax, DType::BFloat16, 16), 64u);  // 8 int64
  EXPECT_EQ(ReduceDimFamily::outputAlignment(ReduceOp::Sum, DType::BFloat16, 16), 16u);
  EXPECT_EQ(ReduceDimFamily::outputAlignment(ReduceOp::Amin, DType::Float32, 4), 4u);
  EXPECT_EQ(ReduceDimFamily::outputAlignment(ReduceOp::Argmin, DType::Float32, 4), 8u);
  // A pair's output is its values (vec of them); its indices go one int64 at a time.
  EXPECT_EQ(ReduceDimFamily::outputAlignment(ReduceOp::Max, DType::BFloat16, 16), 16u);
  EXPECT_EQ(ReduceDimFamily::outputAlignment(ReduceOp::Min, DType::Float32, 4), 4u);
}

TEST(ReduceDimFamilyTest, GivenAPairOpThenItsBytesCountAValueAndAnIndexAPositionAndItsPointsKeepIndices) {
  const V mx{DType::Float32, 4, 10, 8, ReduceOp::Max};
  EXPECT_DOUBLE_EQ(ReduceDimFamily::bytesMoved(mx), 4.0 * 10 * 8 * 4 + 4.0 * 8 * (4 + 8));
  for (DType d : kAllDTypes) {
    // The same shared-memory bound as argmax's: a float and an int32 index a position.
    EXPECT_EQ(ReduceDimFamily::allParameterPoints(d, ReduceOp::Max), ReduceDimFamily::allParameterPoints(d, ReduceOp::Argmax));
    EXPECT_EQ(ReduceDimFamily::allParameterPoints(d, ReduceOp::Min), ReduceDimFamily::allParameterPoints(d, ReduceOp::Argmin));
  }
}

TEST(ReduceDimFamilyTest, GivenEveryPointThenWithinTheTemplatesLimitsAndTheSharedMemoryBound) {
  for (DType d : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      const std::vector<P> points = ReduceDimFamily::allParameterPoints(d, op);
      ASSERT_FALSE(points.empty());
      for (const P& p : points) {
        EXPECT_TRUE(p.tx == 32 || p.tx == 64 || p.tx == 128) << p.describe();
        EXPECT_LE(p.threads(), 1024) << p.describe();
        EXPECT_LE(p.vec * static_cast<int>(elementSize(d)), 16) << p.describe();
        const size_t perPosition = reduceOpInfo(op).index ? 8 : 4;
        EXPECT_LE(static_cast<size_t>(p.ty * p.tx * p.vec) * perPosition, ReduceDimFamily::kMaxSharedBytes)
            << p.describe();
        EXPECT_EQ(ReduceDimFamily::compileOptions(d, p, op).size(), 6u);
      }
      // The index ops keep twice the bytes a position: never more points than the values.
      EXPECT_LE(ReduceDimFamily::allParameterPoints(d, ReduceOp::Argmax).size(),
                ReduceDimFamily::allParameterPoints(d, ReduceOp::Amax).size());
    }
  }
  EXPECT_THROW(ReduceDimFamily::compileOptions(DType::Float32, {48, 1, 1}, ReduceOp::Sum), Error);
  EXPECT_THROW(ReduceDimFamily::compileOptions(DType::Float32, {32, 3, 1}, ReduceOp::Sum), Error);
  EXPECT_THROW(ReduceDimFamily::compileOptions(DType::Float32, {32, 1, 8}, ReduceOp::Sum), Error);  // 32 bytes
  EXPECT_THROW(ReduceDimFamily::compileOptions(DType::Float32, {32, 1, 4, 3}, ReduceOp::Sum), Error);  // unroll 3
  EXPECT_THROW(ReduceDimFamily::compileOptions(DType::Float32, {32, 1, 4, 16}, ReduceOp::Sum), Error);
}

TEST(ReduceDimFamilyTest, GivenATileWhenListedThenEveryUnrollOfItIsAPoint) {
  const std::vector<P> points = ReduceDimFamily::allParameterPoints(DType::Float32, ReduceOp::Argmax);
  for (int unroll : kMiddleDimUnrolls) {
    EXPECT_NE(std::find(points.begin(), points.end(), P{128, 4, 4, unroll}), points.end()) << unroll;
  }
  EXPECT_EQ(points.size() % std::size(kMiddleDimUnrolls), 0u);
  const V v = middle();
  EXPECT_TRUE(ReduceDimFamily::guardParams(v, {128, 4, 4, 8}));
  EXPECT_FALSE(ReduceDimFamily::guardParams(v, {128, 4, 4, 0}));
  EXPECT_FALSE(ReduceDimFamily::guardParams(v, {128, 4, 4, 5}));
}

TEST(ReduceDimFamilyTest, GivenVariantsWhenAskedForTheSpaceThenAtMostTheCapOfGuardedPointsWithAScalarOne) {
  const std::vector<V> variants = {middle(),
                                   middle(ReduceOp::Argmax, DType::BFloat16),
                                   {DType::Float16, 1, 100000, 2, ReduceOp::Amin},
                                   {DType::BFloat16, 4096, 3, 6, ReduceOp::Mean},
                                   {DType::Float32, 8, 77, 12345, ReduceOp::Argmin},
                                   {DType::BFloat16, 2, 128256, 4096, ReduceOp::Amax}};
  for (const V& v : variants) {
    SCOPED_TRACE(std::to_string(v.outer) + "x" + std::to_string(v.reduced) + "x" + std::to_string(v.inner));
    const std::vector<P> space = ReduceDimFamily::parameterSpace(v);
    ASSERT_FALSE(space.empty());
    EXPECT_LE(space.size(), ReduceDimFamily::kMaxSpaceSize);
    for (const P& p : space) EXPECT_TRUE(ReduceDimFamily::guardParams(v, p)) << p.describe();
    EXPECT_TRUE(std::any_of(space.begin(), space.end(), [](const P& p) { return p.vec == 1; }));
    for (size_t i = 0; i < space.size(); ++i) {
      for (size_t j = i + 1; j < space.size(); ++j) EXPECT_NE(space[i], space[j]);
    }
  }
  // The guess: the widest vector dividing inner, a tile that covers it.
  EXPECT_EQ(ReduceDimFamily::parameterSpace(middle()).front().vec, 4);
  EXPECT_EQ(ReduceDimFamily::parameterSpace(middle()).front().tx, 128);
  EXPECT_EQ(ReduceDimFamily::parameterSpace({DType::BFloat16, 4096, 3, 6, ReduceOp::Mean}).front().vec, 2);
  EXPECT_EQ(ReduceDimFamily::parameterSpace({DType::BFloat16, 4096, 3, 6, ReduceOp::Mean}).front().tx, 32);
  EXPECT_TRUE(ReduceDimFamily::parameterSpace({DType::Float32, 4, 4, 1, ReduceOp::Sum}).empty());
}

TEST(ReduceDimFamilyTest, GivenAVariantWhenAskedForTheSpaceThenTheGuessLoadsFourRowsAtOnceWithItsOneAndEightRowTwins) {
  // Note [Rows in flight]: the first guess at unroll 4, then the same tile at 1 (one row a trip) and 8.
  for (const V& v : {middle(), middle(ReduceOp::Max, DType::BFloat16), V{DType::Float16, 1, 100000, 2, ReduceOp::Sum}}) {
    const std::vector<P> space = ReduceDimFamily::parameterSpace(v);
    ASSERT_GE(space.size(), 3u);
    EXPECT_EQ(space[0].unroll, 4);
    EXPECT_EQ(space[1], (P{space[0].tx, space[0].ty, space[0].vec, 1}));
    EXPECT_EQ(space[2], (P{space[0].tx, space[0].ty, space[0].vec, 8}));
    for (size_t i = 3; i < space.size(); ++i) EXPECT_EQ(space[i].unroll, 4) << space[i].describe();
  }
}

TEST(ReduceDimFamilyTest, GivenPointsWhenAskedForGeometryBytesAndPointersThenOneCtaPerTile) {
  const LaunchGeometry g = ReduceDimFamily::launchGeometry(middle(), {128, 4, 4});
  EXPECT_EQ(g.gridX, 32u * 8u);  // 4096 / (128 * 4) tiles per outer index
  EXPECT_EQ(g.blockX, 512u);
  EXPECT_EQ(g.sharedBytes, 0u);
  EXPECT_EQ(ReduceDimFamily::launchGeometry({DType::Float32, 3, 5, 100, ReduceOp::Sum}, {32, 1, 4}).gridX, 3u);
  const LaunchGeometry huge =
      ReduceDimFamily::launchGeometry({DType::BFloat16, int64_t{1} << 32, 1, 2, ReduceOp::Sum}, {32, 1, 2});
  EXPECT_EQ(huge.gridX, static_cast<unsigned>(std::numeric_limits<int32_t>::max()));
  EXPECT_DOUBLE_EQ(ReduceDimFamily::bytesMoved({DType::BFloat16, 2, 10, 8, ReduceOp::Argmax}), 2 * 10 * 8 * 2 + 2 * 8 * 8);
  EXPECT_DOUBLE_EQ(ReduceDimFamily::bytesMoved({DType::Float32, 2, 10, 8, ReduceOp::Sum}), 2 * 10 * 8 * 4 + 2 * 8 * 4);
  alignas(64) static char buf[4096];
  const V v{DType::BFloat16, 2, 10, 8, ReduceOp::Argmin};
  EXPECT_TRUE(ReduceDimFamily::guardPointers(buf, buf + 1024, v, {32, 1, 8}));
  EXPECT_FALSE(ReduceDimFamily::guardPointers(buf + 2, buf + 1024, v, {32, 1, 8}));   // in: 16 bytes
  EXPECT_FALSE(ReduceDimFamily::guardPointers(buf, buf + 1032, v, {32, 1, 8}));       // out: 8 int64
  EXPECT_FALSE(ReduceDimFamily::guardPointers(buf, buf, v, {32, 1, 1}));
  EXPECT_FALSE(ReduceDimFamily::guardParams(v, {32, 1, 16}));                          // 32 bytes
  EXPECT_FALSE(ReduceDimFamily::guardParams({DType::BFloat16, 2, 10, 12, ReduceOp::Sum}, {32, 1, 8}));  // 12 % 8
}

TEST(ReduceDimFamilyTest, GivenParamsWhenRoundTrippedThroughJsonThenEqualAndMalformedOnesThrow) {
  const P p{64, 8, 2, 8};
  EXPECT_EQ(P::fromJson(nlohmann::json::parse(p.toJson().dump())), p);
  EXPECT_EQ(p.describe(), "tx=64 ty=8 vec=2 unroll=8");
  // A plan stored before the unroll loaded one row at a time.
  EXPECT_EQ(P::fromJson({{"tx", 64}, {"ty", 8}, {"vec", 2}}), (P{64, 8, 2, 1}));
  EXPECT_THROW(P::fromJson({{"tx", 64}, {"ty", 8}, {"vec", 2}, {"unroll", "4"}}), Error);
  EXPECT_THROW(P::fromJson(nlohmann::json::array()), Error);
  EXPECT_THROW(P::fromJson({{"tx", 32}, {"ty", 1}}), Error);
  EXPECT_THROW(P::fromJson({{"tx", 32}, {"ty", "8"}, {"vec", 1}}), Error);
}

// --- NVRTC (CPU) -------------------------------------------------------------

struct Job {
  DType dtype;
  P params;
  ReduceOp op;
};

TEST(ReduceDimFamilyCompileTest, GivenEveryOpAndDTypeAtTheLargestPointsWhenCompiledForSm90aThenCubinsWithoutSpills) {
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  std::vector<Job> jobs;
  for (DType d : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      const std::vector<P> points = ReduceDimFamily::allParameterPoints(d, op);
      // The most shared memory, the most threads, the widest vector at one row a CTA, and the smallest point.
      auto most = [&](auto key) { return *std::max_element(points.begin(), points.end(), [&](const P& a, const P& b) {
                                    return key(a) < key(b);
                                  }); };
      // The most rows in flight (unroll 8) at the widest vector: the most registers.
      for (const P& p : {most([](const P& q) { return q.ty * q.tx * q.vec; }), most([](const P& q) { return q.threads(); }),
                         most([](const P& q) { return q.vec * 1000 - q.ty; }),
                         most([](const P& q) { return q.unroll * 10000 + q.vec * 1000 + q.threads(); }), points.front()}) {
        jobs.push_back({d, p, op});
      }
    }
  }
  const std::string source = ReduceDimFamily::source();
  std::vector<std::string> errors(jobs.size());
  static const std::regex kSpills(R"(([1-9]\d*) bytes spill)");
  static const std::regex kStack(R"(([1-9]\d*) bytes stack frame)");
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
    try {
      std::vector<std::string> options = ReduceDimFamily::compileOptions(jobs[i].dtype, jobs[i].params, jobs[i].op);
      options.push_back("--ptxas-options=-v");
      const NvrtcOutput out = hotkernel::testutil::compileCached(source, "reduce_dim.cu", "sm_90a", options);
      if (out.cubin.compare(0, 4, "\x7f" "ELF") != 0) errors[i] = "not an ELF image";
      if (out.cubin.find(ReduceDimFamily::kKernelName) == std::string::npos) errors[i] += " no entry point";
      if (std::regex_search(out.log, kSpills)) errors[i] += " spills: " + out.log;
      if (std::regex_search(out.log, kStack)) errors[i] += " a stack frame: " + out.log;
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  });
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(errors[i].empty()) << dtypeName(jobs[i].dtype) << " " << reduceOpName(jobs[i].op) << " "
                                   << jobs[i].params.describe() << ": " << errors[i];
  }
}

TEST(ReduceDimFamilyCompileTest, GivenDefinesOutsideTheTemplatesLimitsWhenCompiledThenTheTemplateRefuses) {
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  const std::string source = ReduceDimFamily::source();
  const std::vector<std::vector<std::string>> bad = {
      {"-DHK_DTYPE=0", "-DHK_OP=8", "-DHK_TX=32", "-DHK_TY=1", "-DHK_VEC=1", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_OP=0", "-DHK_TX=48", "-DHK_TY=1", "-DHK_VEC=1", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_OP=0", "-DHK_TX=128", "-DHK_TY=16", "-DHK_VEC=1", "-DHK_UNROLL=1"},  // 2048 threads
      {"-DHK_DTYPE=0", "-DHK_OP=0", "-DHK_TX=32", "-DHK_TY=3", "-DHK_VEC=1", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=3", "-DHK_OP=0", "-DHK_TX=32", "-DHK_TY=1", "-DHK_VEC=1", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_OP=0", "-DHK_TX=32", "-DHK_TY=1", "-DHK_VEC=1", "-DHK_UNROLL=3"},
      {"-DHK_DTYPE=0", "-DHK_OP=0", "-DHK_TX=32", "-DHK_TY=1", "-DHK_VEC=1"},  // missing define
  };
  for (const std::vector<std::string>& options : bad) {
    EXPECT_THROW(hotkernel::testutil::compileCached(source, "reduce_dim.cu", "sm_90a", options), Error) << options.back();
  }
}

}  // namespace
}  // namespace hotkernel::kernels
