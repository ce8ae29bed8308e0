// The trampoline routes plan hits to the plan's launcher and everything else
// to the original kernel. Exercised on the CPU dispatch key with a test
// launcher (the CUDA key uses the same trampoline; see tests/gpu).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/ops/_log_softmax_cpu_dispatch.h>
#include <ATen/ops/_softmax_cpu_dispatch.h>

#include <atomic>
#include <cmath>
#include <utility>
#include <vector>

#include "HigherKeyCall.h"
#include "SoftmaxOverride.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/KernelArgs.h"

namespace hotkernel {
namespace {

// Writes a recognizable pattern (every element = 0.25) instead of a softmax,
// so a hit is unmistakable; can be told to fail.
class PatternLauncher : public KernelLauncher {
 public:
  bool launch(const RowKernelArgs& a, void* stream) const noexcept override {
    ++calls;
    if (fail || stream != nullptr) return false;
    float* out = static_cast<float*>(a.out);
    for (int64_t i = 0; i < a.rows * a.cols; ++i) out[i] = 0.25f;
    return true;
  }
  size_t alignment() const override { return 16; }
  std::string describe() const override { return "pattern"; }
  mutable std::atomic<int> calls{0};
  std::atomic<bool> fail{false};
};

class SoftmaxOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SoftmaxOverride::install(c10::DispatchKey::CPU);
    launcher_ = std::make_shared<PatternLauncher>();
    const int32_t f32 = static_cast<int32_t>(kernels::DType::Float32);
    plansOf(servedOp("aten::_softmax")).publish(Plan{VariantKey{f32, -1, 6, 32}, launcher_, "pattern 6x32"});
  }
  void SetUp() override {
    launcher_->fail = false;
    setServedOpsEnabled(true);
  }
  static bool isPattern(const at::Tensor& t) { return at::all(t == 0.25).item<bool>(); }
  static std::shared_ptr<PatternLauncher> launcher_;
};
std::shared_ptr<PatternLauncher> SoftmaxOverrideTest::launcher_;

TEST_F(SoftmaxOverrideTest, GivenInstalledTwiceWhenInstallingThenIdempotent) {
  EXPECT_NO_THROW(SoftmaxOverride::install(c10::DispatchKey::CPU));
  EXPECT_TRUE(SoftmaxOverride::state().installedFor(c10::DispatchKey::CPU));
}

TEST_F(SoftmaxOverrideTest, GivenPlannedVariantWhenCalledThroughDispatcherThenPlanRuns) {
  at::Tensor x = at::randn({6, 32});
  const int before = launcher_->calls.load();
  const uint64_t hits = hitsOf(servedOp("aten::_softmax"));
  at::Tensor y = at::_softmax(x, -1, false);
  EXPECT_TRUE(isPattern(y));
  EXPECT_EQ(launcher_->calls.load(), before + 1);
  EXPECT_EQ(hitsOf(servedOp("aten::_softmax")), hits + 1);
  // The composite op and a 3-D view of the same rows reach the same plan.
  EXPECT_TRUE(isPattern(at::softmax(x, 1)));
  EXPECT_TRUE(isPattern(at::softmax(x.view({2, 3, 32}), -1)));
}

TEST_F(SoftmaxOverrideTest, GivenOtherVariantsWhenCalledThenOriginalKernelResult) {
  for (const at::Tensor& x : {at::randn({6, 33}), at::randn({7, 32}), at::randn({6, 32}).to(at::kDouble)}) {
    at::Tensor y = at::_softmax(x, -1, false);
    EXPECT_TRUE(at::allclose(y, at::cpu::_softmax(x, -1, false)));
  }
}

