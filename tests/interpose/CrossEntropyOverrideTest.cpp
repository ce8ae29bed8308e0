// The cross_entropy_loss trampolines (Note [Overriding a composite op]):
// the call's variant key from tensors, plan hits with the family's full
// argument list, the workspace from the stream's pool with its counter at 0
// (Note [A persistent workspace per stream]), autograd
// calls and refused calls on the original composite. Exercised on the CPU
// and AutogradCPU keys with a launcher that plays hk_cross_entropy's ABI on
// the host (the CUDA keys run the same trampolines; see tests/gpu).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <atomic>
#include <cmath>

#include "CrossEntropyOverride.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/runtime/StreamWorkspace.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"

namespace hotkernel {
namespace {

constexpr int32_t kF32 = static_cast<int32_t>(kernels::DType::Float32);
constexpr int64_t kRows = 6, kCols = 32;

// Plays hk_cross_entropy(logits, labels, out, work, rows, cols, ignoreIndex):
// writes 0.25 to every output element, records the pointers, ignoreIndex
// and the counter (work[rows]) it found.
class AbiLauncher : public KernelLauncher {
 public:
  bool launch(const RowKernelArgs&, void*) const noexcept override { return false; }
  bool launchArgs(const KernelArgs& a, void* stream) const noexcept override {
    ++calls;
    if (fail || stream != nullptr || a.size() != 7u) return false;
    const int64_t rows = a.int64At(4);
    labels = a.pointerAt(1);
    work = a.pointerAt(3);
    ignoreIndex = a.int64At(6);
    counter = work ? static_cast<const float*>(work)[rows] : NAN;
    float* out = static_cast<float*>(const_cast<void*>(a.pointerAt(2)));
    for (int64_t i = 0; i < (work ? 1 : rows); ++i) out[i] = 0.25f;
    return true;
  }
  size_t alignment() const override { return 16; }
  std::string describe() const override { return "abi"; }
  mutable std::atomic<int> calls{0};
  mutable const void* labels = nullptr;
  mutable const void* work = nullptr;
  mutable int64_t ignoreIndex = 0;
  mutable float counter = 0;
  std::atomic<bool> fail{false};
};

bool isPattern(const at::Tensor& t) { return at::all(t == 0.25).item<bool>(); }

VariantKey key(int64_t rows, int64_t cols, int32_t reduction) {
  VariantKey k{kF32, -1, rows, cols};
  k.options = kernels::reductionOptions(reduction);
  return k;
}

at::Tensor labels(int64_t rows, int64_t cols) { return at::randint(0, cols, {rows}, at::kLong); }

at::Tensor original(const at::Tensor& x, const at::Tensor& t, int64_t reduction = at::Reduction::Mean,
                    int64_t ignoreIndex = -100, const std::optional<at::Tensor>& w = std::nullopt, double smoothing = 0) {
  return CrossEntropyOverride::callOriginal(x, t, w, reduction, ignoreIndex, smoothing);
}

class CrossEntropyOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CrossEntropyOverride::install(c10::DispatchKey::CPU);
    mean_ = std::make_shared<AbiLauncher>();
    none_ = std::make_shared<AbiLauncher>();
    sum_ = std::make_shared<AbiLauncher>();
    plansOf(servedOp("aten::cross_entropy_loss")).publish(Plan{key(kRows, kCols, at::Reduction::Mean), mean_, "abi mean"});
    plansOf(servedOp("aten::cross_entropy_loss")).publish(Plan{key(kRows, kCols, at::Reduction::None), none_, "abi none"});
    plansOf(servedOp("aten::cross_entropy_loss")).publish(Plan{key(kRows, kCols, at::Reduction::Sum), sum_, "abi sum"});
  }
  void SetUp() override {
    mean_->fail = false;
    setServedOpsEnabled(true);
  }
  static std::shared_ptr<AbiLauncher> mean_, none_, sum_;
};
std::shared_ptr<AbiLauncher> CrossEntropyOverrideTest::mean_;
std::shared_ptr<AbiLauncher> CrossEntropyOverrideTest::none_;
std::shared_ptr<AbiLauncher> CrossEntropyOverrideTest::sum_;

