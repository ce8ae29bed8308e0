// The native_group_norm trampoline routes plan hits to the plan's launcher
// (hk_layer_norm's argument list, mean and rstd of the input's dtype, eps
// rounded to it) and everything else to the original kernel. Exercised on the
// CPU dispatch key with a launcher that plays the kernel ABI on the host (the
// CUDA key runs the same trampoline; tests/gpu/GroupNormGpuTest.cpp).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>

#include "GroupNormOverride.h"
#include "HigherKeyCall.h"
#include "LayerNormAbiLauncher.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/kernels/VariantOptions.h"

namespace hotkernel {
namespace {

using GroupAbiLauncher = LayerNormAbiLauncher;
bool isPattern(const at::Tensor& t) { return isLayerNormAbiPattern(t); }

// N = 2, C = 8, HxW = 6 (3 x 2), 4 groups: 8 rows of 12.
VariantKey plannedKey() {
  return kernels::groupNormKeyOf({kernels::DType::Float32, 8, 12, 4, 6, true, true}, -1);
}

class GroupNormOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    GroupNormOverride::install(c10::DispatchKey::CPU);
    launcher_ = std::make_shared<GroupAbiLauncher>();
    plansOf(servedOp("aten::native_group_norm")).publish(Plan{plannedKey(), launcher_, "group abi 8x12"});
  }
  void SetUp() override {
    launcher_->fail = false;
    setServedOpsEnabled(true);
  }
  static std::shared_ptr<GroupAbiLauncher> launcher_;
};
std::shared_ptr<GroupAbiLauncher> GroupNormOverrideTest::launcher_;

TEST_F(GroupNormOverrideTest, GivenPlannedVariantWhenCalledThenThePlanGetsGroupRowsArraysAndEpsAndStatsAreNByGroups) {
  at::Tensor x = at::randn({2, 8, 3, 2}), w = at::randn({8}), b = at::randn({8});
  const uint64_t hits = hitsOf(servedOp("aten::native_group_norm"));
  auto [out, mean, rstd] = at::native_group_norm(x, w, b, 2, 8, 6, 4, 1e-5);
  EXPECT_EQ(hitsOf(servedOp("aten::native_group_norm")), hits + 1);
  EXPECT_TRUE(isPattern(out));
  EXPECT_EQ(out.sizes(), x.sizes());
  EXPECT_EQ(mean.sizes(), (at::IntArrayRef{2, 4}));
  EXPECT_EQ(rstd.sizes(), (at::IntArrayRef{2, 4}));
  EXPECT_EQ(mean.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(mean.reshape({8}), at::arange(8, at::kFloat)));
  EXPECT_EQ(launcher_->rows, 8);
  EXPECT_EQ(launcher_->cols, 12);
  EXPECT_EQ(launcher_->weight, w.const_data_ptr());
  EXPECT_EQ(launcher_->bias, b.const_data_ptr());
  EXPECT_FLOAT_EQ(launcher_->eps, 1e-5f);
  // F.group_norm (the composite op) reaches the same plan.
  EXPECT_TRUE(isPattern(at::group_norm(x, 4, w, b, 1e-5)));
}

TEST_F(GroupNormOverrideTest, GivenOtherVariantsOrUnservableCallsWhenCalledThenTheOriginalKernelsResult) {
  at::Tensor x = at::randn({2, 8, 3, 2}), w = at::randn({8}), b = at::randn({8});
  const int before = launcher_->calls.load();
  struct Case {
    at::Tensor in;
    std::optional<at::Tensor> weight, bias;
    int64_t groups;
  };
  const std::vector<Case> cases = {
      {x, w, std::nullopt, 4},                                     // no bias: another variant
      {x, w, b, 2},                                                // other groups
      {at::randn({2, 8}), w, b, 4},                                // HxW 1: ATen's other expression
      {at::randn({2, 6, 3, 8}).permute({0, 3, 1, 2}), w, b, 4},    // not contiguous
      {x, at::randn({16}).view({8, 2}).select(1, 0), b, 4},        // weight not contiguous
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const int64_t hw = c.in.dim() > 2 ? c.in.size(2) * c.in.size(3) : 1;
    const uint64_t misses = missesOf(servedOp("aten::native_group_norm"));
    auto [out, mean, rstd] = at::native_group_norm(c.in, c.weight, c.bias, c.in.size(0), c.in.size(1), hw, c.groups,
                                                   1e-5);
    EXPECT_EQ(missesOf(servedOp("aten::native_group_norm")), misses + 1) << "case " << i;
    EXPECT_FALSE(isPattern(out)) << "case " << i;
    auto [refOut, refMean, refRstd] = GroupNormOverride::callOriginal(
        c10::DispatchKeySet(c10::DispatchKey::CPU), c.in, c.weight, c.bias, c.in.size(0), c.in.size(1), hw, c.groups,
        1e-5);
    EXPECT_TRUE(at::equal(out, refOut)) << "case " << i;
    EXPECT_TRUE(at::equal(rstd, refRstd)) << "case " << i;
  }
  EXPECT_EQ(launcher_->calls.load(), before);
}

