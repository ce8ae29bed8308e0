// The aten::mm and aten::addmm trampolines of the padded-GEMM families
// (interpose/serving/MmPadOverride, AddmmPadOverride): a planned call runs the
// padded GEMM (runPaddedMm: the pads, the original mm or addmm, the copy),
// everything else the original kernel. Exercised on the CPU
// dispatch key with a launcher that plays hk_pad_rows on the host (the CUDA key
// runs the same trampoline; tests/gpu/MmPadGpuTest.cpp runs the real kernel).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "AddmmPadOverride.h"
#include "MmPadOverride.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/MmPadTuner.h"

namespace hotkernel {
namespace {

// Plays hk_pad_rows(src, dst, dstRows, dstCols, srcRows, srcCols, srcLd) on 16-bit host memory.
class HostPadLauncher : public KernelLauncher {
 public:
  bool launch(const RowKernelArgs&, void*) const noexcept override { return false; }
  bool launchArgs(const KernelArgs& a, void* stream) const noexcept override {
    ++calls;
    if (failAt.load() == calls.load() || stream != nullptr || a.size() != 7u) return false;
    const auto* src = static_cast<const uint16_t*>(a.pointerAt(0));
    auto* dst = static_cast<uint16_t*>(const_cast<void*>(a.pointerAt(1)));
    const int64_t dstRows = a.int64At(2), dstCols = a.int64At(3), srcRows = a.int64At(4), srcCols = a.int64At(5),
                  srcLd = a.int64At(6);
    shapes.push_back({dstRows, dstCols, srcRows, srcCols, srcLd});
    for (int64_t r = 0; r < dstRows; ++r) {
      for (int64_t c = 0; c < dstCols; ++c) dst[r * dstCols + c] = r < srcRows && c < srcCols ? src[r * srcLd + c] : 0;
    }
    return true;
  }
  size_t alignment() const override { return 16; }
  std::string describe() const override { return "host pad_rows"; }
  mutable std::atomic<int> calls{0};
  std::atomic<int> failAt{0};  // the call (1-based) that fails; 0: none
  mutable std::vector<std::vector<int64_t>> shapes;
};

const ServedOp& mmOp() { return servedOp("aten::mm"); }

class MmPadOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    MmPadOverride::install(c10::DispatchKey::CPU);
    launcher_ = std::make_shared<HostPadLauncher>();
    const VariantKey key = kernels::mmPadKeyOf({kernels::DType::BFloat16, 6, 13, 16}, -1);
    plansOf(mmOp()).publish(Plan{key, launcher_, "host pad_rows 6x13x16"});
  }
  void SetUp() override {
    launcher_->failAt = 0;
    launcher_->calls = 0;
    launcher_->shapes.clear();
    setServedOpsEnabled(true);
  }
  static at::Tensor original(const at::Tensor& a, const at::Tensor& b) {
    setServedOpsEnabled(false);
    at::Tensor r = at::mm(a, b);
    setServedOpsEnabled(true);
    return r;
  }
  static std::shared_ptr<HostPadLauncher> launcher_;
};
std::shared_ptr<HostPadLauncher> MmPadOverrideTest::launcher_;

at::Tensor bf16(std::vector<int64_t> sizes) { return at::randn(sizes).to(at::kBFloat16); }

TEST_F(MmPadOverrideTest, GivenInstalledTwiceWhenInstallingThenIdempotent) {
  EXPECT_NO_THROW(MmPadOverride::install(c10::DispatchKey::CPU));
  EXPECT_TRUE(MmPadOverride::state().installedFor(c10::DispatchKey::CPU));
}

