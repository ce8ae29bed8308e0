// The norm ops end to end in one process, as the runtime serves them: a hot
// variant (bf16 [4096, 4096], rms_norm with weight, layer_norm with weight and
// bias) goes through Engine::optimizeVariant (tuner, harness, decision in
// the cache under the family's name, plan published in the op's table by its
// flagged key), and at::rms_norm / at::layer_norm (what F.rms_norm and
// F.layer_norm call: their composites dispatch to aten::_fused_rms_norm and
// aten::native_layer_norm on CUDA) then hit the trampoline and match the
// original ATen kernel within the family's tolerance.
//
// Own binary: the plans it publishes, the trampolines it installs and the
// runtime's cache directory (HOTKERNEL_CACHE_DIR, read once per process) must
// not leak into other GPU tests.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/_fused_rms_norm_cuda_dispatch.h>
#include <ATen/ops/native_batch_norm_cuda_dispatch.h>
#include <ATen/ops/native_group_norm_cuda_dispatch.h>
#include <ATen/ops/native_layer_norm_cuda_dispatch.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>

#include "LayerNormOverride.h"
#include "RmsNormOverride.h"
#include "hotkernel/interpose/Engine.h"
#include "RuntimeGpuTestSupport.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/NormTuner.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"
#include "hotkernel/runtime/StreamWorkspace.h"

namespace hotkernel {
namespace {

using gputest::budgetOf;
using gputest::planOf;

using kernels::DType;
using kernels::LayerNormFamily;
using kernels::NormParams;
using kernels::NormTolerance;
using kernels::RmsNormFamily;

constexpr int64_t kRows = 4096, kCols = 4096;

const std::string& cacheDir() { return gputest::runtimeCacheDir("hk-norm-runtime"); }

// The first parameter point of the family, compiled and passed through the
// five-stage harness, as a plan: what the test publishes when the tuner kept
// ATen (no candidate's speed-up CI cleared the threshold on this GPU), so the
// dispatch path is still checked with a validated kernel.
template <typename Candidate>
Plan validatedFirstPoint(const RowOpSpec& spec, const std::string& source, const char* program,
                         const std::vector<std::string>& options, Candidate makeCandidate,
                         std::function<Plan(const std::string&)> makePlanFromCubin) {
  const std::string cubin = compileToCubin(source, program, queryDevice(0).nvrtcArch(), options).cubin;
  const HarnessReport report = runHarness(spec, makeCandidate(cubin), DType::BFloat16, kRows, kCols, 0);
  EXPECT_TRUE(report.passed) << (report.failure() ? report.failure()->detail : std::string());
  return makePlanFromCubin(cubin);
}

// |got - ref| <= bound, elementwise, NaN nowhere.
// Whatever the speed decision, the tuner's candidates passed the harness: a
// keep_aten because every candidate failed a correctness stage is a bug, not
// noise (as when the sweep ran cubins compiled for the variant's columns on
// other columns).
void expectSomeCandidateCorrect(const nlohmann::json& summary) {
  const nlohmann::json candidates = summary["metrics"].value("candidates", nlohmann::json::array());
  int correct = 0;
  for (const nlohmann::json& c : candidates) correct += c.contains("error") ? 0 : 1;
  EXPECT_GT(correct, 0) << candidates.dump().substr(0, 3000);
}

void expectWithin(const at::Tensor& got, const at::Tensor& ref, const at::Tensor& bound, const char* what) {
  ASSERT_EQ(got.sizes(), ref.sizes()) << what;
  const at::Tensor g = got.to(at::kDouble), r = ref.to(at::kDouble);
  EXPECT_FALSE(g.isnan().any().item<bool>()) << what;
  const at::Tensor excess = (g - r).abs() - bound.to(at::kDouble);
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": max abs error " << (g - r).abs().max().item<double>();
}

TEST(NormRuntimeGpuTest, GivenHotBf16RmsNormWithWeightWhenOptimizedThenRmsNormHitsTheSwappedKernelAndMatchesAten) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  installServedOp(servedOp("aten::_fused_rms_norm"), c10::DispatchKey::CUDA, nullptr);
  VariantKey key{static_cast<int32_t>(DType::BFloat16), 0, kRows, kCols};
  key.options = kernels::variant_options::kWeight;
  const std::string op = "aten::_fused_rms_norm", variant = kernels::variantString(key);
  ASSERT_EQ(variant, "dtype=bfloat16;rows=4096;cols=4096;weight=1");

