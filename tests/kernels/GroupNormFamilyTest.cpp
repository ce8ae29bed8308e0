// Tests of the group_norm family: guards, keys, parameter space, options,
// geometry, bytes, tolerance (CPU), and layer_norm.cu's group mode compiled with
// NVRTC for sm_90a without spills (CPU too: NVRTC needs no GPU). The norm
// machinery it shares with layer_norm is covered in LayerNormFamilyTest.cpp and
// RmsNormFamilyTest.cpp; this file checks what differs: groups, HxW, the key's
// extents and the statistics' tolerance.

#include "hotkernel/kernels/GroupNormFamily.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "NormTestUtil.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels {
namespace {

using V = GroupNormVariant;

// Stable Diffusion's UNet at a 64 x 64 latent, batch 2 (classifier-free guidance): GroupNorm(32, 320).
V sdUnet(DType d, bool w = true, bool b = true) { return V{d, 2 * 32, 10 * 4096, 32, 4096, w, b}; }

bool hasOption(const std::vector<std::string>& options, const std::string& o) {
  return std::find(options.begin(), options.end(), o) != options.end();
}

TEST(GroupNormFamilyTest, GivenGroupsAndSpatialExtentsWhenGuardedThenGroupsOfOneOrMoreAndHxWOfTwoOrMoreDividingCols) {
  EXPECT_TRUE(GroupNormFamily::guardVariant(sdUnet(DType::BFloat16)));
  V v = sdUnet(DType::Float32);
  v.groups = 0;
  EXPECT_FALSE(GroupNormFamily::guardVariant(v));
  v = sdUnet(DType::Float32);
  v.rows = 65;  // not N * 32: row r is group r % 32 (the harness's neighbour shapes)
  EXPECT_TRUE(GroupNormFamily::guardVariant(v));
  v = sdUnet(DType::Float32);
  v.hw = 1;  // ATen's GroupNorm1dForward: another expression
  v.cols = 10;
  EXPECT_FALSE(GroupNormFamily::guardVariant(v));
  v = sdUnet(DType::Float32);
  v.hw = 4095;  // does not divide cols
  EXPECT_FALSE(GroupNormFamily::guardVariant(v));
  v = sdUnet(DType::Float32);
  v.cols = 0;
  EXPECT_FALSE(GroupNormFamily::guardVariant(v));
  EXPECT_EQ(sdUnet(DType::Float32).channelsPerGroup(), 10);
}

TEST(GroupNormFamilyTest, GivenAnOddSpatialExtentWhenGuardingPointsThenOnlyVectorsThatStayInOneChannel) {
  const V odd{DType::Float16, 2 * 32, 10 * 49, 32, 49, true, true};  // 7 x 7
  ASSERT_TRUE(GroupNormFamily::guardVariant(odd));
  const std::vector<NormParams> space = GroupNormFamily::parameterSpace(odd, 90);
  ASSERT_FALSE(space.empty());
  for (const NormParams& p : space) {
    EXPECT_EQ(p.vec, 1) << p.describe();
    EXPECT_TRUE(GroupNormFamily::guardParams(odd, p)) << p.describe();
  }
  NormParams wide{256, 8, 0};
  EXPECT_TRUE(detail::normIsPoint(DType::Float16, wide));
  EXPECT_FALSE(GroupNormFamily::guardParams(odd, wide));
  EXPECT_THROW(GroupNormFamily::compileOptions(odd, wide), Error);
}

TEST(GroupNormFamilyTest, GivenFewLongRowsOnSm90WhenAskedForTheSpaceThenSplitRowPointsFirstAndEveryPointFits) {
  for (DType d : kAllDTypes) {
    const V v = sdUnet(d);
    const std::vector<NormParams> space = GroupNormFamily::parameterSpace(v, 90);
    ASSERT_FALSE(space.empty()) << dtypeName(d);
    EXPECT_TRUE(space.front().cluster > 1 || space.front().split > 1) << space.front().describe();
    for (const NormParams& p : space) {
      EXPECT_TRUE(GroupNormFamily::guardParams(v, p)) << p.describe();
      EXPECT_EQ(v.hw % p.vec, 0) << p.describe();
    }
  }
}

TEST(GroupNormFamilyTest, GivenAVariantWhenKeyedThenTheKeyRoundTripsThroughItsStringAndOnlyGroupNormServesIt) {
  const V v = sdUnet(DType::BFloat16, true, false);
  const VariantKey key = groupNormKeyOf(v, 0);
  const V back = groupNormVariantOf(key);
  EXPECT_EQ(back.rows, v.rows);
  EXPECT_EQ(back.cols, v.cols);
  EXPECT_EQ(back.groups, 32);
  EXPECT_EQ(back.hw, 4096);
  EXPECT_TRUE(back.hasWeight);
  EXPECT_FALSE(back.hasBias);
  const std::string s = variantString(key);
  EXPECT_EQ(s, "dtype=bfloat16;rows=64;cols=40960;more=32,4096,1,1;weight=1");
  const std::optional<VariantKey> parsed = parseVariantString(s, 0);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_TRUE(*parsed == key);
  for (const FamilyDescriptor* f : allFamilies()) {
    EXPECT_EQ(f->servesKey(key), f == &groupNormDescriptor()) << f->name;
  }
  EXPECT_EQ(familyForOp("aten::native_group_norm"), &groupNormDescriptor());
  EXPECT_EQ(familyNamed("group_norm"), &groupNormDescriptor());
  VariantKey other = key;
  other.more[2] = 2;
  EXPECT_FALSE(groupNormDescriptor().servesKey(other));
  other = key;
  other.inner = 4;
  EXPECT_FALSE(groupNormDescriptor().servesKey(other));
  other = key;
  other.options |= variant_options::kCausal;
  EXPECT_FALSE(groupNormDescriptor().servesKey(other));
  // A layer_norm key (no extents beyond rows and cols) is not a group_norm one.
  VariantKey plain;
  plain.dtype = static_cast<int32_t>(DType::BFloat16);
  plain.rows = 64;
  plain.cols = 40960;
  EXPECT_FALSE(groupNormDescriptor().servesKey(plain));
}

TEST(GroupNormFamilyTest, GivenAPointWhenAskedForCompileOptionsThenTheNormDefinesColsGroupsAndHxW) {
  const V v = sdUnet(DType::Float16, false, true);
  const NormParams p{1024, 8, 0, 1, 8};
  ASSERT_TRUE(GroupNormFamily::guardParams(v, p));
  const std::vector<std::string> o = GroupNormFamily::compileOptions(v, p);
  for (const char* want : {"-DHK_HAS_WEIGHT=0", "-DHK_HAS_BIAS=1", "-DHK_COLS=40960LL", "-DHK_GROUPS=32",
                           "-DHK_GROUP_HW=4096", "-DHK_CLUSTER=8", "-DHK_VEC=8"}) {
    EXPECT_TRUE(hasOption(o, want)) << want;
  }
  V bad = v;
  bad.hw = 1;
  EXPECT_THROW(GroupNormFamily::compileOptions(bad, p), Error);
}

TEST(GroupNormFamilyTest, GivenPointersWhenGuardedThenDataVectorAlignedAndTheArraysAndStatisticsOneElement) {
  const V v = sdUnet(DType::BFloat16);
  const NormParams p{256, 8, 0};
  alignas(16) static char buf[256];
  const void* a16 = buf;
  const void* a2 = buf + 2;
  EXPECT_TRUE(GroupNormFamily::guardPointers(a16, a2, a2, a16, a2, a2, v, p));
  EXPECT_FALSE(GroupNormFamily::guardPointers(a2, a2, a2, a16, a2, a2, v, p));
  EXPECT_FALSE(GroupNormFamily::guardPointers(a16, a2, a2, a2, a2, a2, v, p));
  EXPECT_FALSE(GroupNormFamily::guardPointers(a16, nullptr, a2, a16, a2, a2, v, p));
  EXPECT_FALSE(GroupNormFamily::guardPointers(a16, a2, a2, a16, buf + 1, a2, v, p));
  const V none = sdUnet(DType::BFloat16, false, false);
  EXPECT_TRUE(GroupNormFamily::guardPointers(a16, nullptr, nullptr, a16, a2, a2, none, p));
}

TEST(GroupNormFamilyTest, GivenDTypesWhenAskedForToleranceThenLayerNormsOutputAndOneStatisticUlpMore) {
  const NormTolerance f32 = GroupNormFamily::tolerance(DType::Float32, 40960);
  const NormTolerance ln32 = LayerNormFamily::tolerance(DType::Float32, 40960);
  EXPECT_EQ(f32.outAbs, ln32.outAbs);
  EXPECT_EQ(f32.outRel, ln32.outRel);
  EXPECT_EQ(f32.statRel, ln32.statRel);
  const NormTolerance bf = GroupNormFamily::tolerance(DType::BFloat16, 40960);
  EXPECT_DOUBLE_EQ(bf.statRel, LayerNormFamily::tolerance(DType::BFloat16, 40960).statRel + 1.0 / 128.0);
  const NormTolerance h = GroupNormFamily::tolerance(DType::Float16, 40960);
  EXPECT_DOUBLE_EQ(h.statRel, LayerNormFamily::tolerance(DType::Float16, 40960).statRel + 1.0 / 1024.0);
}

TEST(GroupNormFamilyTest, GivenAVariantWhenAskedForBytesAndGeometryThenOneReadOneWriteAndTheNormGrid) {
  const V v = sdUnet(DType::BFloat16);
  EXPECT_DOUBLE_EQ(GroupNormFamily::bytesMoved(v), 2.0 * 64 * 40960 * 2 + 2.0 * 320 * 2 + 64 * 2.0 * 2);
  const NormParams cluster{1024, 8, 0, 1, 8};
  EXPECT_EQ(GroupNormFamily::launchGeometry(v, cluster).gridX, 64 * 8);
  const NormParams split{1024, 8, 0, 1, 1, 8};
  if (GroupNormFamily::guardParams(v, split)) {
    EXPECT_EQ(GroupNormFamily::workspaceFloats(v, split), LayerNormFamily::workspaceFloats({v.dtype, v.rows, v.cols},
                                                                                          split));
  }
  EXPECT_EQ(GroupNormFamily::source(), LayerNormFamily::source());
}

// --- NVRTC -------------------------------------------------------------------

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

// The spaces of diffusion-model shapes (SD UNet and VAE GroupNorm(32) layers, a
// 7 x 7 map) in group mode, every weight / bias combination in bfloat16 and the
// affine one in the other dtypes: cubins without spills.
TEST(GroupNormFamilyCompileTest, GivenDiffusionShapesWhenCompiledInGroupModeForSm90aThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<V> variants;
  for (DType d : kAllDTypes) {
    variants.push_back(sdUnet(d));
    variants.push_back(V{d, 1 * 32, 16 * 16384, 32, 16384, true, true});  // VAE decoder: 512 channels at 128 x 128
    variants.push_back(V{d, 8 * 32, 40 * 64, 32, 64, true, true});       // 1280 channels at 8 x 8
  }
  variants.push_back(sdUnet(DType::BFloat16, true, false));
  variants.push_back(sdUnet(DType::BFloat16, false, true));
  variants.push_back(sdUnet(DType::BFloat16, false, false));
  variants.push_back(V{DType::BFloat16, 2 * 32, 10 * 49, 32, 49, true, true});
  std::vector<testutil::CompileJob> jobs;
  std::vector<V> ofJob;
  for (const V& v : variants) {
    for (const NormParams& p : GroupNormFamily::parameterSpace(v, 90)) {
      jobs.push_back({v.dtype, p, {}, "sm_90a"});
      ofJob.push_back(v);
    }
  }
  std::vector<std::vector<std::string>> options;
  for (size_t i = 0; i < jobs.size(); ++i) options.push_back(GroupNormFamily::compileOptions(ofJob[i], jobs[i].params));
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].flags = {std::to_string(i)};
  const auto results = testutil::compileAll(GroupNormFamily::source(), "layer_norm.cu", GroupNormFamily::kKernelName,
                                            jobs, [&options](const testutil::CompileJob& j) {
                                              return options[static_cast<size_t>(std::stoll(j.flags[0]))];
                                            });
  testutil::expectAllCompiledWithoutSpills(jobs, results);
}