TEST_F(SoftmaxOverrideTest, GivenPlannedShapeButOtherDimOrLayoutWhenCalledThenOriginal) {
  at::Tensor x = at::randn({6, 32});
  EXPECT_TRUE(at::allclose(at::_softmax(x, 0, false), at::cpu::_softmax(x, 0, false)));
  at::Tensor t = at::randn({32, 6}).t();  // 6x32, not contiguous
  EXPECT_TRUE(at::allclose(at::_softmax(t, -1, false), at::cpu::_softmax(t, -1, false)));
}

TEST_F(SoftmaxOverrideTest, GivenAKeysetWithAKeyAboveCpuWhenCalledForTheCpuKeyThenThePlanOrTheOriginalRuns) {
  // As torch.compile's Python dispatcher calls it: the trampoline's keyset's highest key is not CPU.
  at::Tensor other = at::randn({6, 33});
  torch::jit::Stack out = callCpuKernelUnderAHigherKey("aten::_softmax", "", {other, int64_t{-1}, false});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(at::allclose(out[0].toTensor(), at::cpu::_softmax(other, -1, false)));
  out = callCpuKernelUnderAHigherKey("aten::_softmax", "", {at::randn({6, 32}), int64_t{-1}, false});
  EXPECT_TRUE(isPattern(out[0].toTensor()));
}

TEST_F(SoftmaxOverrideTest, GivenMisalignedDataWhenCalledThenGuardRefusesAndOriginalRuns) {
  at::Tensor flat = at::randn({6 * 32 + 1});
  at::Tensor x = flat.narrow(0, 1, 6 * 32).view({6, 32});  // 4 bytes off a 16-byte boundary
  ASSERT_TRUE(x.is_contiguous());
  ASSERT_NE(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16, 0u);
  EXPECT_TRUE(at::allclose(at::_softmax(x, -1, false), at::cpu::_softmax(x, -1, false)));
}

TEST_F(SoftmaxOverrideTest, GivenLauncherFailureWhenCalledThenOriginalResult) {
  launcher_->fail = true;
  at::Tensor x = at::randn({6, 32});
  EXPECT_TRUE(at::allclose(at::_softmax(x, -1, false), at::cpu::_softmax(x, -1, false)));
}

TEST_F(SoftmaxOverrideTest, GivenDisabledWhenCalledThenOriginalUntilReenabled) {
  at::Tensor x = at::randn({6, 32});
  setServedOpsEnabled(false);
  EXPECT_TRUE(at::allclose(at::_softmax(x, -1, false), at::cpu::_softmax(x, -1, false)));
  setServedOpsEnabled(true);
  EXPECT_TRUE(isPattern(at::_softmax(x, -1, false)));
}

TEST_F(SoftmaxOverrideTest, GivenInvalidDimWhenCalledThenOriginalErrorReachesCaller) {
  at::Tensor x = at::randn({6, 32});
  EXPECT_THROW(at::_softmax(x, 5, false), c10::Error);
}

TEST_F(SoftmaxOverrideTest, GivenLogSoftmaxInstalledWhenCalledThenOnlyItsOwnPlansServeIt) {
  using Op = SoftmaxOverride::Op;
  SoftmaxOverride::install(c10::DispatchKey::CPU, Op::LogSoftmax);
  EXPECT_TRUE(SoftmaxOverride::state(Op::LogSoftmax).installedFor(c10::DispatchKey::CPU));
  auto logLauncher = std::make_shared<PatternLauncher>();
  const int32_t f32 = static_cast<int32_t>(kernels::DType::Float32);
  plansOf(servedOp("aten::_log_softmax")).publish(Plan{VariantKey{f32, -1, 5, 16}, logLauncher, "pattern 5x16"});
  // Its own plan serves log_softmax (also through the composite op)...
  const uint64_t hits = hitsOf(servedOp("aten::_log_softmax"));
  at::Tensor x = at::randn({5, 16});
  EXPECT_TRUE(isPattern(at::_log_softmax(x, -1, false)));
  EXPECT_TRUE(isPattern(at::log_softmax(x, -1)));
  EXPECT_EQ(hitsOf(servedOp("aten::_log_softmax")), hits + 2);
  EXPECT_EQ(logLauncher->calls.load(), 2);
  // ... but not softmax of the same shape, and softmax's plan (6x32) does not serve log_softmax.
  EXPECT_TRUE(at::allclose(at::_softmax(x, -1, false), at::cpu::_softmax(x, -1, false)));
  at::Tensor y = at::randn({6, 32});
  const uint64_t misses = missesOf(servedOp("aten::_log_softmax"));
  EXPECT_TRUE(at::allclose(at::_log_softmax(y, -1, false), at::cpu::_log_softmax(y, -1, false)));
  EXPECT_EQ(missesOf(servedOp("aten::_log_softmax")), misses + 1);
  EXPECT_TRUE(isPattern(at::_softmax(y, -1, false)));
  // Disabling covers both ops.
  setServedOpsEnabled(false);
  EXPECT_TRUE(at::allclose(at::_log_softmax(x, -1, false), at::cpu::_log_softmax(x, -1, false)));
  setServedOpsEnabled(true);
}