TEST_F(MmPadOverrideTest, GivenAPlannedLinearLayoutWhenCalledThenPaddedPlanGivesEagersShapeAndValues) {
  const at::Tensor self = bf16({6, 16}), w = bf16({13, 16});
  const uint64_t hits = hitsOf(mmOp());
  const at::Tensor out = at::mm(self, w.t());
  EXPECT_EQ(hitsOf(mmOp()), hits + 1);
  const at::Tensor eager = original(self, w.t());
  EXPECT_EQ(out.sizes(), eager.sizes());
  EXPECT_EQ(out.strides(), eager.strides());
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::allclose(out.to(at::kFloat), eager.to(at::kFloat), 1e-2, 1e-2));
  // The weight padded to [16, 16] (zero rows 13..15), then the [6, 16] product copied into [6, 13].
  ASSERT_EQ(launcher_->shapes.size(), 2u);
  EXPECT_EQ(launcher_->shapes[0], (std::vector<int64_t>{16, 16, 13, 16, 16}));
  EXPECT_EQ(launcher_->shapes[1], (std::vector<int64_t>{6, 13, 6, 13, 16}));
}

// Random shapes of both dtypes, each with its own plan: every result has eager's layout and is within the bound of
// Note [Padded GEMM checks] (the CPU GEMM on the padded weight sums in its own order too).
TEST_F(MmPadOverrideTest, GivenRandomShapesWhenPlannedThenEveryResultIsWithinTheBoundOfEager) {
  at::manual_seed(17);
  for (int i = 0; i < 40; ++i) {
    // m >= 7: the other tests call m = 6 shapes expecting the one plan published for them.
    const int64_t m = 7 + at::randint(34, {1}).item<int64_t>(), k = 8 * (1 + at::randint(8, {1}).item<int64_t>());
    int64_t n = 1 + at::randint(60, {1}).item<int64_t>();
    if (n % 8 == 0) ++n;
    const bool half = i % 2 == 0;
    const at::ScalarType dt = half ? at::kHalf : at::kBFloat16;
    const kernels::DType d = half ? kernels::DType::Float16 : kernels::DType::BFloat16;
    plansOf(mmOp()).publish(Plan{kernels::mmPadKeyOf({d, m, n, k}, -1), launcher_, "host pad_rows"});
    const at::Tensor self = at::randn({m, k}).to(dt), w = at::randn({n, k}).div_(std::sqrt(double(k))).to(dt);
    const uint64_t hits = hitsOf(mmOp());
    const at::Tensor out = at::mm(self, w.t());
    ASSERT_EQ(hitsOf(mmOp()), hits + 1) << m << "x" << n << "x" << k;
    const at::Tensor eager = original(self, w.t());
    EXPECT_EQ(out.strides(), eager.strides());
    EXPECT_EQ(mmValuesWithinBound(self, w, at::Tensor(), out, eager, d), "") << m << "x" << n << "x" << k;
  }
}

TEST_F(MmPadOverrideTest, GivenOtherLayoutsShapesOrDtypesWhenCalledThenTheOriginalRunsAndNoLaunch) {
  const at::Tensor self = bf16({6, 16});
  for (const auto& [a, b] : std::vector<std::pair<at::Tensor, at::Tensor>>{
           {self, bf16({16, 13})},                              // mat2 row-major, not a transposed weight
           {self, bf16({14, 16}).t()},                          // another N: no plan
           {self, bf16({16, 16}).t()},                          // an aligned N: not served at all
           {bf16({16, 6}).t(), bf16({13, 16}).t()},             // self transposed
           {self.to(at::kFloat), at::randn({13, 16}).t()},      // float32
           {bf16({6, 32}).narrow(1, 0, 16), bf16({13, 16}).t()}}) {  // self's rows strided
    const uint64_t misses = missesOf(mmOp());
    const at::Tensor out = at::mm(a, b);
    EXPECT_EQ(missesOf(mmOp()), misses + 1);
    EXPECT_TRUE(at::equal(out, original(a, b)));
  }
  EXPECT_EQ(launcher_->calls.load(), 0);
}

