// The _fused_rms_norm and native_layer_norm trampolines route plan hits to the
// plan's launcher (with the family's full argument list) and everything else
// to the original kernel. Exercised on the CPU dispatch key with a launcher
// that plays the kernel ABI on the host (the CUDA key runs the same
// trampolines; see tests/gpu).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>

#include "HigherKeyCall.h"
#include "LayerNormOverride.h"
#include "NormCall.h"
#include "RmsNormOverride.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"

namespace hotkernel {
namespace {

constexpr int32_t kF32 = static_cast<int32_t>(kernels::DType::Float32);

// Plays hk_rms_norm's or hk_layer_norm's ABI: writes out = 0.25 everywhere and
// each statistic = its row index, and records the eps and pointers it got.
class AbiLauncher : public KernelLauncher {
 public:
  explicit AbiLauncher(bool layerNorm) : layerNorm_(layerNorm) {}
  bool launch(const RowKernelArgs&, void*) const noexcept override { return false; }
  bool launchArgs(const KernelArgs& a, void* stream) const noexcept override {
    ++calls;
    // Both end with eps and the workspace's two pointers: layer_norm's 11 arguments, rms_norm's 9.
    if (fail || stream != nullptr || a.size() != (layerNorm_ ? 11u : 9u)) return false;
    const size_t outIdx = layerNorm_ ? 3 : 2;
    const int64_t rows = a.int64At(layerNorm_ ? 6 : 4), cols = a.int64At(layerNorm_ ? 7 : 5);
    weight = a.pointerAt(1);
    bias = layerNorm_ ? a.pointerAt(2) : nullptr;
    eps = a.float32At(a.size() - 3);
    workspace = a.pointerAt(a.size() - 2);
    counter = a.pointerAt(a.size() - 1);
    float* out = static_cast<float*>(const_cast<void*>(a.pointerAt(outIdx)));
    for (int64_t i = 0; i < rows * cols; ++i) out[i] = 0.25f;
    for (size_t s = outIdx + 1; s < outIdx + (layerNorm_ ? 3 : 2); ++s) {
      float* stat = static_cast<float*>(const_cast<void*>(a.pointerAt(s)));
      for (int64_t r = 0; r < rows; ++r) stat[r] = static_cast<float>(r);
    }
    return true;
  }
  size_t alignment() const override { return 16; }
  std::string describe() const override { return "abi"; }
  mutable std::atomic<int> calls{0};
  mutable const void* weight = nullptr;
  mutable const void* bias = nullptr;
  mutable float eps = 0;
  mutable const void* workspace = nullptr;  // rms_norm's partials and counter (a grid-split plan's)
  mutable const void* counter = nullptr;
  std::atomic<bool> fail{false};

 private:
  bool layerNorm_;
};

bool isPattern(const at::Tensor& t) { return at::all(t == 0.25).item<bool>(); }

VariantKey key(int64_t rows, int64_t cols, int32_t flags) {
  VariantKey k{kF32, -1, rows, cols};
  k.options = flags;
  return k;
}

class RmsNormOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    RmsNormOverride::install(c10::DispatchKey::CPU);
    launcher_ = std::make_shared<AbiLauncher>(false);
    plansOf(servedOp("aten::_fused_rms_norm")).publish(Plan{key(6, 32, kernels::variant_options::kWeight), launcher_, "abi 6x32 weight"});
  }
  void SetUp() override {
    launcher_->fail = false;
    setServedOpsEnabled(true);
  }
  static std::shared_ptr<AbiLauncher> launcher_;
};
std::shared_ptr<AbiLauncher> RmsNormOverrideTest::launcher_;

TEST_F(RmsNormOverrideTest, GivenInstalledTwiceWhenInstallingThenIdempotent) {
  EXPECT_NO_THROW(RmsNormOverride::install(c10::DispatchKey::CPU));
  EXPECT_TRUE(RmsNormOverride::state().installedFor(c10::DispatchKey::CPU));
}