  const nlohmann::json summary =
      Engine::instance().optimizeVariant(op, key, [] { return true; }, budgetOf(op, key, 40.0));
  std::cout << "rms_norm: " << summary.value("decision", "?") << " speed-up " << summary.value("speedup", 0.0)
            << std::endl;
  ASSERT_TRUE(summary["decision"] == "kernel" || summary["decision"] == "keep_aten") << summary.dump();
  expectSomeCandidateCorrect(summary);
  // The decision is in the cache under the family's name and the flagged variant.
  const std::string fingerprint = Engine::instance().status()["fingerprint"];
  std::unique_ptr<cache::CacheStore> store = cache::CacheStore::open(cacheDir());
  const std::optional<cache::Entry> entry = store->get(fingerprint, op, variant);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->family, "rms_norm");
  EXPECT_EQ(entry->decision, summary["decision"].get<std::string>());

  if (summary["decision"] == "kernel") {
    EXPECT_FALSE(planOf(op, variant).is_null()) << Engine::instance().status()["plans"].dump();
  } else {
    std::cout << "rms_norm: the tuner kept ATen; publishing the harness-validated first point" << std::endl;
    const kernels::RmsNormVariant v{DType::BFloat16, kRows, kCols, true};
    const NormParams p = RmsNormFamily::parameterSpace(v).front();
    plansOf(servedOp("aten::_fused_rms_norm"))
        .publish(validatedFirstPoint(
            rmsNormSpec(true), RmsNormFamily::source(), "rms_norm.cu",
            RmsNormFamily::compileOptions(DType::BFloat16, p, true),
            [&](const std::string& cubin) { return rmsNormCandidate(v, p, cubin, /*colsSpecialized=*/false); },
            [&](const std::string& cubin) { return kernels::rmsNormDescriptor().makePlan(key, p.toJson(), cubin, 0); }));
  }
  ASSERT_NE(plansOf(servedOp("aten::_fused_rms_norm")).load()->find(key), nullptr);

  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA, 0);
  const at::Tensor x = at::randn({kRows, kCols}, opts.dtype(at::kFloat)).mul_(2.0).add_(0.5).to(at::kBFloat16);
  const at::Tensor w = at::rand({kCols}, opts.dtype(at::kFloat)).mul_(2.0).sub_(1.0).to(at::kBFloat16);
  const double eps = 1e-6;
  const uint64_t hits = hitsOf(servedOp("aten::_fused_rms_norm"));
  at::Tensor y;
  {
    at::InferenceMode inference;
    y = at::rms_norm(x, {kCols}, w, eps);
  }
  EXPECT_EQ(hitsOf(servedOp("aten::_fused_rms_norm")), hits + 1);
  auto [ref, refRstd] = at::cuda::_fused_rms_norm(x, {kCols}, w, eps);
  const NormTolerance t = RmsNormFamily::tolerance(DType::BFloat16, kCols);
  expectWithin(y, ref, ref.to(at::kDouble).abs() * t.outRel + t.outAbs, "rms_norm out");

  // The leaf op itself (autograd on, no grad needed): out and rstd in ATen's shape.
  auto [out, rstd] = at::_fused_rms_norm(x.view({kRows, 1, kCols}), {kCols}, w, eps);
  EXPECT_EQ(hitsOf(servedOp("aten::_fused_rms_norm")), hits + 2);
  ASSERT_EQ(rstd.sizes(), (std::vector<int64_t>{kRows, 1, 1}));
  EXPECT_EQ(rstd.scalar_type(), at::kFloat);
  expectWithin(rstd.view({kRows, 1}), refRstd, refRstd.to(at::kDouble).abs() * t.statRel, "rms_norm rstd");

  // Without the weight: another variant, no plan: the original kernel.
  const uint64_t misses = missesOf(servedOp("aten::_fused_rms_norm"));
  (void)at::rms_norm(x, {kCols}, std::nullopt, eps);
  EXPECT_EQ(hitsOf(servedOp("aten::_fused_rms_norm")), hits + 2);
  EXPECT_EQ(missesOf(servedOp("aten::_fused_rms_norm")), misses + 1);
}