TEST_F(MmPadOverrideTest, GivenALaunchThatFailsWhenCalledThenTheOriginalResult) {
  const at::Tensor self = bf16({6, 16}), w = bf16({13, 16});
  for (int failAt : {1, 2}) {  // the pad, then the copy
    launcher_->calls = 0;
    launcher_->failAt = failAt;
    const uint64_t misses = missesOf(mmOp());
    const at::Tensor out = at::mm(self, w.t());
    EXPECT_EQ(missesOf(mmOp()), misses + 1) << failAt;
    EXPECT_TRUE(at::equal(out, original(self, w.t()))) << failAt;
  }
}

TEST_F(MmPadOverrideTest, GivenServingDisabledWhenCalledThenTheOriginalRuns) {
  const at::Tensor self = bf16({6, 16}), w = bf16({13, 16});
  setServedOpsEnabled(false);
  const at::Tensor out = at::mm(self, w.t());
  setServedOpsEnabled(true);
  EXPECT_EQ(launcher_->calls.load(), 0);
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{6, 13}));
}

TEST(MmPadKeyTest, GivenCallsWhenKeyedThenOnlyTheLinearLayoutOfAMisalignedSixteenBitGemm) {
  const at::Tensor self = bf16({6, 16}), w = bf16({13, 16});
  const std::optional<VariantKey> key = MmPadOverride::keyOf(self, w.t());
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->rows, 6);
  EXPECT_EQ(key->cols, 13);
  EXPECT_EQ(key->inner, 16);
  EXPECT_EQ(key->device, -1);
  EXPECT_EQ(key->dtype, static_cast<int32_t>(kernels::DType::BFloat16));
  EXPECT_TRUE(MmPadOverride::keyOf(self.to(at::kHalf), w.t().to(at::kHalf)).has_value());
  EXPECT_FALSE(MmPadOverride::keyOf(self, w.t().to(at::kHalf)).has_value());            // mixed dtypes
  EXPECT_FALSE(MmPadOverride::keyOf(self, bf16({16, 13})).has_value());                 // row-major mat2
  EXPECT_FALSE(MmPadOverride::keyOf(self, bf16({13, 17}).narrow(1, 0, 16).t()).has_value());  // padded weight rows
  EXPECT_FALSE(MmPadOverride::keyOf(bf16({6, 12}), bf16({13, 12}).t()).has_value());   // K % 8 != 0
  EXPECT_FALSE(MmPadOverride::keyOf(self, bf16({16, 16}).t()).has_value());             // N aligned
  EXPECT_FALSE(MmPadOverride::keyOf(self.unsqueeze(0), w.t()).has_value());             // not 2-d
  EXPECT_FALSE(MmPadOverride::keyOf(self, bf16({13, 8}).t()).has_value());              // K mismatch
}

const ServedOp& addmmOp() { return servedOp("aten::addmm"); }

class AddmmPadOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    AddmmPadOverride::install(c10::DispatchKey::CPU);
    launcher_ = std::make_shared<HostPadLauncher>();
    const VariantKey key = kernels::mmPadKeyOf({kernels::DType::BFloat16, 6, 13, 16, /*bias=*/true}, -1);
    plansOf(addmmOp()).publish(Plan{key, launcher_, "host pad_rows 6x13x16 bias"});
  }
  void SetUp() override {
    launcher_->failAt = 0;
    launcher_->calls = 0;
    launcher_->shapes.clear();
    setServedOpsEnabled(true);
  }
  static at::Tensor original(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, double beta,
                             double alpha) {
    setServedOpsEnabled(false);
    at::Tensor r = at::addmm(bias, a, b, beta, alpha);
    setServedOpsEnabled(true);
    return r;
  }
  static std::shared_ptr<HostPadLauncher> launcher_;
};
std::shared_ptr<HostPadLauncher> AddmmPadOverrideTest::launcher_;