TEST_F(RmsNormOverrideTest, GivenPlannedVariantWhenCalledThenPlanGetsWeightAndEpsAndRstdIsFloatKeepdim) {
  at::Tensor x = at::randn({2, 3, 32}), w = at::randn({32});
  const uint64_t hits = hitsOf(servedOp("aten::_fused_rms_norm"));
  auto [out, rstd] = at::_fused_rms_norm(x, {32}, w, 1e-3);
  EXPECT_EQ(hitsOf(servedOp("aten::_fused_rms_norm")), hits + 1);
  EXPECT_TRUE(isPattern(out));
  EXPECT_EQ(out.sizes(), x.sizes());
  EXPECT_EQ(rstd.scalar_type(), at::kFloat);
  EXPECT_EQ(rstd.sizes(), (at::IntArrayRef{2, 3, 1}));
  EXPECT_TRUE(at::equal(rstd.reshape({6}), at::arange(6, at::kFloat)));
  EXPECT_EQ(launcher_->weight, w.const_data_ptr());
  EXPECT_FLOAT_EQ(launcher_->eps, 1e-3f);
  EXPECT_EQ(launcher_->workspace, nullptr) << "a plan without a workspace gets none";
  EXPECT_EQ(launcher_->counter, nullptr);
}

// A grid-split plan (Plan::workspaceFloats > 0) gets the stream's persistent workspace: the partials
// at its start, the counter its last float, which is 0 (Note [A persistent workspace per stream]).
TEST_F(RmsNormOverrideTest, GivenAPlanWithAWorkspaceWhenCalledThenTheLaunchGetsTheStreamsWorkspaceAndItsLastFloatAsCounter) {
  Plan plan{key(4, 64, kernels::variant_options::kWeight), launcher_, "abi 4x64 weight, a workspace"};
  plan.workspaceFloats = 4 * 8 + 1;
  plansOf(servedOp("aten::_fused_rms_norm")).publish(plan);
  at::Tensor x = at::randn({4, 64}), w = at::randn({64});
  const uint64_t hits = hitsOf(servedOp("aten::_fused_rms_norm"));
  auto [out, rstd] = at::_fused_rms_norm(x, {64}, w, 1e-3);
  EXPECT_EQ(hitsOf(servedOp("aten::_fused_rms_norm")), hits + 1);
  EXPECT_TRUE(isPattern(out));
  ASSERT_NE(launcher_->workspace, nullptr);
  const float* partials = static_cast<const float*>(launcher_->workspace);
  EXPECT_EQ(launcher_->counter, partials + 4 * 8);
  EXPECT_EQ(*static_cast<const float*>(launcher_->counter), 0.0f);
  // The next call finds the same buffer.
  const void* first = launcher_->workspace;
  (void)at::_fused_rms_norm(x, {64}, w, 1e-3);
  EXPECT_EQ(launcher_->workspace, first);
}

TEST_F(RmsNormOverrideTest, GivenEpsNoneWhenCalledThenKernelGetsFloatEpsilon) {
  at::Tensor x = at::randn({6, 32}), w = at::randn({32});
  auto [out, rstd] = at::_fused_rms_norm(x, {32}, w, std::nullopt);
  EXPECT_TRUE(isPattern(out));
  EXPECT_EQ(launcher_->eps, std::numeric_limits<float>::epsilon());
}

TEST_F(RmsNormOverrideTest, GivenUnplannedOrUnservableCallsWhenCalledThenOriginalResults) {
  at::Tensor x = at::randn({6, 32}), w = at::randn({32});
  const int before = launcher_->calls.load();
  // No weight (another variant), another shape, a non-contiguous weight, a non-contiguous input.
  for (auto [in, weight] : std::vector<std::pair<at::Tensor, std::optional<at::Tensor>>>{
           {x, std::nullopt}, {at::randn({7, 32}), w}, {x, at::randn({32, 2}).select(1, 0)},
           {at::randn({32, 6}).t(), std::nullopt}}) {
    const uint64_t misses = missesOf(servedOp("aten::_fused_rms_norm"));
    auto [out, rstd] = at::_fused_rms_norm(in, {in.size(-1)}, weight, 1e-5);
    EXPECT_EQ(missesOf(servedOp("aten::_fused_rms_norm")), misses + 1);
    EXPECT_FALSE(isPattern(out));
  }
  EXPECT_EQ(launcher_->calls.load(), before);
}

TEST_F(RmsNormOverrideTest, GivenLauncherFailureOrDisabledWhenCalledThenOriginal) {
  at::Tensor x = at::randn({6, 32}), w = at::randn({32});
  launcher_->fail = true;
  EXPECT_FALSE(isPattern(std::get<0>(at::_fused_rms_norm(x, {32}, w, 1e-5))));
  launcher_->fail = false;
  setServedOpsEnabled(false);
  EXPECT_FALSE(isPattern(std::get<0>(at::_fused_rms_norm(x, {32}, w, 1e-5))));
  setServedOpsEnabled(true);
  EXPECT_TRUE(isPattern(std::get<0>(at::_fused_rms_norm(x, {32}, w, 1e-5))));
}