// Plays hk_softmax_dim's ABI (in, out, outer, dim, inner) through launchArgs:
// a float32 softmax over the middle extent computed on the host, so that the
// trampoline's arguments are checked by the result; records them. Its row
// ABI (launch) fails: a middle-dim plan never gets a row launch.
class MiddleDimLauncher : public KernelLauncher {
 public:
  bool launch(const RowKernelArgs&, void*) const noexcept override {
    ++rowLaunches;
    return false;
  }
  bool launchArgs(const KernelArgs& a, void* stream) const noexcept override {
    ++calls;
    if (stream != nullptr || a.size() != 5) return false;
    const float* in = static_cast<const float*>(a.pointerAt(0));
    float* out = static_cast<float*>(const_cast<void*>(a.pointerAt(1)));
    outer = a.int64At(2);
    dim = a.int64At(3);
    inner = a.int64At(4);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * dim * inner + i;
        float m = -INFINITY, sum = 0;
        for (int64_t r = 0; r < dim; ++r) m = std::max(m, in[base + r * inner]);
        for (int64_t r = 0; r < dim; ++r) sum += std::exp(in[base + r * inner] - m);
        for (int64_t r = 0; r < dim; ++r) out[base + r * inner] = std::exp(in[base + r * inner] - m) / sum;
      }
    }
    return true;
  }
  size_t alignment() const override { return 4; }
  std::string describe() const override { return "middle-dim softmax on the host"; }
  mutable std::atomic<int> calls{0}, rowLaunches{0};
  mutable int64_t outer = 0, dim = 0, inner = 0;
};

TEST_F(SoftmaxOverrideTest, GivenAMiddleDimPlanWhenSoftmaxOverThatDimThenItRunsWithOuterDimAndInner) {
  auto middle = std::make_shared<MiddleDimLauncher>();
  const int32_t f32 = static_cast<int32_t>(kernels::DType::Float32);
  VariantKey key{f32, -1, 2, 5};
  key.inner = 12;
  plansOf(servedOp("aten::_softmax")).publish(Plan{key, middle, "middle 2x5x12"});
  const uint64_t hits = hitsOf(servedOp("aten::_softmax"));
  // dim 1 of [2, 5, 3, 4] and of [2, 5, 12], dim -3 too: [outer 2, dim 5, inner 12].
  at::Tensor x = at::randn({2, 5, 3, 4});
  for (const auto& [t, dim] : std::vector<std::pair<at::Tensor, int64_t>>{{x, 1}, {x, -3}, {x.view({2, 5, 12}), 1}}) {
    at::Tensor y = at::_softmax(t, dim, false);
    EXPECT_TRUE(at::allclose(y, at::cpu::_softmax(t, dim, false), 1e-5, 1e-6));
    EXPECT_EQ(middle->outer, 2);
    EXPECT_EQ(middle->dim, 5);
    EXPECT_EQ(middle->inner, 12);
  }
  EXPECT_EQ(middle->calls.load(), 3);
  EXPECT_EQ(middle->rowLaunches.load(), 0);
  EXPECT_EQ(hitsOf(servedOp("aten::_softmax")), hits + 3);
  // Another dim of the same tensor, a transposed view of the same sizes, or log_softmax: not this plan.
  const at::Tensor other = x.view({2, 5, 12}).transpose(1, 2).contiguous().transpose(1, 2);
  ASSERT_FALSE(other.is_contiguous());
  EXPECT_TRUE(at::allclose(at::_softmax(other, 1, false), at::cpu::_softmax(other, 1, false)));
  EXPECT_TRUE(at::allclose(at::_softmax(x, 2, false), at::cpu::_softmax(x, 2, false)));
  EXPECT_EQ(middle->calls.load(), 3);
}