TEST_F(AddmmPadOverrideTest, GivenAPlannedLinearWithBiasWhenCalledThenThePaddedPlanAddsTheBiasWithBetaAndAlpha) {
  const at::Tensor self = bf16({6, 16}), w = bf16({13, 16}), bias = bf16({13});
  for (const auto& [beta, alpha] : {std::pair{1.0, 1.0}, std::pair{0.5, 2.0}}) {
    launcher_->shapes.clear();
    const uint64_t hits = hitsOf(addmmOp());
    const at::Tensor out = at::addmm(bias, self, w.t(), beta, alpha);
    EXPECT_EQ(hitsOf(addmmOp()), hits + 1);
    const at::Tensor eager = original(bias, self, w.t(), beta, alpha);
    EXPECT_EQ(out.sizes(), eager.sizes());
    EXPECT_EQ(out.strides(), eager.strides());
    EXPECT_TRUE(at::allclose(out.to(at::kFloat), eager.to(at::kFloat), 2e-2, 2e-2)) << beta << " " << alpha;
    // The weight to [16, 16], the bias to [1, 16] (zeros after 13), then the product into [6, 13].
    ASSERT_EQ(launcher_->shapes.size(), 3u);
    EXPECT_EQ(launcher_->shapes[0], (std::vector<int64_t>{16, 16, 13, 16, 16}));
    EXPECT_EQ(launcher_->shapes[1], (std::vector<int64_t>{1, 16, 1, 13, 13}));
    EXPECT_EQ(launcher_->shapes[2], (std::vector<int64_t>{6, 13, 6, 13, 16}));
  }
}

TEST_F(AddmmPadOverrideTest, GivenOtherBiasesOrAFailedLaunchWhenCalledThenTheOriginalRuns) {
  const at::Tensor self = bf16({6, 16}), w = bf16({13, 16});
  // A full [M, N] bias, a [1, N] one, a strided one, a broadcast [1]: not the linear layout.
  for (const at::Tensor& bias : {bf16({6, 13}), bf16({1, 13}), bf16({26}).as_strided({13}, {2}), bf16({1})}) {
    const uint64_t misses = missesOf(addmmOp());
    const at::Tensor out = at::addmm(bias, self, w.t());
    EXPECT_EQ(missesOf(addmmOp()), misses + 1) << bias.sizes();
    EXPECT_TRUE(at::equal(out, original(bias, self, w.t(), 1.0, 1.0))) << bias.sizes();
  }
  EXPECT_EQ(launcher_->calls.load(), 0);
  const at::Tensor bias = bf16({13});
  for (int failAt : {1, 2, 3}) {  // the weight's pad, the bias's, the copy
    launcher_->calls = 0;
    launcher_->failAt = failAt;
    const uint64_t misses = missesOf(addmmOp());
    const at::Tensor out = at::addmm(bias, self, w.t());
    EXPECT_EQ(missesOf(addmmOp()), misses + 1) << failAt;
    EXPECT_TRUE(at::equal(out, original(bias, self, w.t(), 1.0, 1.0))) << failAt;
  }
}

TEST(AddmmPadKeyTest, GivenABiasWhenKeyedThenTheMmLayoutWithTheBiasOption) {
  const at::Tensor self = bf16({6, 16}), w = bf16({13, 16});
  const std::optional<VariantKey> key = AddmmPadOverride::keyOf(bf16({13}), self, w.t());
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->options, kernels::variant_options::kBias);
  EXPECT_EQ(key->cols, 13);
  EXPECT_FALSE(AddmmPadOverride::keyOf(bf16({13}), self, bf16({16, 13})).has_value());  // row-major mat2
  EXPECT_FALSE(AddmmPadOverride::keyOf(bf16({14}), self, w.t()).has_value());           // bias of another size
  EXPECT_FALSE(AddmmPadOverride::keyOf(at::Tensor(), self, w.t()).has_value());
}

}  // namespace
}  // namespace hotkernel