TEST(GroupNormFamilyCompileTest, GivenGroupDefinesOutsideTheModesLimitsWhenCompiledThenTheTemplateRefuses) {
  SKIP_WITHOUT_NVRTC();
  const V v = sdUnet(DType::BFloat16);
  const NormParams p{256, 8, 0};
  std::vector<std::string> base = GroupNormFamily::compileOptions(v, p);
  auto without = [&base](const std::string& prefix) {
    std::vector<std::string> o;
    for (const std::string& s : base) {
      if (s.rfind(prefix, 0) != 0) o.push_back(s);
    }
    return o;
  };
  std::vector<std::string> noCols = without("-DHK_COLS=");
  std::vector<std::string> oddHw = without("-DHK_GROUP_HW=");
  oddHw.push_back("-DHK_GROUP_HW=4");  // not a multiple of HK_VEC 8
  std::vector<std::string> hwOne = without("-DHK_GROUP_HW=");
  hwOne.push_back("-DHK_GROUP_HW=1");
  for (const auto& options : {noCols, oddHw, hwOne}) {
    EXPECT_THROW(compileToCubin(GroupNormFamily::source(), "layer_norm.cu", "sm_90a", options), Error);
  }
  EXPECT_NO_THROW(compileToCubin(GroupNormFamily::source(), "layer_norm.cu", "sm_90a", base));
}

}  // namespace
}  // namespace hotkernel::kernels
