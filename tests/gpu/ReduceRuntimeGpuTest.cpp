// The last-dim reductions end to end in one process, as the runtime serves
// them: a hot variant (sum over bf16 [4096, 32000]; argmax over bf16
// [32, 128256], a decode-sized batch of logits) goes through
// Engine::optimizeVariant (tuner, harness, decision in the cache under the
// op's family name, plan published in the op's table; amin and argmin over
// fp32 [2048, 8192] too), and x.sum(-1) / x.argmax(-1) / x.amin(-1) /
// x.argmin(-1) then hit the trampoline and match ATen's CUDA kernel (sum
// within the family's tolerance, argmax exactly), with and without keepdim,
// under autograd too (the trampoline replaces the CUDA kernel only).
//
// Own binary: the plans it publishes, the trampolines it installs and the
// runtime's cache directory (HOTKERNEL_CACHE_DIR, read once per process) must
// not leak into other GPU tests.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <iostream>
#include <string>

#include "ReduceOverride.h"
#include "hotkernel/interpose/Engine.h"
#include "RuntimeGpuTestSupport.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/ReduceTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using gputest::budgetOf;
using gputest::planOf;

using kernels::DType;
using kernels::ReduceFamily;
using kernels::ReduceOp;
using kernels::ReduceParams;

const std::string& cacheDir() { return gputest::runtimeCacheDir("hk-reduce-runtime"); }

// Optimizes `op` at `key` through the runtime and checks the cache's record;
// when the tuner kept ATen (no candidate cleared the speed-up threshold on
// this GPU), publishes the family's first point after the five-stage harness,
// so that the dispatch path is still checked with a validated kernel.
void optimizeOrPublish(ReduceOp op, const VariantKey& key) {
  const std::string name = kernels::reduceAtenOpName(op), variant = kernels::variantString(key);
  const nlohmann::json summary =
      Engine::instance().optimizeVariant(name, key, [] { return true; }, budgetOf(name, key, 40.0));
  std::cout << name << " " << variant << ": " << summary.value("decision", "?") << " speed-up "
            << summary.value("speedup", 0.0) << std::endl;
  ASSERT_TRUE(summary["decision"] == "kernel" || summary["decision"] == "keep_aten") << summary.dump();
  const std::string fingerprint = Engine::instance().status()["fingerprint"];
  std::unique_ptr<cache::CacheStore> store = cache::CacheStore::open(cacheDir());
  const std::optional<cache::Entry> entry = store->get(fingerprint, name, variant);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->family, kernels::reduceFamilyName(op));
  EXPECT_EQ(entry->decision, summary["decision"].get<std::string>());
  if (summary["decision"] == "kernel") {
    EXPECT_TRUE(!planOf(name, variant).is_null()) << Engine::instance().status()["plans"].dump();
  } else {
    std::cout << name << ": the tuner kept ATen; publishing the harness-validated first point" << std::endl;
    const kernels::ReduceVariant v{static_cast<DType>(key.dtype), key.rows, key.cols, op};
    const ReduceParams p = ReduceFamily::parameterSpace(v).front();
    const std::string cubin = compileToCubin(ReduceFamily::source(), "reduce_lastdim.cu", queryDevice(0).nvrtcArch(),
                                             ReduceFamily::compileOptions(v.dtype, p, op))
                                  .cubin;
    const HarnessReport report = runHarness(reduceSpec(op), reduceCandidate(v, p, cubin), v.dtype, v.rows, v.cols, 0);
    ASSERT_TRUE(report.passed) << (report.failure() ? report.failure()->detail : std::string());
    plansOf(servedOp(kernels::reduceAtenOpName(op))).publish(kernels::reduceDescriptor(op).makePlan(key, p.toJson(), cubin, 0));
  }
  ASSERT_NE(plansOf(servedOp(kernels::reduceAtenOpName(op))).load()->find(key), nullptr);
}

TEST(ReduceRuntimeGpuTest, GivenAHotBf16SumWhenOptimizedThenSumHitsTheSwappedKernelAndMatchesAten) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  installServedOp(servedOp("aten::sum.dim_IntList"), c10::DispatchKey::CUDA, nullptr);
  constexpr int64_t kRows = 4096, kCols = 32000;
  const VariantKey key{static_cast<int32_t>(DType::BFloat16), 0, kRows, kCols};
  ASSERT_EQ(kernels::variantString(key), "dtype=bfloat16;rows=4096;cols=32000");
  optimizeOrPublish(ReduceOp::Sum, key);

  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  // [2, 2048, 32000]: leading dims fold into the 4096 rows of the key.
  const at::Tensor x = at::randn({2, 2048, kCols}, opts).mul_(2.0).add_(0.5).to(at::kBFloat16);
  const uint64_t hits = hitsOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum)));
  at::Tensor y;
  {
    at::InferenceMode inference;
    y = x.sum(-1);
  }
  EXPECT_EQ(hitsOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum))), hits + 1);
  ASSERT_EQ(y.sizes(), (at::IntArrayRef{2, 2048}));
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  const at::Tensor x2 = x.view({kRows, kCols});
  const at::Tensor ref = atenReduceLastDim(x2, ReduceOp::Sum);
  // The harness's bound (Note [Reduction harness]): ATen's own error from float64, plus the family's.
  const kernels::ReduceTolerance t = ReduceFamily::tolerance(ReduceOp::Sum, DType::BFloat16, kCols);
  const at::Tensor x64 = x2.to(at::kDouble), r = ref.to(at::kDouble);
  const at::Tensor bound = (r - x64.sum(1)).abs() + x64.abs().sum(1) * t.sumRel + r.abs() * t.outRel + t.outAbs;
  const at::Tensor excess = (y.reshape({kRows}).to(at::kDouble) - r).abs() - bound;
  EXPECT_LE(excess.max().item<double>(), 0.0);

  // keepdim and autograd (a leaf requiring grad: the trampoline runs below autograd).
  const at::Tensor leaf = x.detach().clone().requires_grad_(true);
  const at::Tensor kept = leaf.sum(-1, /*keepdim=*/true);
  EXPECT_EQ(hitsOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum))), hits + 2);
  ASSERT_EQ(kept.sizes(), (at::IntArrayRef{2, 2048, 1}));
  kept.backward(at::ones_like(kept));
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_TRUE(at::all(leaf.grad() == 1).item<bool>());

  // Another dim, and another shape: the original kernel.
  const uint64_t misses = missesOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum)));
  (void)x.sum(1);
  (void)x.narrow(1, 0, 1000).sum(-1);
  EXPECT_EQ(hitsOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum))), hits + 2);
  EXPECT_GE(missesOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum))), misses + 2);
}

