// Tests of the middle-dim softmax family on the CPU: the layout of a call,
// the variant, parameter and pointer guards, the whitelist and its shared
// memory bound, the parameter space, options, geometry and bytes; the
// descriptors' two layouts (Note [Two softmax layouts]); and the template
// compiled with NVRTC (no GPU needed) for both ops and every dtype, without
// spills.

#include "hotkernel/kernels/SoftmaxDimFamily.h"

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "CompileCache.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels {
namespace {

using P = SoftmaxDimParams;
using V = SoftmaxDimVariant;

// softmax(x, dim=1) of a contiguous float32 [32, 4096, 4096].
V middle(DType d = DType::Float32) { return V{d, 32, 4096, 4096}; }

TEST(SoftmaxDimFamilyTest, GivenSizesAndADimWhenLaidOutThenOuterDimInnerProducts) {
  const int64_t sizes[] = {2, 3, 5, 7};
  SoftmaxLayout l;
  ASSERT_TRUE(softmaxLayoutOf(sizes, 4, 1, &l));
  EXPECT_EQ(l.outer, 2);
  EXPECT_EQ(l.dim, 3);
  EXPECT_EQ(l.inner, 35);
  ASSERT_TRUE(softmaxLayoutOf(sizes, 4, -4, &l));  // dim 0
  EXPECT_EQ(l.outer, 1);
  EXPECT_EQ(l.dim, 2);
  EXPECT_EQ(l.inner, 105);
  ASSERT_TRUE(softmaxLayoutOf(sizes, 4, -1, &l));  // the last dim: no inner extent
  EXPECT_EQ(l.outer, 30);
  EXPECT_EQ(l.dim, 7);
  EXPECT_EQ(l.inner, 1);
  const int64_t trailingOnes[] = {4, 6, 1, 1};
  ASSERT_TRUE(softmaxLayoutOf(trailingOnes, 4, 1, &l));  // only sizes of 1 after it: the last-dim layout
  EXPECT_EQ(l.outer, 4);
  EXPECT_EQ(l.dim, 6);
  EXPECT_EQ(l.inner, 1);
}

TEST(SoftmaxDimFamilyTest, GivenOutOfRangeDimsEmptyOrHugeSizesWhenLaidOutThenRefused) {
  const int64_t sizes[] = {2, 3, 5};
  EXPECT_FALSE(softmaxLayoutOf(sizes, 3, 3, nullptr));
  EXPECT_FALSE(softmaxLayoutOf(sizes, 3, -4, nullptr));
  EXPECT_FALSE(softmaxLayoutOf(sizes, 0, 0, nullptr));
  const int64_t empty[] = {2, 0, 5};
  EXPECT_FALSE(softmaxLayoutOf(empty, 3, 0, nullptr));
  const int64_t huge = int64_t{1} << 40;
  const int64_t outerOverflows[] = {huge, huge, 2, 5};
  EXPECT_FALSE(softmaxLayoutOf(outerOverflows, 4, 2, nullptr));
  const int64_t innerOverflows[] = {2, huge, huge};
  EXPECT_FALSE(softmaxLayoutOf(innerOverflows, 3, 0, nullptr));
  // Each extent fits, their product does not: the layout is given, the variant's guard refuses it.
  const int64_t totalOverflows[] = {huge, 2, huge};
  SoftmaxLayout l;
  ASSERT_TRUE(softmaxLayoutOf(totalOverflows, 3, 1, &l));
  EXPECT_FALSE(SoftmaxDimFamily::guardVariant(V{DType::Float32, l.outer, l.dim, l.inner}));
}

TEST(SoftmaxDimFamilyTest, GivenVariantsWhenGuardedThenOnlyMiddleDimsWithinTheLimits) {
  EXPECT_TRUE(SoftmaxDimFamily::guardVariant(middle()));
  EXPECT_TRUE(SoftmaxDimFamily::guardVariant(V{DType::BFloat16, 1, 1, 2}));
  EXPECT_FALSE(SoftmaxDimFamily::guardVariant(V{DType::Float32, 1, 8, 1}));  // no inner extent: last-dim layout
  EXPECT_FALSE(SoftmaxDimFamily::guardVariant(V{DType::Float32, 0, 8, 8}));
  EXPECT_FALSE(SoftmaxDimFamily::guardVariant(V{DType::Float32, 1, 0, 8}));
  EXPECT_FALSE(SoftmaxDimFamily::guardVariant(V{DType::Float32, 1, SoftmaxDimFamily::kMaxDim + 1, 8}));
  EXPECT_FALSE(SoftmaxDimFamily::guardVariant(V{static_cast<DType>(7), 4, 8, 8}));
  const int64_t huge = int64_t{1} << 31;
  EXPECT_FALSE(SoftmaxDimFamily::guardVariant(V{DType::Float32, huge, 1024, huge}));  // bytes overflow int64
}

TEST(SoftmaxDimFamilyTest, GivenAVariantWhenTurnedIntoAKeyAndBackThenTheSameWithTheInnerExtent) {
  const V v{DType::Float16, 6, 50, 128};
  const VariantKey key = softmaxDimKeyOf(v, 3);
  EXPECT_EQ(key.rows, 6);
  EXPECT_EQ(key.cols, 50);
  EXPECT_EQ(key.inner, 128);
  EXPECT_EQ(key.device, 3);
  EXPECT_EQ(key.options, 0);
  const V back = softmaxDimVariantOf(key);
  EXPECT_EQ(back.dtype, v.dtype);
  EXPECT_EQ(back.outer, v.outer);
  EXPECT_EQ(back.dim, v.dim);
  EXPECT_EQ(back.inner, v.inner);
}

TEST(SoftmaxDimFamilyTest, GivenEveryPointThenWithinTheTemplatesLimitsAndTheSharedMemoryBound) {
  for (DType d : kAllDTypes) {
    const std::vector<P> points = SoftmaxDimFamily::allParameterPoints(d);
    ASSERT_FALSE(points.empty());
    for (const P& p : points) {
      EXPECT_TRUE(p.tx == 32 || p.tx == 64 || p.tx == 128) << p.describe();
      EXPECT_LE(p.threads(), 1024) << p.describe();
      EXPECT_LE(static_cast<size_t>(p.vec) * elementSize(d), 16u) << p.describe();
      EXPECT_LE(static_cast<size_t>(p.tx) * p.ty * p.vec * 2 * sizeof(float), SoftmaxDimFamily::kMaxSharedBytes)
          << p.describe();
      EXPECT_NO_THROW(SoftmaxDimFamily::compileOptions(d, p, SoftmaxOp::LogSoftmax));
    }
  }
  // Over the shared memory bound: 128 x 8 threads of 8 bfloat16 positions take 64 KiB of pairs.
  EXPECT_THROW(SoftmaxDimFamily::compileOptions(DType::BFloat16, P{128, 8, 8}), Error);
  EXPECT_NO_THROW(SoftmaxDimFamily::compileOptions(DType::BFloat16, P{128, 4, 8}));
  EXPECT_THROW(SoftmaxDimFamily::compileOptions(DType::Float32, P{48, 1, 1}), Error);
}

TEST(SoftmaxDimFamilyTest, GivenPointsWhenGuardedForAVariantThenInnerMustTakeTheVector) {
  const V v{DType::BFloat16, 4, 100, 24};
  EXPECT_TRUE(SoftmaxDimFamily::guardParams(v, P{32, 8, 8}));
  EXPECT_FALSE(SoftmaxDimFamily::guardParams(V{DType::BFloat16, 4, 100, 20}, P{32, 8, 8}));
  EXPECT_TRUE(SoftmaxDimFamily::guardParams(V{DType::BFloat16, 4, 100, 20}, P{32, 8, 4}));
  EXPECT_FALSE(SoftmaxDimFamily::guardParams(V{DType::Float32, 4, 100, 24}, P{32, 8, 8}));  // 32 bytes
}

TEST(SoftmaxDimFamilyTest, GivenVariantsWhenAskedForTheSpaceThenAtMostTheCapOfGuardedPointsWithAScalarOne) {
  for (const V& v : {middle(), middle(DType::BFloat16), V{DType::Float16, 8, 3, 2}, V{DType::Float32, 1, 100000, 6},
                     V{DType::BFloat16, 4096, 50, 1000}}) {
    const std::vector<P> space = SoftmaxDimFamily::parameterSpace(v);
    ASSERT_FALSE(space.empty());
    EXPECT_LE(space.size(), SoftmaxDimFamily::kMaxSpaceSize);
    bool scalar = false;
    for (const P& p : space) {
      EXPECT_TRUE(SoftmaxDimFamily::guardParams(v, p)) << p.describe();
      EXPECT_EQ(std::count(space.begin(), space.end(), p), 1) << p.describe();
      scalar = scalar || p.vec == 1;
    }
    EXPECT_TRUE(scalar);
  }
  // The first guess takes the widest vector inner allows.
  EXPECT_EQ(SoftmaxDimFamily::parameterSpace(middle(DType::BFloat16)).front().vec, 8);
  EXPECT_EQ(SoftmaxDimFamily::parameterSpace(V{DType::BFloat16, 4, 8, 6}).front().vec, 2);
  EXPECT_TRUE(SoftmaxDimFamily::parameterSpace(V{DType::Float32, 4, 8, 1}).empty());
}

TEST(SoftmaxDimFamilyTest, GivenAVariantWhenAskedForTheSpaceThenTheGuessLoadsFourRowsAtOnceWithItsOneAndEightRowTwins) {
  // Note [Rows in flight] (reduce_dim.cu), in both passes of the softmax.
  for (const V& v : {middle(), middle(DType::BFloat16), V{DType::Float32, 1, 100000, 6}}) {
    const std::vector<P> space = SoftmaxDimFamily::parameterSpace(v);
    ASSERT_GE(space.size(), 3u);
    EXPECT_EQ(space[0].unroll, 4);
    EXPECT_EQ(space[1], (P{space[0].tx, space[0].ty, space[0].vec, 1}));
    EXPECT_EQ(space[2], (P{space[0].tx, space[0].ty, space[0].vec, 8}));
  }
  const std::vector<P> points = SoftmaxDimFamily::allParameterPoints(DType::Float32);
  for (int unroll : kMiddleDimUnrolls) {
    EXPECT_NE(std::find(points.begin(), points.end(), P{128, 4, 4, unroll}), points.end()) << unroll;
  }
  EXPECT_FALSE(SoftmaxDimFamily::guardParams(middle(), P{32, 8, 4, 3}));
  EXPECT_THROW(SoftmaxDimFamily::compileOptions(DType::Float32, P{32, 8, 4, 16}), Error);
}

TEST(SoftmaxDimFamilyTest, GivenPointsWhenAskedForGeometryBytesAndPointersThenOneCtaPerTile) {
  const V v{DType::Float32, 6, 100, 1000};
  const LaunchGeometry g = SoftmaxDimFamily::launchGeometry(v, P{64, 4, 4});
  EXPECT_EQ(g.blockX, 256u);
  EXPECT_EQ(g.gridX, 6u * 4u);  // ceil(1000 / 256) tiles per outer index
  EXPECT_EQ(g.sharedBytes, 0u);
  const V wide{DType::Float32, int64_t{1} << 32, 1, 64};
  EXPECT_EQ(SoftmaxDimFamily::launchGeometry(wide, P{32, 1, 1}).gridX,
            static_cast<unsigned>(std::numeric_limits<int32_t>::max()));
  EXPECT_DOUBLE_EQ(SoftmaxDimFamily::bytesMoved(v), 2.0 * 6 * 100 * 1000 * 4);
  EXPECT_EQ(SoftmaxDimFamily::requiredAlignment(DType::BFloat16, P{32, 8, 8}), 16u);
  alignas(16) static float buffer[16];
  EXPECT_TRUE(SoftmaxDimFamily::guardPointers(buffer, buffer, DType::Float32, P{32, 8, 4}));  // in place
  EXPECT_FALSE(SoftmaxDimFamily::guardPointers(buffer + 1, buffer, DType::Float32, P{32, 8, 4}));
  EXPECT_TRUE(SoftmaxDimFamily::guardPointers(buffer + 1, buffer, DType::Float32, P{32, 8, 1}));
  EXPECT_FALSE(SoftmaxDimFamily::guardPointers(nullptr, buffer, DType::Float32, P{32, 8, 1}));
}

TEST(SoftmaxDimFamilyTest, GivenParamsWhenRoundTrippedThroughJsonThenEqualAndMalformedOnesThrow) {
  const P p{64, 16, 2, 2};
  EXPECT_EQ(P::fromJson(p.toJson()), p);
  EXPECT_EQ(p.describe(), "tx=64 ty=16 vec=2 unroll=2");
  EXPECT_EQ(P::fromJson({{"tx", 64}, {"ty", 16}, {"vec", 2}}), (P{64, 16, 2, 1}));  // stored before the unroll
  EXPECT_THROW(P::fromJson(nlohmann::json::array()), Error);
  EXPECT_THROW(P::fromJson({{"tx", 32}, {"ty", 8}}), Error);
  // A last-dim point is not a middle-dim one (Note [Two softmax layouts]).
  EXPECT_THROW(P::fromJson(SoftmaxParams{}.toJson()), Error);
  EXPECT_THROW(SoftmaxParams::fromJson(p.toJson()), Error);
}

TEST(SoftmaxDescriptorTest, GivenKeysOfBothLayoutsWhenAskedThenEachServedByItsOwnFamilyAndKernel) {
  for (SoftmaxOp op : {SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax}) {
    const FamilyDescriptor& d = softmaxDescriptor(op);
    const VariantKey middleKey = softmaxDimKeyOf(V{DType::Float32, 8, 64, 256}, 0);
    const VariantKey lastKey{static_cast<int32_t>(DType::Float32), 0, 8, 64};
    EXPECT_TRUE(d.servesKey(middleKey)) << d.name;
    EXPECT_TRUE(d.servesKey(lastKey)) << d.name;
    EXPECT_STREQ(kernelNameFor(d, middleKey), SoftmaxDimFamily::kKernelName);
    EXPECT_STREQ(kernelNameFor(d, lastKey), SoftmaxFamily::kKernelName);
    EXPECT_DOUBLE_EQ(d.bytesMoved(middleKey), SoftmaxDimFamily::bytesMoved(softmaxDimVariantOf(middleKey)));
    EXPECT_DOUBLE_EQ(d.bytesMoved(lastKey), SoftmaxFamily::bytesMoved(softmaxVariantOf(lastKey)));
    VariantKey one = middleKey;
    one.inner = 1;  // never a key: inner 1 is the last-dim layout
    EXPECT_FALSE(d.servesKey(one));
    VariantKey flagged = middleKey;
    flagged.options = 1;
    EXPECT_FALSE(d.servesKey(flagged));
    // A point of the other layout (or one the key's inner does not take) is refused before any module loads.
    EXPECT_THROW(d.makePlan(middleKey, SoftmaxParams{}.toJson(), "not a cubin", 0), Error);
    EXPECT_THROW(d.makePlan(lastKey, P{32, 8, 4}.toJson(), "not a cubin", 0), Error);
    VariantKey odd = middleKey;
    odd.inner = 6;
    EXPECT_THROW(d.makePlan(odd, P{32, 8, 4}.toJson(), "not a cubin", 0), Error);
  }
}

TEST(SoftmaxDimFamilyCompileTest, GivenBothOpsAndEveryDTypeAtTheLargestPointsWhenCompiledForSm90aThenNoSpills) {
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  struct Job {
    DType dtype;
    P params;
    SoftmaxOp op;
  };
  std::vector<Job> jobs;
  for (DType d : kAllDTypes) {
    const std::vector<P> points = SoftmaxDimFamily::allParameterPoints(d);
    auto most = [&](auto key) {
      return *std::max_element(points.begin(), points.end(), [&](const P& a, const P& b) { return key(a) < key(b); });
    };
    for (SoftmaxOp op : {SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax}) {
      for (const P& p : {most([](const P& q) { return q.ty * q.tx * q.vec; }), most([](const P& q) { return q.threads(); }),
                         most([](const P& q) { return q.vec * 1000 - q.ty; }),
                         most([](const P& q) { return q.unroll * 10000 + q.vec * 1000 + q.threads(); }), points.front()}) {
        jobs.push_back({d, p, op});
      }
    }
  }
  const std::string source = SoftmaxDimFamily::source();
  std::vector<std::string> errors(jobs.size());
  static const std::regex kSpills(R"(([1-9]\d*) bytes spill)");
  static const std::regex kStack(R"(([1-9]\d*) bytes stack frame)");
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
    try {
      std::vector<std::string> options = SoftmaxDimFamily::compileOptions(jobs[i].dtype, jobs[i].params, jobs[i].op);
      options.push_back("--ptxas-options=-v");
      const NvrtcOutput out = hotkernel::testutil::compileCached(source, "softmax_dim.cu", "sm_90a", options);
      if (out.cubin.compare(0, 4, "\x7f" "ELF") != 0) errors[i] = "not an ELF image";
      if (out.cubin.find(SoftmaxDimFamily::kKernelName) == std::string::npos) errors[i] += " no entry point";
      if (std::regex_search(out.log, kSpills)) errors[i] += " spills: " + out.log;
      if (std::regex_search(out.log, kStack)) errors[i] += " a stack frame: " + out.log;
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  });
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(errors[i].empty()) << dtypeName(jobs[i].dtype) << " " << softmaxOpName(jobs[i].op) << " "
                                   << jobs[i].params.describe() << ": " << errors[i];
  }
}