TEST_F(CrossEntropyOverrideTest, GivenInstalledWhenInstallingAgainThenIdempotentAndBothKeysRegistered) {
  EXPECT_NO_THROW(CrossEntropyOverride::install(c10::DispatchKey::CPU));
  EXPECT_TRUE(CrossEntropyOverride::state().installedFor(c10::DispatchKey::CPU));
  EXPECT_TRUE(CrossEntropyOverride::state().installedFor(c10::DispatchKey::AutogradCPU));
}

TEST_F(CrossEntropyOverrideTest, GivenPlannedMeanUnderInferenceModeWhenCalledThenPlanRunsWith0DimOutAndZeroedCounter) {
  at::Tensor x = at::randn({kRows, kCols}), t = labels(kRows, kCols);
  c10::InferenceMode inference;
  const uint64_t hits = hitsOf(servedOp("aten::cross_entropy_loss"));
  at::Tensor loss = at::cross_entropy_loss(x, t, std::nullopt, at::Reduction::Mean, 3, 0.0);
  EXPECT_EQ(hitsOf(servedOp("aten::cross_entropy_loss")), hits + 1);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  EXPECT_TRUE(isPattern(loss));
  EXPECT_EQ(mean_->labels, t.const_data_ptr());
  EXPECT_EQ(mean_->ignoreIndex, 3);
  ASSERT_NE(mean_->work, nullptr);
  EXPECT_EQ(mean_->counter, 0.0f);  // the launch reads it
}

TEST_F(CrossEntropyOverrideTest, GivenRepeatedCallsWhenServedThenOneWorkspacePerStreamIsReused) {
  at::Tensor x = at::randn({kRows, kCols}), t = labels(kRows, kCols);
  c10::InferenceMode inference;
  (void)at::cross_entropy_loss(x, t, std::nullopt, at::Reduction::Mean, -100, 0.0);
  const void* first = mean_->work;
  (void)at::cross_entropy_loss(x, t, std::nullopt, at::Reduction::Mean, -100, 0.0);
  EXPECT_EQ(mean_->work, first) << "allocated again: the fill kernel would be back";
  (void)at::cross_entropy_loss(x, t, std::nullopt, at::Reduction::Sum, -100, 0.0);
  EXPECT_EQ(sum_->work, first) << "the same stream, the same rows: the same scratch";
  EXPECT_EQ(mean_->counter, 0.0f);
  EXPECT_GE(StreamWorkspaces::global().pooledBuffers(), 1u);
}

TEST_F(CrossEntropyOverrideTest, GivenReductionNoneWhenCalledThenRowsOutputAndNoWorkspace) {
  at::Tensor x = at::randn({kRows, kCols}), t = labels(kRows, kCols);
  c10::InferenceMode inference;
  at::Tensor loss = at::cross_entropy_loss(x, t, std::nullopt, at::Reduction::None, -100, 0.0);
  EXPECT_EQ(loss.sizes(), (at::IntArrayRef{kRows}));
  EXPECT_TRUE(isPattern(loss));
  EXPECT_EQ(none_->work, nullptr);
  EXPECT_EQ(none_->ignoreIndex, -100);
}

TEST_F(CrossEntropyOverrideTest, GivenSumPlanWithoutCounterWhenCalledThenWorkspaceGivenAndPlanRuns) {
  at::Tensor x = at::randn({kRows, kCols}), t = labels(kRows, kCols);
  c10::InferenceMode inference;
  at::Tensor loss = at::cross_entropy_loss(x, t, std::nullopt, at::Reduction::Sum, -100, 0.0);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_TRUE(isPattern(loss));
  EXPECT_NE(sum_->work, nullptr);
}

TEST_F(CrossEntropyOverrideTest, GivenNoGradRequiredOutsideInferenceModeWhenCalledThenAutogradKeyRedispatchesToPlan) {
  at::Tensor x = at::randn({kRows, kCols}), t = labels(kRows, kCols);
  const int before = mean_->calls.load();
  at::Tensor loss = at::cross_entropy_loss(x, t);  // grad mode on, nothing requires grad
  EXPECT_EQ(mean_->calls.load(), before + 1);
  EXPECT_TRUE(isPattern(loss));
  EXPECT_FALSE(loss.requires_grad());
}