TEST(NormRuntimeGpuTest, GivenHotBf16LayerNormWithWeightAndBiasWhenOptimizedThenLayerNormHitsTheSwappedKernel) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  installServedOp(servedOp("aten::native_layer_norm"), c10::DispatchKey::CUDA, nullptr);
  VariantKey key{static_cast<int32_t>(DType::BFloat16), 0, kRows, kCols};
  key.options = kernels::variant_options::kWeight | kernels::variant_options::kBias;
  const std::string op = "aten::native_layer_norm", variant = kernels::variantString(key);
  ASSERT_EQ(variant, "dtype=bfloat16;rows=4096;cols=4096;weight=1;bias=1");

  const nlohmann::json summary =
      Engine::instance().optimizeVariant(op, key, [] { return true; }, budgetOf(op, key, 40.0));
  std::cout << "layer_norm: " << summary.value("decision", "?") << " speed-up " << summary.value("speedup", 0.0)
            << std::endl;
  ASSERT_TRUE(summary["decision"] == "kernel" || summary["decision"] == "keep_aten") << summary.dump();
  expectSomeCandidateCorrect(summary);
  const std::string fingerprint = Engine::instance().status()["fingerprint"];
  std::unique_ptr<cache::CacheStore> store = cache::CacheStore::open(cacheDir());
  const std::optional<cache::Entry> entry = store->get(fingerprint, op, variant);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->family, "layer_norm");

  if (summary["decision"] == "kernel") {
    EXPECT_FALSE(planOf(op, variant).is_null()) << Engine::instance().status()["plans"].dump();
  } else {
    std::cout << "layer_norm: the tuner kept ATen; publishing the harness-validated first point" << std::endl;
    const kernels::LayerNormVariant v{DType::BFloat16, kRows, kCols, true, true};
    const NormParams p = LayerNormFamily::parameterSpace(v).front();
    plansOf(servedOp("aten::native_layer_norm"))
        .publish(validatedFirstPoint(
            layerNormSpec(true, true), LayerNormFamily::source(), "layer_norm.cu",
            LayerNormFamily::compileOptions(DType::BFloat16, p, true, true),
            [&](const std::string& cubin) { return layerNormCandidate(v, p, cubin, /*colsSpecialized=*/false); },
            [&](const std::string& cubin) { return kernels::layerNormDescriptor().makePlan(key, p.toJson(), cubin, 0); }));
  }
  ASSERT_NE(plansOf(servedOp("aten::native_layer_norm")).load()->find(key), nullptr);

  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA, 0);
  const at::Tensor x = at::randn({kRows, kCols}, opts.dtype(at::kFloat)).mul_(2.0).add_(0.5).to(at::kBFloat16);
  const at::Tensor w = at::rand({kCols}, opts.dtype(at::kFloat)).mul_(2.0).sub_(1.0).to(at::kBFloat16);
  const at::Tensor b = at::rand({kCols}, opts.dtype(at::kFloat)).sub_(0.5).to(at::kBFloat16);
  const double eps = 1e-5;
  const uint64_t hits = hitsOf(servedOp("aten::native_layer_norm"));
  at::Tensor y;
  {
    at::InferenceMode inference;
    y = at::layer_norm(x, {kCols}, w, b, eps);
  }
  EXPECT_EQ(hitsOf(servedOp("aten::native_layer_norm")), hits + 1);
  auto [ref, refMean, refRstd] = at::cuda::native_layer_norm(x, {kCols}, w, b, eps);
  const NormTolerance t = LayerNormFamily::tolerance(DType::BFloat16, kCols);
  // out: Note [Norm harness bounds] (the mean's error carried through x - mean, |w| <= 1).
  const at::Tensor carried = (refMean.to(at::kDouble).abs() * refRstd.to(at::kDouble)) * t.statRel;
  expectWithin(y, ref, ref.to(at::kDouble).abs() * t.outRel + t.outAbs + carried, "layer_norm out");

  auto [out, mean, rstd] = at::native_layer_norm(x, {kCols}, w, b, eps);
  EXPECT_EQ(hitsOf(servedOp("aten::native_layer_norm")), hits + 2);
  ASSERT_EQ(mean.sizes(), (std::vector<int64_t>{kRows, 1}));
  EXPECT_EQ(mean.scalar_type(), at::kFloat);
  expectWithin(rstd, refRstd, refRstd.to(at::kDouble).abs() * t.statRel, "layer_norm rstd");
  expectWithin(mean, refMean, (refMean.to(at::kDouble).abs() + refRstd.to(at::kDouble).reciprocal()) * t.statRel,
               "layer_norm mean");

  // Without bias: another variant, no plan: the original kernel.
  const uint64_t misses = missesOf(servedOp("aten::native_layer_norm"));
  (void)at::layer_norm(x, {kCols}, w, std::nullopt, eps);
  EXPECT_EQ(hitsOf(servedOp("aten::native_layer_norm")), hits + 2);
  EXPECT_EQ(missesOf(servedOp("aten::native_layer_norm")), misses + 1);
}