TEST(SoftmaxDimFamilyCompileTest, GivenDefinesOutsideTheTemplatesLimitsWhenCompiledThenTheTemplateRefuses) {
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  const std::string source = SoftmaxDimFamily::source();
  const std::vector<std::vector<std::string>> bad = {
      {"-DHK_DTYPE=0", "-DHK_TX=48", "-DHK_TY=1", "-DHK_VEC=1", "-DHK_LOG=0", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_TX=128", "-DHK_TY=16", "-DHK_VEC=1", "-DHK_LOG=0", "-DHK_UNROLL=1"},  // 2048 threads
      {"-DHK_DTYPE=0", "-DHK_TX=32", "-DHK_TY=3", "-DHK_VEC=1", "-DHK_LOG=0", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_TX=32", "-DHK_TY=1", "-DHK_VEC=1", "-DHK_LOG=2", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=3", "-DHK_TX=32", "-DHK_TY=1", "-DHK_VEC=1", "-DHK_LOG=0", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_TX=32", "-DHK_TY=1", "-DHK_VEC=1", "-DHK_LOG=0", "-DHK_UNROLL=5"},
      {"-DHK_DTYPE=0", "-DHK_TX=32", "-DHK_TY=1", "-DHK_VEC=1"},  // missing define
  };
  for (const std::vector<std::string>& options : bad) {
    EXPECT_THROW(hotkernel::testutil::compileCached(source, "softmax_dim.cu", "sm_90a", options), Error) << options.back();
  }
}

}  // namespace
}  // namespace hotkernel::kernels
