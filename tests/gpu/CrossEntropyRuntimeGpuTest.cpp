// cross_entropy_loss end to end in one process, as the runtime serves it: a
// hot variant (bf16 [4096, 32000], reduction mean) goes through
// Engine::optimizeVariant (tuner, harness with fresh labels and ignore_index
// per check, decision in the cache under "cross_entropy" and the variant with
// its reduction, plan published in the op's table), and at::cross_entropy_loss
// (what F.cross_entropy calls) then hits the override under inference_mode and
// with autograd on but no gradient needed, matching ATen within the family's
// tolerance; with logits requiring grad the original composite runs and the
// gradient is ATen's.
//
// Own binary: the plans it publishes, the trampolines it installs (CUDA and
// AutogradCUDA) and the runtime's cache directory (HOTKERNEL_CACHE_DIR, read
// once per process) must not leak into other GPU tests.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/core/InferenceMode.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/nll_loss_forward_cuda_dispatch.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include "CrossEntropyOverride.h"
#include "hotkernel/interpose/Engine.h"
#include "RuntimeGpuTestSupport.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/CrossEntropyTuner.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/runtime/StreamWorkspace.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using gputest::budgetOf;
using gputest::planOf;

using kernels::CrossEntropyFamily;
using kernels::CrossEntropyParams;
using kernels::CrossEntropyReduction;
using kernels::CrossEntropyTolerance;
using kernels::CrossEntropyVariant;
using kernels::DType;

constexpr int64_t kRows = 4096, kCols = 32000;

const std::string& cacheDir() { return gputest::runtimeCacheDir("hk-ce-runtime"); }

// ATen's decomposition below the dispatcher (never the override).
at::Tensor atenLoss(const at::Tensor& x, const at::Tensor& t, int64_t reduction, int64_t ignoreIndex) {
  return std::get<0>(at::cuda::nll_loss_forward(at::cuda::_log_softmax(x, 1, false), t, std::nullopt, reduction,
                                                ignoreIndex));
}

// |got - ref| within the family's bound of a mean (Note [Cross entropy tolerance]).
void expectMeanWithin(const at::Tensor& got, const at::Tensor& x, const at::Tensor& t, int64_t ignoreIndex,
                      const char* what) {
  const int64_t cols = x.size(1);
  ASSERT_EQ(got.dim(), 0) << what;
  ASSERT_EQ(got.scalar_type(), x.scalar_type()) << what;
  const at::Tensor ref = atenLoss(x, t, at::Reduction::Mean, ignoreIndex);
  const at::Tensor rows = atenLoss(x, t, at::Reduction::None, ignoreIndex).to(at::kDouble);
  const at::Tensor kept = t != ignoreIndex;
  const int64_t count = kept.sum().item<int64_t>();
  const at::Tensor absKept = at::where(kept, rows.abs(), at::zeros_like(rows));
  const CrossEntropyTolerance tol = CrossEntropyFamily::tolerance(DType::BFloat16, cols);
  const double r = ref.item<double>(), g = got.item<double>();
  const double bound = tol.reducedBound(CrossEntropyReduction::Mean, count, absKept.sum().item<double>(),
                                        count > 0 ? absKept.max().item<double>() : 0.0, r);
  EXPECT_TRUE(std::isfinite(g)) << what;
  EXPECT_LE(std::fabs(g - r), bound) << what << ": got " << g << ", ATen " << r;
}