TEST_F(RmsNormOverrideTest, GivenAKeysetWithAKeyAboveCpuWhenCalledForTheCpuKeyThenTheOriginalRuns) {
  // As torch.compile's Python dispatcher calls it: the trampoline's keyset's highest key is not CPU.
  at::Tensor x = at::randn({7, 32}), w = at::randn({32});
  torch::jit::Stack out = callCpuKernelUnderAHigherKey(
      "aten::_fused_rms_norm", "", {x, std::vector<int64_t>{32}, w, std::optional<double>(1e-5)});
  ASSERT_EQ(out.size(), 2u);
  auto [refOut, refRstd] =
      RmsNormOverride::callOriginal(c10::DispatchKeySet(c10::DispatchKey::CPU), x, {32}, w, 1e-5);
  EXPECT_TRUE(at::equal(out[0].toTensor(), refOut));
  EXPECT_TRUE(at::equal(out[1].toTensor(), refRstd));
}

TEST_F(RmsNormOverrideTest, GivenMisalignedInputWhenCalledThenGuardRefusesAndOriginalRuns) {
  at::Tensor flat = at::randn({6 * 32 + 1});
  at::Tensor x = flat.narrow(0, 1, 6 * 32).view({6, 32});  // 4 bytes off a 16-byte boundary
  ASSERT_TRUE(x.is_contiguous());
  EXPECT_FALSE(isPattern(std::get<0>(at::_fused_rms_norm(x, {32}, at::randn({32}), 1e-5))));
}

class LayerNormOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LayerNormOverride::install(c10::DispatchKey::CPU);
    launcher_ = std::make_shared<AbiLauncher>(true);
    plansOf(servedOp("aten::native_layer_norm")).publish(
        Plan{key(6, 32, kernels::variant_options::kWeight | kernels::variant_options::kBias), launcher_, "abi 6x32 weight bias"});
  }
  void SetUp() override { setServedOpsEnabled(true); }
  static std::shared_ptr<AbiLauncher> launcher_;
};
std::shared_ptr<AbiLauncher> LayerNormOverrideTest::launcher_;

TEST_F(LayerNormOverrideTest, GivenPlannedVariantWhenCalledThenMeanAndRstdAreFloatKeepdimAndArraysPassed) {
  at::Tensor x = at::randn({6, 32}), w = at::randn({32}), b = at::randn({32});
  const uint64_t hits = hitsOf(servedOp("aten::native_layer_norm"));
  auto [out, mean, rstd] = at::native_layer_norm(x, {32}, w, b, 1e-5);
  EXPECT_EQ(hitsOf(servedOp("aten::native_layer_norm")), hits + 1);
  EXPECT_TRUE(isPattern(out));
  EXPECT_EQ(mean.scalar_type(), at::kFloat);
  EXPECT_EQ(mean.sizes(), (at::IntArrayRef{6, 1}));
  EXPECT_EQ(rstd.sizes(), (at::IntArrayRef{6, 1}));
  EXPECT_TRUE(at::equal(mean.reshape({6}), at::arange(6, at::kFloat)));
  EXPECT_EQ(launcher_->weight, w.const_data_ptr());
  EXPECT_EQ(launcher_->bias, b.const_data_ptr());
  EXPECT_FLOAT_EQ(launcher_->eps, 1e-5f);
  // The composite op reaches the same plan.
  EXPECT_TRUE(isPattern(at::layer_norm(x, {32}, w, b, 1e-5)));
}

TEST_F(LayerNormOverrideTest, GivenOtherVariantsWhenCalledThenOriginalKernelResult) {
  at::Tensor x = at::randn({6, 32}), w = at::randn({32}), b = at::randn({32});
  // Weight without bias is another variant; so is normalizing [2, 32] of a [3, 2, 32] view (3 rows of 64).
  for (auto [in, shape, bias] : std::vector<std::tuple<at::Tensor, std::vector<int64_t>, std::optional<at::Tensor>>>{
           {x, {32}, std::nullopt}, {x.view({3, 2, 32}), {2, 32}, at::randn({2, 32})}}) {
    const at::Tensor weight = at::randn(shape);
    const uint64_t misses = missesOf(servedOp("aten::native_layer_norm"));
    auto [out, mean, rstd] = at::native_layer_norm(in, shape, weight, bias, 1e-5);
    EXPECT_EQ(missesOf(servedOp("aten::native_layer_norm")), misses + 1);
    auto [refOut, refMean, refRstd] = LayerNormOverride::callOriginal(
        c10::DispatchKeySet(c10::DispatchKey::CPU), in, c10::fromIntArrayRefSlow(shape), weight, bias, 1e-5);
    EXPECT_TRUE(at::allclose(out, refOut));
    EXPECT_TRUE(at::allclose(rstd, refRstd));
  }
}

