// The scaled_dot_product_attention trampolines (interpose/serving/SdpaOverride.h):
// a call's key from its tensors, a published choice running its backend
// (seen through the RecordFunction of the op it calls), autograd calls,
// refused calls, a backend that throws, and the process's backend switches
// on the original composite. Exercised on the CPU and AutogradCPU keys with
// the CPU backends (math, flash_cpu); the CUDA keys run the same trampolines
// (tests/gpu/SdpaGpuTest.cpp).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/record_function.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "SdpaOverride.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/SdpaFamily.h"
#include "hotkernel/runtime/AttentionBackend.h"
#include "hotkernel/runtime/AttentionDefaults.h"

namespace hotkernel {
namespace {

using kernels::SdpaVariant;

constexpr const char* kOp = "aten::scaled_dot_product_attention";
constexpr const char* kMathOp = "aten::_scaled_dot_product_attention_math";
constexpr const char* kFlashCpuOp = "aten::_scaled_dot_product_flash_attention_for_cpu";

// The ops this thread calls while it lives (RecordFunction, function scope), and the key the trampoline's
// recorder hook computes for each sampled attention call.
class OpsCalled {
 public:
  OpsCalled() {
    current_ = this;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          current_->names.emplace_back(fn.name());
          if (std::string(fn.name()) == kOp) current_->recorded.push_back(SdpaOverride::recordedKey(fn));
          return nullptr;
        }).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  }
  ~OpsCalled() {
    at::removeCallback(handle_);
    current_ = nullptr;
  }
  bool called(const char* name) const { return std::find(names.begin(), names.end(), name) != names.end(); }
  std::vector<std::string> names;
  std::vector<std::optional<VariantKey>> recorded;

 private:
  static inline OpsCalled* current_ = nullptr;
  at::CallbackHandle handle_ = 0;
};

// [b, h, n, d] in layout class 1 (HF's head view) or 0.
at::Tensor input(int64_t b, int64_t h, int64_t n, int64_t d, int32_t layout = 1) {
  return layout == 1 ? at::randn({b, n, h, d}).transpose(1, 2) : at::randn({b, h, n, d});
}

const SdpaVariant kMathVariant{kernels::DType::Float32, 2, 4, 4, 8, 8, 16, 16, {1, 1, 1}, false};
const SdpaVariant kFlashVariant{kernels::DType::Float32, 1, 4, 4, 6, 10, 16, 16, {0, 0, 0}, true};
const SdpaVariant kGqaVariant{kernels::DType::Float32, 1, 4, 2, 8, 8, 16, 16, {1, 1, 1}, false};

VariantKey keyOf(const SdpaVariant& v) { return kernels::sdpaKeyOf(v, -1); }

at::Tensor sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal = false,
                const std::optional<at::Tensor>& mask = std::nullopt, double dropout = 0.0, bool gqa = false) {
  return at::scaled_dot_product_attention(q, k, v, mask, dropout, causal, std::nullopt, gqa);
}

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::equal(a.contiguous().view(at::kInt), b.contiguous().view(at::kInt));
}

class SdpaOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SdpaOverride::install(c10::DispatchKey::CPU);
    PlanSlot& plans = plansOf(servedOp(kOp));
    plans.publish(kernels::sdpaDescriptor().makePlan(
        keyOf(kMathVariant), kernels::SdpaParams{AttentionBackend::Math}.toJson(), "", -1));
    plans.publish(kernels::sdpaDescriptor().makePlan(
        keyOf(kFlashVariant), kernels::SdpaParams{AttentionBackend::FlashCpu}.toJson(), "", -1));
    // A CUDA backend for CPU tensors (makePlan refuses it): the backend throws when called.
    plans.publish(Plan{keyOf(kGqaVariant), std::make_shared<kernels::SdpaChoice>(AttentionBackend::Flash), "throws"});
  }
  void SetUp() override { setServedOpsEnabled(true); }
  static uint64_t hits() { return hitsOf(servedOp(kOp)); }
  static uint64_t misses() { return missesOf(servedOp(kOp)); }
};

TEST_F(SdpaOverrideTest, GivenInstalledWhenInstallingAgainThenIdempotentAndBothKeysRegistered) {
  EXPECT_NO_THROW(SdpaOverride::install(c10::DispatchKey::CPU));
  EXPECT_TRUE(SdpaOverride::state().installedFor(c10::DispatchKey::CPU));
  EXPECT_TRUE(SdpaOverride::state().installedFor(c10::DispatchKey::AutogradCPU));
}