TEST_F(CrossEntropyOverrideTest, GivenLogitsRequiringGradWhenCalledThenOriginalRunsAndGradientIsAtens) {
  at::Tensor x0 = at::randn({kRows, kCols}), t = labels(kRows, kCols);
  t[1] = -100;
  at::Tensor x = x0.clone().requires_grad_(true);
  const int before = mean_->calls.load();
  at::Tensor loss = at::cross_entropy_loss(x, t);
  EXPECT_EQ(mean_->calls.load(), before);
  ASSERT_TRUE(loss.requires_grad());
  loss.backward();
  // ATen's gradient: softmax - one_hot(labels), averaged over the rows kept, 0 for ignored rows.
  at::Tensor kept = (t != -100);
  at::Tensor oneHot = at::one_hot(t.clamp_min(0), kCols).to(at::kFloat);
  // In float64: this binary's softmax tests plan float32 [6, 32] softmax calls on the CPU key.
  at::Tensor expected = ((at::softmax(x0.to(at::kDouble), 1) - oneHot) * kept.unsqueeze(1).to(at::kDouble) /
                         kept.sum().item<double>())
                            .to(at::kFloat);
  EXPECT_TRUE(at::allclose(x.grad(), expected, 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(loss.detach(), original(x0, t), 1e-6, 1e-6));
}

TEST_F(CrossEntropyOverrideTest, GivenGradRequiredButNoGradModeWhenCalledThenPlanRuns) {
  at::Tensor x = at::randn({kRows, kCols}).requires_grad_(true), t = labels(kRows, kCols);
  c10::AutoGradMode noGrad(false);
  EXPECT_TRUE(isPattern(at::cross_entropy_loss(x, t)));
}

TEST_F(CrossEntropyOverrideTest, GivenRefusedOrUnplannedCallsWhenCalledThenOriginalComposite) {
  at::Tensor x = at::randn({kRows, kCols}), t = labels(kRows, kCols);
  const int before = mean_->calls.load();
  c10::InferenceMode inference;
  const uint64_t misses = missesOf(servedOp("aten::cross_entropy_loss"));
  // Class weights, label smoothing, another shape, probabilities, non-contiguous logits.
  const at::Tensor w = at::rand({kCols});
  EXPECT_FALSE(isPattern(at::cross_entropy_loss(x, t, w, 1, -100, 0.0)));
  EXPECT_TRUE(at::allclose(at::cross_entropy_loss(x, t, w, 1, -100, 0.0), original(x, t, 1, -100, w)));
  EXPECT_TRUE(at::allclose(at::cross_entropy_loss(x, t, std::nullopt, 1, -100, 0.1),
                           original(x, t, 1, -100, std::nullopt, 0.1)));
  at::Tensor x7 = at::randn({7, kCols}), t7 = labels(7, kCols);
  EXPECT_TRUE(at::allclose(at::cross_entropy_loss(x7, t7), original(x7, t7)));
  at::Tensor probs = at::softmax(at::randn({kRows, kCols}), 1);
  EXPECT_TRUE(at::allclose(at::cross_entropy_loss(x, probs), original(x, probs)));
  at::Tensor xt = at::randn({kCols, kRows}).t();
  EXPECT_TRUE(at::allclose(at::cross_entropy_loss(xt, t), original(xt, t)));
  EXPECT_EQ(mean_->calls.load(), before);
  EXPECT_GE(missesOf(servedOp("aten::cross_entropy_loss")), misses + 6);
}

TEST_F(CrossEntropyOverrideTest, GivenLauncherFailureOrDisabledOrMisalignedLogitsWhenCalledThenOriginal) {
  at::Tensor x = at::randn({kRows, kCols}), t = labels(kRows, kCols);
  c10::InferenceMode inference;
  mean_->fail = true;
  EXPECT_TRUE(at::allclose(at::cross_entropy_loss(x, t), original(x, t)));
  mean_->fail = false;
  setServedOpsEnabled(false);
  EXPECT_TRUE(at::allclose(at::cross_entropy_loss(x, t), original(x, t)));
  setServedOpsEnabled(true);
  at::Tensor flat = at::randn({kRows * kCols + 1});
  at::Tensor misaligned = flat.narrow(0, 1, kRows * kCols).view({kRows, kCols});  // 4 bytes off 16
  ASSERT_TRUE(misaligned.is_contiguous());
  EXPECT_TRUE(at::allclose(at::cross_entropy_loss(misaligned, t), original(misaligned, t)));
  EXPECT_TRUE(isPattern(at::cross_entropy_loss(x, t)));
}

TEST(CrossEntropyKeyTest, GivenServableCallWhenKeyedThenRowsColsDeviceAndReduction) {
  at::Tensor x = at::randn({5, 11}).to(at::kBFloat16), t = labels(5, 11);
  std::optional<VariantKey> k = crossEntropyKeyOf(x, t, std::nullopt, at::Reduction::Sum, 0.0);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->dtype, static_cast<int32_t>(kernels::DType::BFloat16));
  EXPECT_EQ(k->device, -1);
  EXPECT_EQ(k->rows, 5);
  EXPECT_EQ(k->cols, 11);
  EXPECT_EQ(kernels::reductionOf(*k), at::Reduction::Sum);
  EXPECT_FALSE(kernels::hasWeight(*k));
}