TEST_F(LayerNormOverrideTest, GivenAKeysetWithAKeyAboveCpuWhenCalledForTheCpuKeyThenThePlanOrTheOriginalRuns) {
  // As torch.compile's Python dispatcher calls it: the trampoline's keyset's highest key is not CPU.
  at::Tensor w = at::randn({32}), b = at::randn({32});
  at::Tensor other = at::randn({7, 32});
  torch::jit::Stack out = callCpuKernelUnderAHigherKey(
      "aten::native_layer_norm", "", {other, std::vector<int64_t>{32}, w, b, 1e-5});
  ASSERT_EQ(out.size(), 3u);
  auto [refOut, refMean, refRstd] =
      LayerNormOverride::callOriginal(c10::DispatchKeySet(c10::DispatchKey::CPU), other, {32}, w, b, 1e-5);
  EXPECT_TRUE(at::equal(out[0].toTensor(), refOut));
  EXPECT_TRUE(at::equal(out[2].toTensor(), refRstd));
  out = callCpuKernelUnderAHigherKey("aten::native_layer_norm", "",
                                              {at::randn({6, 32}), std::vector<int64_t>{32}, w, b, 1e-5});
  EXPECT_TRUE(isPattern(out[0].toTensor()));
}

TEST_F(LayerNormOverrideTest, GivenNormalizedDimsThatFoldToThePlannedRowsWhenCalledThenSamePlanRuns) {
  // [6, 2, 16] normalized over [2, 16]: 6 rows of 32, the planned variant; stats come back [6, 1, 1].
  at::Tensor x = at::randn({6, 2, 16}), w = at::randn({2, 16}), b = at::randn({2, 16});
  auto [out, mean, rstd] = at::native_layer_norm(x, {2, 16}, w, b, 1e-5);
  EXPECT_TRUE(isPattern(out));
  EXPECT_EQ(rstd.sizes(), (at::IntArrayRef{6, 1, 1}));
}

TEST(NormCallTest, GivenTensorsWhenKeyedThenRowsColsFlagsAndStatShape) {
  at::Tensor x = at::randn({2, 3, 4, 5}).to(at::kBFloat16);
  at::Tensor w = at::randn({4, 5}).to(at::kBFloat16);
  auto call = normCallOf(x, {4, 5}, w, std::nullopt);
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->key.rows, 6);
  EXPECT_EQ(call->key.cols, 20);
  EXPECT_EQ(call->key.device, -1);
  EXPECT_EQ(call->key.options, kernels::variant_options::kWeight);
  EXPECT_EQ(call->statShape, (std::vector<int64_t>{2, 3, 1, 1}));
  EXPECT_EQ(normCallOf(x, {4, 5}, w, w)->key.options, kernels::variant_options::kWeight | kernels::variant_options::kBias);
  EXPECT_EQ(normCallOf(x, {4, 5}, at::Tensor(), std::nullopt)->key.options, 0);  // undefined weight = none
  EXPECT_EQ(normCallOf(x, {5}, std::nullopt, std::nullopt)->key.rows, 24);           // fewer normalized dims
  EXPECT_FALSE(normCallOf(x, {4, 4}, std::nullopt, std::nullopt).has_value());        // not the trailing dims
  EXPECT_FALSE(normCallOf(x, {}, std::nullopt, std::nullopt).has_value());            // nothing normalized
  EXPECT_FALSE(normCallOf(x, {4, 5}, w.to(at::kFloat), std::nullopt).has_value());   // weight dtype
  EXPECT_FALSE(normCallOf(x, {4, 5}, at::randn({5, 4}).to(at::kBFloat16).t(), std::nullopt).has_value());
  EXPECT_FALSE(normCallOf(x, {4, 5}, w.reshape({20}), std::nullopt).has_value());    // weight shape
  EXPECT_FALSE(normCallOf(x.to(at::kDouble), {4, 5}, std::nullopt, std::nullopt).has_value());
  EXPECT_FALSE(normCallOf(at::randn({0, 5}), {5}, std::nullopt, std::nullopt).has_value());
  EXPECT_FALSE(normCallOf(at::randn({5, 6}).t(), {5}, std::nullopt, std::nullopt).has_value());
}

}  // namespace
}  // namespace hotkernel