// group_norm end to end (opt-in): Stable Diffusion's first UNet norm (fp16 [2, 320, 64, 64], 32 groups) tuned
// through the engine, then F.group_norm's composite reaches the served kernel; out within the family's bound of
// ATen's, mean and rstd [N, G] in the input's dtype; without bias another variant, ATen's.
TEST(NormRuntimeGpuTest, GivenHotFp16GroupNormWhenOptimizedThenGroupNormHitsTheSwappedKernel) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  installServedOp(servedOp("aten::native_group_norm"), c10::DispatchKey::CUDA, nullptr);
  const kernels::GroupNormVariant v{DType::Float16, 2 * 32, 10 * 4096, 32, 4096, true, true};
  const VariantKey key = kernels::groupNormKeyOf(v, 0);
  const std::string op = "aten::native_group_norm", variant = kernels::variantString(key);
  const nlohmann::json summary =
      Engine::instance().optimizeVariant(op, key, [] { return true; }, budgetOf(op, key, 40.0));
  std::cout << "group_norm: " << summary.value("decision", "?") << " speed-up " << summary.value("speedup", 0.0)
            << std::endl;
  // ATen's three passes run this variant at a few percent of the copy bandwidth: a served kernel wins by far.
  ASSERT_EQ(summary["decision"], "kernel") << summary.dump().substr(0, 3000);
  EXPECT_FALSE(planOf(op, variant).is_null()) << Engine::instance().status()["plans"].dump();

  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  const at::Tensor x = at::randn({2, 320, 64, 64}, opts).mul_(2.0).add_(0.5).to(at::kHalf);
  const at::Tensor w = at::rand({320}, opts).mul_(2.0).sub_(1.0).to(at::kHalf);
  const at::Tensor b = at::rand({320}, opts).sub_(0.5).to(at::kHalf);
  const uint64_t hits = hitsOf(servedOp(op));
  at::Tensor y;
  {
    at::InferenceMode inference;
    y = at::group_norm(x, 32, w, b, 1e-5);
  }
  EXPECT_EQ(hitsOf(servedOp(op)), hits + 1);
  auto [ref, refMean, refRstd] = at::cuda::native_group_norm(x, w, b, 2, 320, 4096, 32, 1e-5);
  const NormTolerance t = kernels::GroupNormFamily::tolerance(DType::Float16, v.cols);
  // Note [Group norm harness bounds]: one statistic ulp carried into the output.
  const at::Tensor carried = (refMean.to(at::kDouble).abs() * refRstd.to(at::kDouble) + 1.5) * t.statRel;
  const at::Tensor bound = ref.to(at::kDouble).abs() * (t.outRel + t.statRel) + t.outAbs +
                           carried.view({2, 32, 1}).expand({2, 32, 10 * 4096}).reshape({2, 320, 64, 64});
  expectWithin(y, ref, bound, "group_norm out");
  auto [out, mean, rstd] = at::native_group_norm(x, w, b, 2, 320, 4096, 32, 1e-5);
  EXPECT_EQ(hitsOf(servedOp(op)), hits + 2);
  ASSERT_EQ(mean.sizes(), (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(mean.scalar_type(), at::kHalf);
  EXPECT_EQ(rstd.scalar_type(), at::kHalf);
  expectWithin(rstd, refRstd, refRstd.to(at::kDouble).abs() * t.statRel, "group_norm rstd");

  const uint64_t misses = missesOf(servedOp(op));
  (void)at::group_norm(x, 32, w, std::nullopt, 1e-5);
  EXPECT_EQ(hitsOf(servedOp(op)), hits + 2);
  EXPECT_EQ(missesOf(servedOp(op)), misses + 1);
}

// batch_norm end to end (opt-in; Note [Batch norm of one sample]): BiT's weight standardization of a 3 x 3
// convolution of 512 channels (bf16 [512, 512, 3, 3] as one sample of 512 channels) tuned through the engine against
// ATen's native_batch_norm, then F.batch_norm as HF's WeightStandardizedConv2d calls it reaches the served kernel;
// out within layer_norm's bound of ATen's, save_mean and save_invstd float32 [C]; eval mode runs ATen.
TEST(NormRuntimeGpuTest, GivenHotBf16WeightStandardizationWhenOptimizedThenBatchNormHitsTheSwappedKernel) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  const std::string op = "aten::native_batch_norm";
  installServedOp(servedOp(op), c10::DispatchKey::CUDA, nullptr);
  constexpr int64_t kChannels = 512, kElements = 512 * 9;
  const VariantKey key{static_cast<int32_t>(DType::BFloat16), 0, kChannels, kElements};
  const std::string variant = kernels::variantString(key);
  const nlohmann::json summary =
      Engine::instance().optimizeVariant(op, key, [] { return true; }, budgetOf(op, key, 40.0));
  std::cout << "batch_norm: " << summary.value("decision", "?") << " speed-up " << summary.value("speedup", 0.0)
            << std::endl;
  // ATen's two kernels (statistics a CTA a channel, then the elementwise pass) against one pass: a served kernel wins.
  ASSERT_EQ(summary["decision"], "kernel") << summary.dump().substr(0, 3000);
  EXPECT_FALSE(planOf(op, variant).is_null()) << Engine::instance().status()["plans"].dump();
  const std::string fingerprint = Engine::instance().status()["fingerprint"];
  std::unique_ptr<cache::CacheStore> store = cache::CacheStore::open(cacheDir());
  const std::optional<cache::Entry> entry = store->get(fingerprint, op, variant);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->family, "batch_norm");

  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  // Conv weights of a small scale, each output channel with its own offset.
  const at::Tensor w = (at::randn({kChannels, 512, 3, 3}, opts).mul_(0.02) + at::randn({kChannels, 1, 1, 1}, opts))
                           .to(at::kBFloat16);
  const double eps = 1e-6;
  const uint64_t hits = hitsOf(servedOp(op));
  at::Tensor y;
  {
    at::InferenceMode inference;
    y = at::batch_norm(w.reshape({1, kChannels, -1}), {}, {}, {}, {}, /*training=*/true, 0.0, eps, false);
  }
  EXPECT_EQ(hitsOf(servedOp(op)), hits + 1);
  auto [ref, refMean, refInvstd] = at::cuda::native_batch_norm(w.reshape({1, kChannels, -1}), std::nullopt,
                                                               std::nullopt, std::nullopt, std::nullopt, true, 0.0, eps);
  const NormTolerance t = LayerNormFamily::tolerance(DType::BFloat16, kElements);
  const at::Tensor carried =
      (refMean.to(at::kDouble).abs() * refInvstd.to(at::kDouble) * t.statRel).view({1, kChannels, 1});
  expectWithin(y, ref, ref.to(at::kDouble).abs() * t.outRel + t.outAbs + carried, "batch_norm out");

  auto [out, mean, invstd] = at::native_batch_norm(w.reshape({1, kChannels, 4, -1}), std::nullopt, std::nullopt,
                                                   std::nullopt, std::nullopt, true, 0.1, eps);
  EXPECT_EQ(hitsOf(servedOp(op)), hits + 2);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{1, kChannels, 4, kElements / 4}));
  ASSERT_EQ(mean.sizes(), refMean.sizes());
  EXPECT_EQ(mean.scalar_type(), refMean.scalar_type());
  EXPECT_EQ(invstd.scalar_type(), refInvstd.scalar_type());
  expectWithin(invstd, refInvstd, refInvstd.to(at::kDouble).abs() * t.statRel, "batch_norm invstd");
  expectWithin(mean, refMean, (refMean.to(at::kDouble).abs() + refInvstd.to(at::kDouble).reciprocal()) * t.statRel,
               "batch_norm mean");

  // Eval mode with running statistics: ATen's.
  const uint64_t misses = missesOf(servedOp(op));
  (void)at::native_batch_norm(w.reshape({1, kChannels, -1}), std::nullopt, std::nullopt, at::zeros({kChannels}, opts),
                              at::ones({kChannels}, opts), /*training=*/false, 0.0, eps);
  EXPECT_EQ(hitsOf(servedOp(op)), hits + 2);
  EXPECT_EQ(missesOf(servedOp(op)), misses + 1);
}