TEST_F(SdpaOverrideTest, GivenAMathChoiceUnderInferenceModeWhenCalledThenMathRunsInsteadOfPyTorchsPick) {
  const at::Tensor q = input(2, 4, 8, 16), k = input(2, 4, 8, 16), v = input(2, 4, 8, 16);
  c10::InferenceMode inference;
  const uint64_t before = hits();
  OpsCalled ops;
  const at::Tensor out = sdpa(q, k, v);
  EXPECT_EQ(hits(), before + 1);
  EXPECT_TRUE(ops.called(kMathOp));
  EXPECT_FALSE(ops.called(kFlashCpuOp)) << "PyTorch's own pick on the CPU";
  EXPECT_TRUE(sameBits(out, std::get<0>(at::_scaled_dot_product_attention_math(q, k, v))));
  ASSERT_EQ(ops.recorded.size(), 1u);
  ASSERT_TRUE(ops.recorded[0].has_value());
  EXPECT_EQ(*ops.recorded[0], keyOf(kMathVariant));
}

TEST_F(SdpaOverrideTest, GivenAFlashCpuChoiceForACausalVariantWhenCalledThenThatBackendRunsWithIsCausal) {
  const at::Tensor q = input(1, 4, 6, 16, 0), k = input(1, 4, 10, 16, 0), v = input(1, 4, 10, 16, 0);
  c10::InferenceMode inference;
  const uint64_t before = hits();
  OpsCalled ops;
  const at::Tensor out = sdpa(q, k, v, /*causal=*/true);
  EXPECT_EQ(hits(), before + 1);
  EXPECT_TRUE(ops.called(kFlashCpuOp));
  EXPECT_TRUE(sameBits(out, std::get<0>(at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, true))));
  // The causal mask reached it: not the unmasked result.
  EXPECT_FALSE(at::allclose(out, std::get<0>(at::_scaled_dot_product_flash_attention_for_cpu(q, k, v))));
}

TEST_F(SdpaOverrideTest, GivenAnExplicitScaleWhenServedThenTheBackendGetsIt) {
  const at::Tensor q = input(2, 4, 8, 16), k = input(2, 4, 8, 16), v = input(2, 4, 8, 16);
  c10::InferenceMode inference;
  const uint64_t before = hits();
  const at::Tensor out = at::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, false, 0.5);
  EXPECT_EQ(hits(), before + 1);
  EXPECT_TRUE(sameBits(out, std::get<0>(at::_scaled_dot_product_attention_math(q, k, v, std::nullopt, 0.0, false,
                                                                               std::nullopt, 0.5))));
}

TEST_F(SdpaOverrideTest, GivenNoGradRequiredOutsideInferenceModeWhenCalledThenAutogradKeyRedispatchesToTheChoice) {
  const at::Tensor q = input(2, 4, 8, 16), k = input(2, 4, 8, 16), v = input(2, 4, 8, 16);
  const uint64_t before = hits();
  OpsCalled ops;
  const at::Tensor out = sdpa(q, k, v);
  EXPECT_EQ(hits(), before + 1);
  EXPECT_TRUE(ops.called(kMathOp));
  EXPECT_FALSE(out.requires_grad());
}

TEST_F(SdpaOverrideTest, GivenAQueryRequiringGradWhenCalledThenTheCompositeRunsAndTheGradientFlows) {
  const at::Tensor q = input(2, 4, 8, 16).requires_grad_(true), k = input(2, 4, 8, 16), v = input(2, 4, 8, 16);
  const uint64_t before = hits();
  const at::Tensor out = sdpa(q, k, v);
  EXPECT_EQ(hits(), before);
  ASSERT_TRUE(out.requires_grad());
  out.sum().backward();
  ASSERT_TRUE(q.grad().defined());
  EXPECT_TRUE(at::isfinite(q.grad()).all().item<bool>());
}

TEST_F(SdpaOverrideTest, GivenCallsTheFamilyRefusesOrWithoutAChoiceWhenCalledThenTheOriginalCompositeRuns) {
  const at::Tensor q = input(2, 4, 8, 16), k = input(2, 4, 8, 16), v = input(2, 4, 8, 16);
  c10::InferenceMode inference;
  const uint64_t before = hits(), missed = misses();
  const at::Tensor mask = at::randn({8, 8});
  EXPECT_TRUE(sameBits(sdpa(q, k, v, false, mask), SdpaOverride::callOriginal(q, k, v, mask, 0.0, false,
                                                                              std::nullopt, false)));
  (void)sdpa(q, k, v, false, std::nullopt, /*dropout=*/0.5);
  // Causal: another variant, without a choice.
  EXPECT_TRUE(sameBits(sdpa(q, k, v, true), SdpaOverride::callOriginal(q, k, v, std::nullopt, 0.0, true,
                                                                       std::nullopt, false)));
  // A query of strides no layout class has: [b, h, n, d] from a [b, d, h, n] storage.
  const at::Tensor odd = at::randn({2, 16, 4, 8}).permute({0, 2, 3, 1});
  EXPECT_TRUE(sameBits(sdpa(odd, k, v), SdpaOverride::callOriginal(odd, k, v, std::nullopt, 0.0, false,
                                                                   std::nullopt, false)));
  EXPECT_EQ(hits(), before);
  EXPECT_EQ(misses(), missed + 4);
}