TEST_F(GroupNormOverrideTest, GivenLauncherFailureOrServingDisabledWhenCalledThenTheOriginal) {
  at::Tensor x = at::randn({2, 8, 3, 2}), w = at::randn({8}), b = at::randn({8});
  launcher_->fail = true;
  EXPECT_FALSE(isPattern(std::get<0>(at::native_group_norm(x, w, b, 2, 8, 6, 4, 1e-5))));
  launcher_->fail = false;
  setServedOpsEnabled(false);
  EXPECT_FALSE(isPattern(std::get<0>(at::native_group_norm(x, w, b, 2, 8, 6, 4, 1e-5))));
  setServedOpsEnabled(true);
  EXPECT_TRUE(isPattern(std::get<0>(at::native_group_norm(x, w, b, 2, 8, 6, 4, 1e-5))));
}

TEST_F(GroupNormOverrideTest, GivenAKeysetWithAKeyAboveCpuWhenCalledForTheCpuKeyThenThePlanOrTheOriginalRuns) {
  at::Tensor w = at::randn({8}), b = at::randn({8});
  at::Tensor other = at::randn({3, 8, 3, 2});
  torch::jit::Stack out = callCpuKernelUnderAHigherKey("aten::native_group_norm", "",
                                                       {other, w, b, int64_t{3}, int64_t{8}, int64_t{6}, int64_t{4},
                                                        1e-5});
  ASSERT_EQ(out.size(), 3u);
  auto [refOut, refMean, refRstd] =
      GroupNormOverride::callOriginal(c10::DispatchKeySet(c10::DispatchKey::CPU), other, w, b, 3, 8, 6, 4, 1e-5);
  EXPECT_TRUE(at::equal(out[0].toTensor(), refOut));
  out = callCpuKernelUnderAHigherKey("aten::native_group_norm", "",
                                     {at::randn({2, 8, 3, 2}), w, b, int64_t{2}, int64_t{8}, int64_t{6}, int64_t{4},
                                      1e-5});
  EXPECT_TRUE(isPattern(out[0].toTensor()));
}

TEST(GroupNormKeyTest, GivenCallsWhenKeyedThenGroupRowsChannelsTimesHxWAndTheExtentsOrNothing) {
  at::Tensor x = at::randn({2, 320, 8, 8}).to(at::kBFloat16);
  at::Tensor w = at::randn({320}).to(at::kBFloat16);
  const std::optional<VariantKey> k = groupNormKeyOfCall(x, w, std::nullopt, 2, 320, 64, 32);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->rows, 64);
  EXPECT_EQ(k->cols, 640);
  EXPECT_EQ(k->more[0], 32);
  EXPECT_EQ(k->more[1], 64);
  EXPECT_EQ(k->options, kernels::variant_options::kWeight);
  EXPECT_EQ(k->device, -1);
  EXPECT_TRUE(kernels::groupNormDescriptor().servesKey(*k));
  EXPECT_FALSE(groupNormKeyOfCall(x, w, std::nullopt, 2, 320, 64, 30).has_value());      // 320 % 30
  EXPECT_FALSE(groupNormKeyOfCall(x, w, std::nullopt, 2, 320, 32, 32).has_value());      // N * C * HxW != numel
  EXPECT_FALSE(groupNormKeyOfCall(x, w.to(at::kFloat), std::nullopt, 2, 320, 64, 32).has_value());  // mixed type
  EXPECT_FALSE(groupNormKeyOfCall(x, at::randn({160}).to(at::kBFloat16), std::nullopt, 2, 320, 64, 32).has_value());
  EXPECT_FALSE(groupNormKeyOfCall(x.to(at::kDouble), std::nullopt, std::nullopt, 2, 320, 64, 32).has_value());
  EXPECT_FALSE(groupNormKeyOfCall(at::randn({0, 320, 8, 8}), std::nullopt, std::nullopt, 0, 320, 64, 32).has_value());
  // A contiguous [N, C, HxW] view is the same variant.
  const std::optional<VariantKey> flat = groupNormKeyOfCall(x.reshape({2, 320, 64}), w, std::nullopt, 2, 320, 64, 32);
  ASSERT_TRUE(flat.has_value());
  EXPECT_TRUE(*flat == *k);
}

TEST(GroupNormKeyTest, GivenEpsInEachDTypeWhenRoundedForTheKernelThenAtensStaticCastOfIt) {
  for (double eps : {1e-5, 1e-6, 1e-3, 3.3e-7}) {
    EXPECT_EQ(kernels::GroupNormFamily::kernelEps(kernels::DType::Float32, eps), static_cast<float>(eps));
    EXPECT_EQ(kernels::GroupNormFamily::kernelEps(kernels::DType::Float16, eps),
              static_cast<float>(c10::Half(static_cast<float>(eps))));
    EXPECT_EQ(kernels::GroupNormFamily::kernelEps(kernels::DType::BFloat16, eps),
              static_cast<float>(c10::BFloat16(static_cast<float>(eps))));
  }
  EXPECT_NE(kernels::GroupNormFamily::kernelEps(kernels::DType::BFloat16, 1e-5), 1e-5f);
}

}  // namespace
}  // namespace hotkernel
