// The ranked view of recorded profiles (ProfileView.h): ranking by GPU time or
// calls, shares, merging (Note [Merging profiles for the view]), served flags.

#include <gtest/gtest.h>

#include <algorithm>

#include "ProfileView.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::cli {
namespace {

RecordedGpuTime gpuTime(double estimatedNs) { return {static_cast<int64_t>(estimatedNs / 2), 1, estimatedNs}; }

RecordedOp op(const std::string& name, double calls, std::optional<double> gpuNs = std::nullopt) {
  RecordedOp o;
  o.op = name;
  o.estimatedCalls = calls;
  if (gpuNs) o.gpu = gpuTime(*gpuNs);
  return o;
}

RecordedVariant variant(const std::string& name, int64_t rows, int64_t cols, double calls,
                        std::optional<double> gpuNs = std::nullopt) {
  RecordedVariant v;
  v.op = name;
  v.key = VariantKey{static_cast<int32_t>(kernels::DType::Float32), 0, rows, cols};
  v.estimatedCalls = calls;
  if (gpuNs) v.gpu = gpuTime(*gpuNs);
  return v;
}

// aten::bmm: few calls, most of the GPU time; aten::_softmax: many calls, less time; aten::view: no time.
RecordedProfile withGpu() {
  RecordedProfile p;
  p.version = 2;
  p.gpuTime = RecordedGpuSummary{"cupti", "started", "", 10000, 40, 9000, 0, 0, ""};
  p.ops = {op("aten::view", 900, 0), op("aten::_softmax", 300, 2000), op("aten::bmm", 100, 7000)};
  p.variants = {variant("aten::_softmax", 64, 1000, 200, 1500), variant("aten::_softmax", 8, 100, 100, 500)};
  return p;
}

RecordedProfile callsOnly() {
  RecordedProfile p;
  p.version = 1;
  p.ops = {op("aten::view", 100), op("aten::sum", 50)};
  p.variants = {variant("aten::sum.dim_IntList", 32, 4096, 50), variant("aten::_softmax", 64, 1000, 10)};
  return p;
}

TEST(ProfileViewTest, GivenTwoProfilesWithDeferredCallsWhenMergedThenTheDeferredCallsAddUpLikeCalls) {
  RecordedProfile a = withGpu(), b = withGpu();
  a.ops[1].estimatedDeferredCalls = 100;
  a.variants[0].estimatedDeferredCalls = 100;
  b.variants[0].estimatedDeferredCalls = 50;  // b's op entry says none: its variants still count
  b.ops[1].estimatedDeferredCalls = 0;
  const ProfileView v = buildProfileView({a, b}, RankBy::Calls);
  EXPECT_TRUE(v.anyDeferred);
  const auto softmax = std::find_if(v.ops.begin(), v.ops.end(), [](const ViewOp& o) { return o.op == "aten::_softmax"; });
  ASSERT_NE(softmax, v.ops.end());
  EXPECT_DOUBLE_EQ(softmax->estimatedDeferredCalls, 150);
  const auto wide = std::find_if(softmax->variants.begin(), softmax->variants.end(),
                                 [](const ViewVariant& x) { return x.key.rows == 64; });
  ASSERT_NE(wide, softmax->variants.end());
  EXPECT_DOUBLE_EQ(wide->estimatedDeferredCalls, 150);
  EXPECT_FALSE(buildProfileView({withGpu()}, std::nullopt).anyDeferred);
}

TEST(ProfileViewTest, GivenAProfileWithGpuTimeWhenViewedThenRankedByGpuTimeWithSharesOfTheKernelTime) {
  const ProfileView v = buildProfileView({withGpu()}, std::nullopt);
  EXPECT_EQ(v.by, RankBy::GpuTime);
  ASSERT_EQ(v.ops.size(), 3u);
  EXPECT_EQ(v.ops[0].op, "aten::bmm");
  EXPECT_EQ(v.ops[1].op, "aten::_softmax");
  EXPECT_EQ(v.ops[2].op, "aten::view");
  EXPECT_DOUBLE_EQ(v.ops[0].share, 0.7);
  EXPECT_DOUBLE_EQ(v.ops[1].share, 0.2);
  EXPECT_FALSE(v.ops[0].served);
  EXPECT_TRUE(v.ops[1].served);
  EXPECT_DOUBLE_EQ(v.servedShare, 0.2);
  ASSERT_EQ(v.ops[1].variants.size(), 2u);
  EXPECT_EQ(v.ops[1].variants[0].key.rows, 64);  // 1500 ns before 500 ns
  EXPECT_DOUBLE_EQ(v.ops[1].variants[0].share, 0.15);
  EXPECT_EQ(v.ops[1].variants[0].family, "softmax_lastdim");
  EXPECT_EQ(v.ops[1].variants[0].variant, "dtype=float32;rows=64;cols=1000");
}

// Note [Opt-in ops in the view]: group_norm's and batch_norm's families serve their ops only when named in
// HOTKERNEL_OPS; softmax and the sum overloads are in its default; bmm no family serves.
TEST(ProfileViewTest, GivenOpsServedByDefaultOptInOrNotAtAllWhenViewedThenOnlyTheOptInOnesNameTheirEntries) {
  RecordedProfile p;
  p.version = 3;
  p.ops = {op("aten::native_group_norm", 40), op("aten::native_batch_norm", 30), op("aten::_softmax", 20),
           op("aten::sum", 10), op("aten::bmm", 5)};
  const ProfileView v = buildProfileView({p}, RankBy::Calls);
  ASSERT_EQ(v.ops.size(), 5u);
  for (const ViewOp& o : v.ops) {
    SCOPED_TRACE(o.op);
    if (o.op == "aten::native_group_norm") {
      EXPECT_TRUE(o.served);
      EXPECT_EQ(o.optIn, "native_group_norm");
    } else if (o.op == "aten::native_batch_norm") {
      EXPECT_TRUE(o.served);
      EXPECT_EQ(o.optIn, "native_batch_norm");
    } else if (o.op == "aten::bmm") {
      EXPECT_FALSE(o.served);
      EXPECT_EQ(o.optIn, "");
    } else {
      EXPECT_TRUE(o.served);
      EXPECT_EQ(o.optIn, "");
    }
  }
  const OpEntries sum = servedOpEntries("aten::sum");
  EXPECT_EQ(sum.entries, std::vector<std::string>{"sum.dim_IntList"});
  EXPECT_TRUE(sum.inDefault);
  EXPECT_TRUE(servedOpEntries("aten::view").entries.empty());
}

TEST(ProfileViewTest, GivenByCallsWhenViewedThenRankedByCallsWithSharesOfAllCalls) {
  const ProfileView v = buildProfileView({withGpu()}, RankBy::Calls);
  EXPECT_EQ(v.by, RankBy::Calls);
  EXPECT_EQ(v.ops[0].op, "aten::view");
  EXPECT_DOUBLE_EQ(v.ops[0].share, 900.0 / 1300.0);
  EXPECT_FALSE(v.ops[0].estimatedGpuNs.has_value());
}

TEST(ProfileViewTest, GivenProfilesWithAndWithoutGpuTimeWhenMergedThenCallsRankAndAVariantFindsItsOp) {
  const ProfileView v = buildProfileView({withGpu(), callsOnly()}, std::nullopt);
  EXPECT_EQ(v.by, RankBy::Calls);
  EXPECT_EQ(v.profiles, 2);
  EXPECT_EQ(v.profilesWithGpuTime, 1);
  EXPECT_EQ(v.ops[0].op, "aten::view");
  EXPECT_DOUBLE_EQ(v.ops[0].estimatedCalls, 1000);
  // aten::sum.dim_IntList's variant sits under aten::sum, served (sum_lastdim) in this build.
  const auto sum = std::find_if(v.ops.begin(), v.ops.end(), [](const ViewOp& o) { return o.op == "aten::sum"; });
  ASSERT_NE(sum, v.ops.end());
  EXPECT_TRUE(sum->served);
  ASSERT_EQ(sum->variants.size(), 1u);
  EXPECT_EQ(sum->variants[0].op, "aten::sum.dim_IntList");
  EXPECT_FALSE(sum->variants[0].family.empty());
  // The two profiles' [64, 1000] softmax variants are one row, their calls summed.
  const auto softmax =
      std::find_if(v.ops.begin(), v.ops.end(), [](const ViewOp& o) { return o.op == "aten::_softmax"; });
  ASSERT_NE(softmax, v.ops.end());
  ASSERT_EQ(softmax->variants.size(), 2u);
  EXPECT_DOUBLE_EQ(softmax->variants[0].estimatedCalls, 210);
  bool noted = false;
  for (const std::string& n : v.notes) noted |= n.find("1 of 2 profiles carry GPU time") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(ProfileViewTest, GivenAVariantWhoseOpIsNotInOpsWhenViewedThenItsOpRowCarriesIt) {
  RecordedProfile p = withGpu();
  p.variants.push_back(variant("aten::_fused_rms_norm", 16, 4096, 40, 1000));
  const ProfileView v = buildProfileView({p}, std::nullopt);
  const auto rms =
      std::find_if(v.ops.begin(), v.ops.end(), [](const ViewOp& o) { return o.op == "aten::_fused_rms_norm"; });
  ASSERT_NE(rms, v.ops.end());
  EXPECT_DOUBLE_EQ(rms->estimatedCalls, 40);
  EXPECT_DOUBLE_EQ(rms->estimatedGpuNs.value_or(-1), 1000);
  EXPECT_DOUBLE_EQ(rms->share, 0.1);
  EXPECT_EQ(v.ops[2].op, "aten::_fused_rms_norm");  // after mm (7000) and _softmax (2000), before view (0)
}

TEST(ProfileViewTest, GivenByGpuTimeAndNoProfileCarriesItWhenViewedThenError) {
  EXPECT_THROW(buildProfileView({callsOnly()}, RankBy::GpuTime), Error);
  const ProfileView v = buildProfileView({callsOnly()}, std::nullopt);
  EXPECT_EQ(v.by, RankBy::Calls);
}

TEST(ProfileViewTest, GivenGpuTimeThatBackedOffWhenViewedThenANoteSaysWhy) {
  RecordedProfile p = callsOnly();
  p.version = 2;
  p.gpuTime = RecordedGpuSummary{"cupti", "held-elsewhere", "CUPTI is held by another tool", 0, 0, 0, 0, 0, ""};
  const ProfileView v = buildProfileView({p}, std::nullopt);
  EXPECT_EQ(v.by, RankBy::Calls);
  ASSERT_EQ(v.notes.size(), 1u);
  EXPECT_NE(v.notes[0].find("held-elsewhere (CUPTI is held by another tool)"), std::string::npos) << v.notes[0];
}

TEST(ProfileViewTest, GivenOverloadQualifiedNamesWhenStrippedThenTheRecordedName) {
  EXPECT_EQ(recordedOpName("aten::sum.dim_IntList"), "aten::sum");
  EXPECT_EQ(recordedOpName("aten::_softmax"), "aten::_softmax");
  EXPECT_EQ(recordedOpName("aten::max.dim"), "aten::max");
}

}  // namespace
}  // namespace hotkernel::cli