TEST(CrossEntropyRuntimeGpuTest, GivenHotBf16MeanWhenOptimizedThenCrossEntropyHitsTheOverrideUnlessGradIsNeeded) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  installServedOp(servedOp("aten::cross_entropy_loss"), c10::DispatchKey::CUDA, nullptr);
  ASSERT_TRUE(CrossEntropyOverride::state().installedFor(c10::DispatchKey::AutogradCUDA));
  VariantKey key{static_cast<int32_t>(DType::BFloat16), 0, kRows, kCols};
  key.options = kernels::reductionOptions(at::Reduction::Mean);
  const std::string op = "aten::cross_entropy_loss", variant = kernels::variantString(key);
  ASSERT_EQ(variant, "dtype=bfloat16;rows=4096;cols=32000;reduction=mean");

  const nlohmann::json summary =
      Engine::instance().optimizeVariant(op, key, [] { return true; }, budgetOf(op, key, 60.0));
  std::cout << "cross_entropy: " << summary.value("decision", "?") << " speed-up " << summary.value("speedup", 0.0)
            << std::endl;
  ASSERT_TRUE(summary["decision"] == "kernel" || summary["decision"] == "keep_aten") << summary.dump();
  const std::string fingerprint = Engine::instance().status()["fingerprint"];
  std::unique_ptr<cache::CacheStore> store = cache::CacheStore::open(cacheDir());
  const std::optional<cache::Entry> entry = store->get(fingerprint, op, variant);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->family, "cross_entropy");
  EXPECT_EQ(entry->decision, summary["decision"].get<std::string>());

  if (summary["decision"] == "kernel") {
    EXPECT_FALSE(planOf(op, variant).is_null()) << Engine::instance().status()["plans"].dump();
  } else {
    // No candidate cleared the speed-up threshold on this GPU: publish the
    // family's first point, validated by the harness, so the dispatch path is
    // still checked with a correct kernel.
    std::cout << "cross_entropy: the tuner kept ATen; publishing the harness-validated first point" << std::endl;
    const DeviceInfo info = queryDevice(0);
    const CrossEntropyVariant v{DType::BFloat16, kRows, kCols, CrossEntropyReduction::Mean};
    const CrossEntropyParams p = CrossEntropyFamily::parameterSpace(v, info.ccMajor * 10 + info.ccMinor).front();
    const std::string cubin =
        compileToCubin(CrossEntropyFamily::source(), "cross_entropy.cu", info.nvrtcArch(),
                       CrossEntropyFamily::compileOptions(DType::BFloat16, p, CrossEntropyReduction::Mean))
            .cubin;
    const HarnessReport report = runHarness(crossEntropySpec(CrossEntropyReduction::Mean),
                                            crossEntropyCandidate(v, p, cubin), DType::BFloat16, kRows, kCols, 0);
    ASSERT_TRUE(report.passed) << p.describe() << ": " << (report.failure() ? report.failure()->detail : "");
    plansOf(servedOp("aten::cross_entropy_loss")).publish(kernels::crossEntropyDescriptor().makePlan(key, p.toJson(), cubin, 0));
  }
  ASSERT_NE(plansOf(servedOp("aten::cross_entropy_loss")).load()->find(key), nullptr);

  const auto opts = at::TensorOptions().device(at::kCUDA, 0);
  const at::Tensor x = at::randn({kRows, kCols}, opts.dtype(at::kFloat)).mul_(3.0).to(at::kBFloat16);
  at::Tensor t = at::randint(0, kCols, {kRows}, opts.dtype(at::kLong));
  t.slice(0, 0, kRows, 7).fill_(-100);
  const uint64_t hits = hitsOf(servedOp("aten::cross_entropy_loss"));

  // inference_mode: no autograd keys, the CUDA trampoline directly.
  at::Tensor y, again;
  {
    at::InferenceMode inference;
    y = at::cross_entropy_loss(x, t);
    again = at::cross_entropy_loss(x, t);
  }
  EXPECT_EQ(hitsOf(servedOp("aten::cross_entropy_loss")), hits + 2);
  expectMeanWithin(y, x, t, -100, "inference_mode");
  EXPECT_TRUE(at::equal(y, again)) << "not bitwise reproducible: " << y.item<double>() << " vs "
                                   << again.item<double>();  // the counter left at 0 between calls

  // Autograd on, no gradient needed: the AutogradCUDA trampoline redispatches below autograd.
  const at::Tensor z = at::cross_entropy_loss(x, t);
  EXPECT_EQ(hitsOf(servedOp("aten::cross_entropy_loss")), hits + 3);
  EXPECT_FALSE(z.requires_grad());
  expectMeanWithin(z, x, t, -100, "no grad needed");

  // ignore_index a real class: the kernel's per-call argument. Every other
  // each label must then be a class: ATen's nll_loss asserts on the device (and
  // the context is lost) for a label outside [0, cols) that is not the
  // ignore_index, such as -100 here.
  at::Tensor t7 = at::randint(0, kCols, {kRows}, opts.dtype(at::kLong));
  t7.slice(0, 0, kRows, 5).fill_(7);
  {
    at::InferenceMode inference;
    expectMeanWithin(at::cross_entropy_loss(x, t7, std::nullopt, at::Reduction::Mean, 7, 0.0), x, t7, 7,
                     "ignore_index 7");
  }
  EXPECT_EQ(hitsOf(servedOp("aten::cross_entropy_loss")), hits + 4);

  // Gradient needed: the original composite (no hit), and ATen's gradient.
  const uint64_t hitsBefore = hitsOf(servedOp("aten::cross_entropy_loss"));
  at::Tensor xg = x.clone().requires_grad_(true);
  at::Tensor loss = at::cross_entropy_loss(xg, t);
  EXPECT_EQ(hitsOf(servedOp("aten::cross_entropy_loss")), hitsBefore);
  ASSERT_TRUE(loss.requires_grad());
  loss.backward();
  at::Tensor xr = x.clone().requires_grad_(true);
  at::Tensor refLoss = at::nll_loss(at::log_softmax(xr, 1), t);  // the composite's own steps, with autograd
  refLoss.backward();
  EXPECT_TRUE(at::equal(loss.detach(), refLoss.detach()));
  EXPECT_TRUE(at::allclose(xg.grad().to(at::kFloat), xr.grad().to(at::kFloat), 1e-2, 1e-6));

  // Other reductions have no plan: the original, ATen's value.
  const uint64_t misses = missesOf(servedOp("aten::cross_entropy_loss"));
  {
    at::InferenceMode inference;
    const at::Tensor none = at::cross_entropy_loss(x, t, std::nullopt, at::Reduction::None, -100, 0.0);
    EXPECT_TRUE(at::equal(none, atenLoss(x, t, at::Reduction::None, -100)));
  }
  EXPECT_EQ(missesOf(servedOp("aten::cross_entropy_loss")), misses + 1);
}