TEST(CrossEntropyKeyTest, GivenCallsTheFamilyRefusesWhenKeyedThenNone) {
  at::Tensor x = at::randn({5, 11}), t = labels(5, 11);
  EXPECT_FALSE(crossEntropyKeyOf(x, t, at::rand({11}), 1, 0.0).has_value());         // class weights
  EXPECT_FALSE(crossEntropyKeyOf(x, t, std::nullopt, 1, 0.1).has_value());           // label smoothing
  EXPECT_FALSE(crossEntropyKeyOf(x, t.to(at::kInt), std::nullopt, 1, 0.0).has_value());  // int32 labels
  EXPECT_FALSE(crossEntropyKeyOf(x, at::rand({5, 11}), std::nullopt, 1, 0.0).has_value());  // probabilities
  EXPECT_FALSE(crossEntropyKeyOf(x.view({5, 11, 1}), t.view({5, 1}), std::nullopt, 1, 0.0).has_value());  // 3-D
  EXPECT_FALSE(crossEntropyKeyOf(at::randn({11, 5}).t(), t, std::nullopt, 1, 0.0).has_value());  // transposed
  EXPECT_FALSE(crossEntropyKeyOf(x, labels(4, 11), std::nullopt, 1, 0.0).has_value());  // rows differ
  EXPECT_FALSE(crossEntropyKeyOf(x, at::randint(0, 11, {10}, at::kLong).slice(0, 0, 10, 2), std::nullopt, 1, 0.0)
                   .has_value());  // strided labels
  EXPECT_FALSE(crossEntropyKeyOf(x, t, std::nullopt, 3, 0.0).has_value());  // unknown reduction
  EXPECT_FALSE(crossEntropyKeyOf(x.to(at::kDouble), t, std::nullopt, 1, 0.0).has_value());  // float64 logits
  EXPECT_FALSE(crossEntropyKeyOf(at::randn({0, 11}), labels(0, 11), std::nullopt, 1, 0.0).has_value());  // empty
  EXPECT_FALSE(crossEntropyKeyOf(x, at::Tensor(), std::nullopt, 1, 0.0).has_value());
}

TEST(CrossEntropyKeyTest, GivenGradStatesWhenAskedThenNeedsGradOnlyWithGradModeAndRequiresGrad) {
  at::Tensor x = at::randn({2, 3}), t = labels(2, 3);
  EXPECT_FALSE(crossEntropyNeedsGrad(x, t, std::nullopt));
  at::Tensor xg = x.clone().requires_grad_(true);
  EXPECT_TRUE(crossEntropyNeedsGrad(xg, t, std::nullopt));
  EXPECT_TRUE(crossEntropyNeedsGrad(x, t, at::rand({3}).requires_grad_(true)));
  c10::AutoGradMode noGrad(false);
  EXPECT_FALSE(crossEntropyNeedsGrad(xg, t, std::nullopt));
}

}  // namespace
}  // namespace hotkernel