// Note [Split norm rows over a cooperative grid] as the trampoline serves it: a grid-split plan for
// few long rows, validated by the harness (which checks the counter is left at 0), takes the
// stream's persistent workspace (Note [A persistent workspace per stream]) call after call, a
// side stream's own, and a fresh one inside a captured CUDA graph; every result is bit for bit the
// first (the partials are summed in a fixed order) and within the family's tolerance of ATen.
TEST(NormRuntimeGpuTest, GivenAGridSplitRmsNormPlanWhenServedOnStreamsAndInAGraphThenEveryCallMatchesAten) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  installServedOp(servedOp("aten::_fused_rms_norm"), c10::DispatchKey::CUDA, nullptr);
  const int64_t rows = 4, cols = int64_t{1} << 21;
  const kernels::RmsNormVariant v{DType::BFloat16, rows, cols, true};
  VariantKey key{static_cast<int32_t>(DType::BFloat16), 0, rows, cols};
  key.options = kernels::variant_options::kWeight;
  const NormParams p{1024, 8, 0, 1, 1, 32};
  ASSERT_TRUE(RmsNormFamily::guardParams(v, p));
  const std::string cubin = compileToCubin(RmsNormFamily::source(), "rms_norm.cu", queryDevice(0).nvrtcArch(),
                                           RmsNormFamily::compileOptions(DType::BFloat16, p, true, cols))
                                .cubin;
  const HarnessReport report =
      runHarness(rmsNormSpec(true), rmsNormCandidate(v, p, cubin, /*colsSpecialized=*/true), DType::BFloat16, rows,
                 cols, 0);
  ASSERT_TRUE(report.passed) << (report.failure() ? report.failure()->detail : std::string());
  Plan plan = kernels::rmsNormDescriptor().makePlan(key, p.toJson(), cubin, 0);
  ASSERT_EQ(plan.workspaceFloats, rows * 32 + 1);
  plansOf(servedOp("aten::_fused_rms_norm")).publish(std::move(plan));

  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  const at::Tensor x = at::randn({rows, cols}, opts).mul_(2.0).add_(0.5).to(at::kBFloat16);
  const at::Tensor w = at::rand({cols}, opts).mul_(2.0).sub_(1.0).to(at::kBFloat16);
  const double eps = 1e-6;
  c10::InferenceMode inference;
  const uint64_t hits = hitsOf(servedOp("aten::_fused_rms_norm"));
  const at::Tensor first = at::rms_norm(x, {cols}, w, eps);
  ASSERT_EQ(hitsOf(servedOp("aten::_fused_rms_norm")), hits + 1) << "the plan did not serve the call";
  auto [ref, refRstd] = at::cuda::_fused_rms_norm(x, {cols}, w, eps);
  const NormTolerance t = RmsNormFamily::tolerance(DType::BFloat16, cols);
  expectWithin(first, ref, ref.to(at::kDouble).abs() * t.outRel + t.outAbs, "grid-split rms_norm out");
  auto [out, rstd] = at::_fused_rms_norm(x, {cols}, w, eps);
  expectWithin(rstd.view({rows, 1}), refRstd, refRstd.to(at::kDouble).abs() * t.statRel, "grid-split rms_norm rstd");

  // One stream, one counter, call after call.
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(at::equal(at::rms_norm(x, {cols}, w, eps), first)) << "call " << i;
  // A second stream: its own buffer.
  const at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
  {
    c10::cuda::CUDAStreamGuard guard(side);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(at::equal(at::rms_norm(x, {cols}, w, eps), first)) << "side stream " << i;
    side.synchronize();
  }
  // A graph captured on a third stream: a fresh workspace, its counter zeroed by a node of the graph.
  const at::cuda::CUDAStream capture = at::cuda::getStreamFromPool();
  at::cuda::CUDAGraph graph;
  at::Tensor captured;
  {
    c10::cuda::CUDAStreamGuard guard(capture);
    const uint64_t before = hitsOf(servedOp("aten::_fused_rms_norm"));
    graph.capture_begin();
    captured = at::rms_norm(x, {cols}, w, eps);
    graph.capture_end();
    EXPECT_EQ(hitsOf(servedOp("aten::_fused_rms_norm")), before + 1) << "the capture did not take the plan";
    for (int i = 0; i < 3; ++i) {
      graph.replay();
      EXPECT_TRUE(at::equal(at::rms_norm(x, {cols}, w, eps), first)) << "eager between replays " << i;
      EXPECT_TRUE(at::equal(captured, first)) << "replay " << i;
    }
    capture.synchronize();
  }
  EXPECT_TRUE(at::equal(at::rms_norm(x, {cols}, w, eps), first)) << "after the graph, on the first stream";
  // The stream's counter is back at 0 after all of it.
  const at::Tensor work = StreamWorkspaces::global().forLaunchLike(rows * 32 + 1, x);
  EXPECT_EQ(work[rows * 32].view(at::kInt).item<int32_t>(), 0);
}

}  // namespace
}  // namespace hotkernel