TEST(ReduceRuntimeGpuTest, GivenAHotBf16DecodeArgmaxWhenOptimizedThenArgmaxHitsTheSwappedKernelAndEqualsAten) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  installServedOp(servedOp("aten::argmax"), c10::DispatchKey::CUDA, nullptr);
  constexpr int64_t kRows = 32, kCols = 128256;
  const VariantKey key{static_cast<int32_t>(DType::BFloat16), 0, kRows, kCols};
  optimizeOrPublish(ReduceOp::Argmax, key);

  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  at::Tensor x = at::randn({kRows, kCols}, opts).mul_(3.0).to(at::kBFloat16);
  // Ties (bf16 rounds many logits to the same value) and a NaN row.
  x.select(0, 5).fill_(1.0);
  x.select(0, 7).select(0, 1234).fill_(std::numeric_limits<float>::quiet_NaN());
  const uint64_t hits = hitsOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Argmax)));
  at::Tensor idx, kept;
  {
    at::InferenceMode inference;
    idx = x.argmax(-1);
    kept = at::argmax(x, 1, /*keepdim=*/true);
  }
  EXPECT_EQ(hitsOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Argmax))), hits + 2);
  EXPECT_EQ(idx.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(idx, atenReduceLastDim(x, ReduceOp::Argmax)));
  ASSERT_EQ(kept.sizes(), (at::IntArrayRef{kRows, 1}));
  EXPECT_TRUE(at::equal(kept.view({kRows}), idx));
  EXPECT_EQ(idx[5].item<int64_t>(), 0);
  EXPECT_EQ(idx[7].item<int64_t>(), 1234);
  // argmax(dim=None) flattens: the original kernel.
  const uint64_t misses = missesOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Argmax)));
  (void)x.argmax();
  EXPECT_EQ(missesOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Argmax))), misses + 1);
}

TEST(ReduceRuntimeGpuTest, GivenHotFp32AminAndArgminWhenOptimizedThenBothHitTheirSwappedKernelsAndEqualAten) {
  // amin and argmin, the ops added as rows of the served-op table, through the
  // whole runtime path: tuned, cached under their own families, served.
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  constexpr int64_t kRows = 2048, kCols = 8192;
  const VariantKey key{static_cast<int32_t>(DType::Float32), 0, kRows, kCols};
  for (ReduceOp op : {ReduceOp::Amin, ReduceOp::Argmin}) {
    installServedOp(servedOp(kernels::reduceAtenOpName(op)), c10::DispatchKey::CUDA, nullptr);
    optimizeOrPublish(op, key);
  }
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  at::Tensor x = at::randn({kRows, kCols}, opts);
  x.select(0, 3).fill_(-2.0);                                                         // ties: index 0
  x.select(0, 9).select(0, 77).fill_(std::numeric_limits<float>::quiet_NaN());       // NaN first
  const uint64_t aminHits = hitsOf(servedOp("aten::amin")), argminHits = hitsOf(servedOp("aten::argmin"));
  at::Tensor m, idx;
  {
    at::InferenceMode inference;
    m = x.amin(-1);
    idx = x.argmin(-1);
  }
  EXPECT_EQ(hitsOf(servedOp("aten::amin")), aminHits + 1);
  EXPECT_EQ(hitsOf(servedOp("aten::argmin")), argminHits + 1);
  const at::Tensor atenM = atenReduceLastDim(x, ReduceOp::Amin);
  EXPECT_TRUE(at::all((m == atenM) | (m.isnan() & atenM.isnan())).item<bool>());
  EXPECT_TRUE(at::equal(idx, atenReduceLastDim(x, ReduceOp::Argmin)));
  EXPECT_EQ(idx[3].item<int64_t>(), 0);
  EXPECT_EQ(idx[9].item<int64_t>(), 77);
  EXPECT_TRUE(std::isnan(m[9].item<float>()));
}

}  // namespace
}  // namespace hotkernel