TEST_F(SoftmaxOverrideTest, GivenTrailingSizesOfOneWhenSoftmaxOverTheDimBeforeThemThenTheLastDimPlanServes) {
  at::Tensor x = at::randn({6, 32, 1, 1});
  EXPECT_TRUE(isPattern(at::_softmax(x, 1, false)));  // the [6, 32] plan: rows 6, cols 32
  EXPECT_TRUE(isPattern(at::_softmax(x.view({2, 3, 32}), 2, false)));
}

TEST(SoftmaxVariantTest, GivenAnyDimOfAContiguousTensorWhenKeyedThenOuterDimAndInnerExceptForTheLastDim) {
  const at::Tensor x = at::randn({4, 6, 10});
  const auto last = softmaxVariantOf(x, 2, false);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->rows, 24);
  EXPECT_EQ(last->cols, 10);
  EXPECT_EQ(last->inner, 0);
  const auto middle = softmaxVariantOf(x, 1, false);
  ASSERT_TRUE(middle.has_value());
  EXPECT_EQ(middle->rows, 4);
  EXPECT_EQ(middle->cols, 6);
  EXPECT_EQ(middle->inner, 10);
  const auto first = softmaxVariantOf(x.to(at::kHalf), -3, false);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rows, 1);
  EXPECT_EQ(first->cols, 4);
  EXPECT_EQ(first->inner, 60);
  EXPECT_EQ(first->dtype, static_cast<int32_t>(kernels::DType::Float16));
  // Refused: non-contiguous, half_to_float, a dim out of range, another dtype, empty.
  EXPECT_FALSE(softmaxVariantOf(x.transpose(0, 1), 1, false).has_value());
  EXPECT_FALSE(softmaxVariantOf(x.to(at::kHalf), 1, true).has_value());
  EXPECT_FALSE(softmaxVariantOf(x, 3, false).has_value());
  EXPECT_FALSE(softmaxVariantOf(x.to(at::kDouble), 1, false).has_value());
  EXPECT_FALSE(softmaxVariantOf(at::randn({4, 0, 10}), 1, false).has_value());
}

TEST(SoftmaxVariantTest, GivenTensorsWhenKeyedThenRowsColsDtypeDevice) {
  auto k = softmaxVariantOf(at::randn({2, 3, 10}).to(at::kBFloat16), -1, false);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->rows, 6);
  EXPECT_EQ(k->cols, 10);
  EXPECT_EQ(k->device, -1);
  EXPECT_EQ(k->dtype, static_cast<int32_t>(kernels::DType::BFloat16));
  EXPECT_FALSE(softmaxVariantOf(at::randn({2, 3}), -1, true).has_value());
  EXPECT_FALSE(softmaxVariantOf(at::randn({0, 3}), -1, false).has_value());
  EXPECT_FALSE(softmaxVariantOf(at::randn({2, 3}).to(at::kDouble), -1, false).has_value());
}

}  // namespace
}  // namespace hotkernel
