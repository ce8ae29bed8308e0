// The native_batch_norm trampoline routes plan hits (a training-mode batch
// norm of one sample without affine or running statistics: Note [Batch norm
// of one sample]) to the plan's launcher with hk_layer_norm's argument list
// (rows = C, cols = a channel's elements, null weight and bias, save_mean and
// save_invstd float32 [C]) and everything else to the original kernel.
// Exercised on the CPU dispatch key with a launcher that plays the kernel ABI
// on the host (the CUDA key runs the same trampoline; tests/gpu/).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>

#include "BatchNormOverride.h"
#include "HigherKeyCall.h"
#include "LayerNormAbiLauncher.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/DType.h"

namespace hotkernel {
namespace {

using BatchAbiLauncher = LayerNormAbiLauncher;
bool isPattern(const at::Tensor& t) { return isLayerNormAbiPattern(t); }

// A weight of 6 output channels, 4 input channels, 3 x 3: one sample of 6 channels of 36 elements.
VariantKey plannedKey() { return VariantKey{static_cast<int32_t>(kernels::DType::Float32), -1, 6, 36}; }

class BatchNormOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    BatchNormOverride::install(c10::DispatchKey::CPU);
    launcher_ = std::make_shared<BatchAbiLauncher>();
    plansOf(servedOp("aten::native_batch_norm")).publish(Plan{plannedKey(), launcher_, "batch abi 6x36"});
  }
  void SetUp() override {
    launcher_->fail = false;
    setServedOpsEnabled(true);
  }
  static std::shared_ptr<BatchAbiLauncher> launcher_;
};
std::shared_ptr<BatchAbiLauncher> BatchNormOverrideTest::launcher_;

TEST_F(BatchNormOverrideTest, GivenAStandardizedWeightWhenBatchNormedThenThePlanGetsChannelRowsAndStatsAreFloatC) {
  at::Tensor w = at::randn({6, 4, 3, 3});
  const uint64_t hits = hitsOf(servedOp("aten::native_batch_norm"));
  auto [out, mean, invstd] = at::native_batch_norm(w.reshape({1, 6, -1}), std::nullopt, std::nullopt, std::nullopt,
                                                   std::nullopt, /*training=*/true, 0.0, 1e-6);
  EXPECT_EQ(hitsOf(servedOp("aten::native_batch_norm")), hits + 1);
  EXPECT_TRUE(isPattern(out));
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{1, 6, 36}));
  EXPECT_EQ(mean.sizes(), (at::IntArrayRef{6}));
  EXPECT_EQ(invstd.sizes(), (at::IntArrayRef{6}));
  EXPECT_EQ(mean.scalar_type(), at::kFloat);
  EXPECT_EQ(invstd.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(invstd, at::arange(6, at::kFloat)));
  EXPECT_EQ(launcher_->rows, 6);
  EXPECT_EQ(launcher_->cols, 36);
  EXPECT_EQ(launcher_->weight, nullptr);
  EXPECT_EQ(launcher_->bias, nullptr);
  EXPECT_FLOAT_EQ(launcher_->eps, 1e-6f);
  // F.batch_norm as HF's WeightStandardizedConv2d calls it reaches the same plan; so does a [1, C, K1, K2] view.
  EXPECT_TRUE(isPattern(at::batch_norm(w.reshape({1, 6, -1}), {}, {}, {}, {}, true, 0.0, 1e-6, false)));
  EXPECT_TRUE(isPattern(std::get<0>(at::native_batch_norm(w.reshape({1, 6, 4, 9}), std::nullopt, std::nullopt,
                                                          std::nullopt, std::nullopt, true, 0.1, 1e-6))));
}