TEST_F(SdpaOverrideTest, GivenAChosenBackendThatThrowsWhenCalledThenTheOriginalRunsAndTheCallSucceeds) {
  const at::Tensor q = input(1, 4, 8, 16), k = input(1, 2, 8, 16), v = input(1, 2, 8, 16);
  c10::InferenceMode inference;
  const uint64_t before = hits(), missed = misses();
  at::Tensor out;
  ASSERT_NO_THROW(out = sdpa(q, k, v, false, std::nullopt, 0.0, /*gqa=*/true));
  EXPECT_EQ(hits(), before);
  EXPECT_EQ(misses(), missed + 1);
  EXPECT_TRUE(sameBits(out, SdpaOverride::callOriginal(q, k, v, std::nullopt, 0.0, false, std::nullopt, true)));
}

TEST_F(SdpaOverrideTest, GivenTheChosenBackendSwitchedOffWhenCalledThenPyTorchsOwnChoiceRuns) {
  const at::Tensor q = input(2, 4, 8, 16), k = input(2, 4, 8, 16), v = input(2, 4, 8, 16);
  c10::InferenceMode inference;
  const uint64_t before = hits();
  at::globalContext().setSDPUseMath(false);
  OpsCalled ops;
  const at::Tensor out = sdpa(q, k, v);
  at::globalContext().setSDPUseMath(true);
  EXPECT_EQ(hits(), before);
  EXPECT_FALSE(ops.called(kMathOp));
  EXPECT_TRUE(ops.called(kFlashCpuOp));
  EXPECT_EQ(sdpa(q, k, v).sizes(), out.sizes());
  EXPECT_EQ(hits(), before + 1) << "switched back on: served again";
}

TEST_F(SdpaOverrideTest, GivenThePriorityOrderChangedWhenCalledThenPyTorchsOwnChoiceRuns) {
  const at::Tensor q = input(2, 4, 8, 16), k = input(2, 4, 8, 16), v = input(2, 4, 8, 16);
  c10::InferenceMode inference;
  const auto order = at::globalContext().sDPPriorityOrder();
  std::vector<int64_t> reversed;
  for (auto it = order.rbegin(); it != order.rend(); ++it) reversed.push_back(static_cast<int64_t>(*it));
  std::vector<int64_t> original;
  for (auto b : order) original.push_back(static_cast<int64_t>(b));
  const uint64_t before = hits();
  at::globalContext().setSDPPriorityOrder(reversed);
  (void)sdpa(q, k, v);
  at::globalContext().setSDPPriorityOrder(original);
  EXPECT_EQ(hits(), before);
  (void)sdpa(q, k, v);
  EXPECT_EQ(hits(), before + 1);
}

// Note [PyTorch's settled priority order]: the trampoline settles the baseline on PyTorch's selection for its first
// call, served or not (ctest runs each test in a process of its own: here the first attention call of the process).
TEST_F(SdpaOverrideTest, GivenAnAttentionCallWhenItReachesTheTrampolineThenThePriorityBaselineIsSettled) {
  const at::Tensor q = input(1, 4, 8, 16), k = input(1, 4, 8, 16), v = input(1, 4, 8, 16);
  c10::InferenceMode inference;
  (void)sdpa(q, k, v, /*causal=*/true);  // no plan: PyTorch's own choice runs
  EXPECT_TRUE(AttentionDefaults::process().settled());
  EXPECT_TRUE(AttentionDefaults::process().allows(AttentionBackend::Math));
}

TEST_F(SdpaOverrideTest, GivenServingSwitchedOffWhenCalledThenTheOriginalRuns) {
  const at::Tensor q = input(2, 4, 8, 16), k = input(2, 4, 8, 16), v = input(2, 4, 8, 16);
  c10::InferenceMode inference;
  const uint64_t before = hits();
  setServedOpsEnabled(false);
  OpsCalled ops;
  (void)sdpa(q, k, v);
  setServedOpsEnabled(true);
  EXPECT_EQ(hits(), before);
  EXPECT_FALSE(ops.called(kMathOp));
}

TEST_F(SdpaOverrideTest, GivenTensorsWhenKeyedThenTheKeyIsTheFamilysAndRefusalsHaveNone) {
  const at::Tensor q = input(1, 4, 8, 16), k = input(1, 2, 8, 16), v = input(1, 2, 8, 16);
  EXPECT_EQ(sdpaKeyOf(q, k, v, std::nullopt, 0.0, false, true), keyOf(kGqaVariant));
  EXPECT_FALSE(sdpaKeyOf(q, k, v, std::nullopt, 0.0, false, false).has_value()) << "grouped heads need enable_gqa";
  EXPECT_FALSE(sdpaKeyOf(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), std::nullopt, 0.0, false, true));
  EXPECT_FALSE(sdpaKeyOf(q, k.to(at::kHalf), v, std::nullopt, 0.0, false, true));
  EXPECT_FALSE(sdpaKeyOf(q.select(0, 0), k.select(0, 0), v.select(0, 0), std::nullopt, 0.0, false, true));
}

}  // namespace
}  // namespace hotkernel