// Note [A persistent workspace per stream]: a plan whose launches count CTA
// groups on the workspace's counter, served many times on one stream (each
// launch finds the counter its predecessor left at 0), alternating with
// another row count that shares the same counter, on a second stream, and in
// a CUDA graph (not pooled: the capture adds no buffer; replays interleaved
// with eager calls on the capture stream). Every result equals the first,
// which is within the family's bound of ATen's.
TEST(CrossEntropyRuntimeGpuTest, GivenACountingPlanWhenServedOnTwoStreamsAndInAGraphThenEveryCallMatches) {
  REQUIRE_CUDA_AND_NVRTC();
  installServedOp(servedOp("aten::cross_entropy_loss"), c10::DispatchKey::CUDA, nullptr);
  constexpr int64_t kDecodeCols = 128256;
  const DeviceInfo info = queryDevice(0);
  const int cc = info.ccMajor * 10 + info.ccMinor;
  const CrossEntropyVariant v32{DType::BFloat16, 32, kDecodeCols, CrossEntropyReduction::Mean};
  const CrossEntropyVariant v8{DType::BFloat16, 8, kDecodeCols, CrossEntropyReduction::Mean};
  std::optional<CrossEntropyParams> counting;
  for (const CrossEntropyParams& p : CrossEntropyFamily::parameterSpace(v32, cc)) {
    if (CrossEntropyFamily::needsCounter(v32, p) && CrossEntropyFamily::needsCounter(v8, p)) {
      counting = p;
      break;
    }
  }
  ASSERT_TRUE(counting.has_value()) << "no point of the space counts CTA groups at [32, 128256]";
  const std::string cubin =
      compileToCubin(CrossEntropyFamily::source(), "cross_entropy.cu", info.nvrtcArch(),
                     CrossEntropyFamily::compileOptions(DType::BFloat16, *counting, CrossEntropyReduction::Mean))
          .cubin;
  for (const int64_t rows : {int64_t{32}, int64_t{8}}) {
    VariantKey key{static_cast<int32_t>(DType::BFloat16), 0, rows, kDecodeCols};
    key.options = kernels::reductionOptions(at::Reduction::Mean);
    plansOf(servedOp("aten::cross_entropy_loss")).publish(kernels::crossEntropyDescriptor().makePlan(key, (*counting).toJson(), cubin, 0));
  }
  std::cout << "counting plan: " << counting->describe() << std::endl;

  const auto opts = at::TensorOptions().device(at::kCUDA, 0);
  const at::Tensor x = at::randn({32, kDecodeCols}, opts.dtype(at::kFloat)).mul_(3.0).to(at::kBFloat16);
  at::Tensor t = at::randint(0, kDecodeCols, {32}, opts.dtype(at::kLong));
  t.slice(0, 0, 32, 5).fill_(-100);
  const at::Tensor x8 = x.narrow(0, 3, 8).contiguous(), t8 = t.narrow(0, 3, 8).contiguous();
  c10::InferenceMode inference;
  const uint64_t hits = hitsOf(servedOp("aten::cross_entropy_loss"));
  const at::Tensor first = at::cross_entropy_loss(x, t), first8 = at::cross_entropy_loss(x8, t8);
  ASSERT_EQ(hitsOf(servedOp("aten::cross_entropy_loss")), hits + 2) << "the plans did not serve the calls";
  expectMeanWithin(first, x, t, -100, "32 rows");
  expectMeanWithin(first8, x8, t8, -100, "8 rows");

  // One stream, two row counts, one counter.
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(at::equal(at::cross_entropy_loss(x, t), first)) << "call " << i << " of 32 rows";
    EXPECT_TRUE(at::equal(at::cross_entropy_loss(x8, t8), first8)) << "call " << i << " of 8 rows";
  }
  // A second stream: its own buffer.
  const at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
  {
    c10::cuda::CUDAStreamGuard guard(side);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(at::equal(at::cross_entropy_loss(x, t), first)) << "side stream " << i;
    side.synchronize();
  }
  // A graph captured on a third stream: a fresh workspace, zeroed by a node of the graph.
  const at::cuda::CUDAStream capture = at::cuda::getStreamFromPool();
  at::cuda::CUDAGraph graph;
  at::Tensor captured;
  const size_t beforeCapture = StreamWorkspaces::global().pooledBuffers();
  {
    c10::cuda::CUDAStreamGuard guard(capture);
    const uint64_t before = hitsOf(servedOp("aten::cross_entropy_loss"));
    graph.capture_begin();
    captured = at::cross_entropy_loss(x, t);
    graph.capture_end();
    EXPECT_EQ(hitsOf(servedOp("aten::cross_entropy_loss")), before + 1) << "the capture did not take the plan";
    EXPECT_EQ(StreamWorkspaces::global().pooledBuffers(), beforeCapture) << "capture used a pooled buffer";
    for (int i = 0; i < 3; ++i) {
      graph.replay();
      EXPECT_TRUE(at::equal(at::cross_entropy_loss(x, t), first)) << "eager between replays " << i;
      EXPECT_TRUE(at::equal(captured, first)) << "replay " << i;
    }
    capture.synchronize();
  }
  EXPECT_TRUE(at::equal(at::cross_entropy_loss(x, t), first)) << "after the graph, on the first stream";
}

}  // namespace
}  // namespace hotkernel