TEST_F(BatchNormOverrideTest, GivenEveryOtherBatchNormWhenCalledThenTheOriginalKernelsResult) {
  at::Tensor x = at::randn({1, 6, 36});
  at::Tensor c6 = at::randn({6});
  const int before = launcher_->calls.load();
  struct Case {
    at::Tensor in;
    std::optional<at::Tensor> weight, bias, runningMean, runningVar;
    bool training;
  };
  const std::vector<Case> cases = {
      {x, c6, std::nullopt, std::nullopt, std::nullopt, true},                      // an affine weight
      {x, std::nullopt, c6, std::nullopt, std::nullopt, true},                      // an affine bias
      {x, std::nullopt, std::nullopt, at::zeros({6}), at::ones({6}), true},         // running statistics to update
      {x, std::nullopt, std::nullopt, at::zeros({6}), at::ones({6}), false},        // eval mode
      {at::randn({2, 6, 18}), std::nullopt, std::nullopt, std::nullopt, std::nullopt, true},  // two samples
      {at::randn({1, 36, 6}).transpose(1, 2), std::nullopt, std::nullopt, std::nullopt, std::nullopt,
       true},                                                                                 // not contiguous
      {at::randn({1, 5, 36}), std::nullopt, std::nullopt, std::nullopt, std::nullopt, true},  // another variant
      {x.to(at::kDouble), std::nullopt, std::nullopt, std::nullopt, std::nullopt, true},      // float64
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const uint64_t misses = missesOf(servedOp("aten::native_batch_norm"));
    auto [out, mean, invstd] = at::native_batch_norm(c.in, c.weight, c.bias, c.runningMean, c.runningVar,
                                                     c.training, 0.1, 1e-5);
    EXPECT_EQ(missesOf(servedOp("aten::native_batch_norm")), misses + 1) << "case " << i;
    EXPECT_FALSE(isPattern(out)) << "case " << i;
    std::optional<at::Tensor> mean2, var2;  // fresh running statistics: the call above updated the case's own
    if (c.runningMean) mean2 = at::zeros({6}), var2 = at::ones({6});
    auto [refOut, refMean, refInvstd] = BatchNormOverride::callOriginal(
        c10::DispatchKeySet(c10::DispatchKey::CPU), c.in, c.weight, c.bias, mean2, var2, c.training, 0.1, 1e-5);
    EXPECT_TRUE(at::allclose(out, refOut)) << "case " << i;
    EXPECT_EQ(invstd.sizes(), refInvstd.sizes()) << "case " << i;
  }
  EXPECT_EQ(launcher_->calls.load(), before);
}

TEST_F(BatchNormOverrideTest, GivenLauncherFailureOrServingDisabledWhenCalledThenTheOriginal) {
  at::Tensor x = at::randn({1, 6, 36});
  auto call = [&] {
    return std::get<0>(
        at::native_batch_norm(x, std::nullopt, std::nullopt, std::nullopt, std::nullopt, true, 0.0, 1e-5));
  };
  launcher_->fail = true;
  EXPECT_FALSE(isPattern(call()));
  EXPECT_TRUE(at::allclose(call(), (x - x.mean(2, true)) / at::sqrt(x.var(2, false, true) + 1e-5), 1e-4, 1e-5));
  launcher_->fail = false;
  setServedOpsEnabled(false);
  EXPECT_FALSE(isPattern(call()));
  setServedOpsEnabled(true);
  EXPECT_TRUE(isPattern(call()));
}

TEST_F(BatchNormOverrideTest, GivenAKeysetWithAKeyAboveCpuWhenCalledForTheCpuKeyThenThePlanOrTheOriginalRuns) {
  const c10::IValue none;
  torch::jit::Stack out = callCpuKernelUnderAHigherKey(
      "aten::native_batch_norm", "", {at::randn({1, 7, 36}), none, none, none, none, true, 0.0, 1e-5});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FALSE(isPattern(out[0].toTensor()));
  out = callCpuKernelUnderAHigherKey("aten::native_batch_norm", "",
                                     {at::randn({1, 6, 36}), none, none, none, none, true, 0.0, 1e-5});
  EXPECT_TRUE(isPattern(out[0].toTensor()));
}

TEST(BatchNormKeyTest, GivenCallsWhenKeyedThenChannelRowsOfTheChannelsElementsOrNothing) {
  const std::optional<at::Tensor> none;
  auto key = [&](const at::Tensor& in, bool training = true) {
    return batchNormKeyOfCall(in, none, none, none, none, training);
  };
  const std::optional<VariantKey> k = key(at::randn({1, 64, 3, 3, 32}).to(at::kBFloat16));
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->dtype, static_cast<int32_t>(kernels::DType::BFloat16));
  EXPECT_EQ(k->device, -1);
  EXPECT_EQ(k->rows, 64);
  EXPECT_EQ(k->cols, 288);
  EXPECT_EQ(k->options, 0);
  EXPECT_FALSE(k->hasMore());
  EXPECT_FALSE(key(at::randn({1, 64, 288}), /*training=*/false));
  EXPECT_FALSE(key(at::randn({64, 288})));        // 64 samples of 288 channels
  EXPECT_FALSE(key(at::empty({1, 0, 4})));
  EXPECT_FALSE(key(at::randn({1, 8, 4}).to(at::kDouble)));
  EXPECT_FALSE(batchNormKeyOfCall(at::randn({1, 8, 4}), at::Tensor(), none, at::randn({8}), none, true));
  EXPECT_TRUE(batchNormKeyOfCall(at::randn({1, 8, 4}), at::Tensor(), at::Tensor(), none, none, true));  // undefined = absent
}

}  // namespace
}  // namespace hotkernel
