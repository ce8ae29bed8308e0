// The padded-GEMM families end to end on a GPU (Note [Padded GEMMs]): every
// point's plan passes the families' checks (Note [Padded GEMM checks]) on small
// and odd shapes, with and without a bias; BERT's MLM head (F.linear with a
// bias) served through the aten::addmm override; GPT-2's LM head ([8192, 768] x [768, 50257] fp16) goes through
// Engine::optimizeVariant (tuner, checks, decision in the cache under
// "mm_pad_n", plan published), and F.linear then hits the aten::mm override
// under inference mode, with autograd on (ATen's own gradient) and inside a
// CUDA graph, within the family's bound of eager.
//
// Own binary: the plans it publishes, the trampoline it installs and the
// runtime's cache directory must not leak into other GPU tests.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/addmm_cuda_dispatch.h>
#include <ATen/ops/mm_cuda_dispatch.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <iostream>
#include <string>

#include "RuntimeGpuTestSupport.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/MmPadTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using gputest::budgetOf;
using kernels::DType;
using kernels::MmPadFamily;
using kernels::MmPadParams;
using kernels::MmPadVariant;

const std::string& cacheDir() { return gputest::runtimeCacheDir("hk-mm-pad-runtime"); }
// Set in HOTKERNEL_CACHE_DIR before the first test: the checks and tuners of the suites before the runtime's test
// read the configuration (NVRTC's variables), after which the engine would open the default cache.
[[maybe_unused]] const std::string& kCacheDirSetEarly = cacheDir();

Plan compiledPlan(const MmPadVariant& v, const MmPadParams& p) {
  const std::string cubin =
      compileToCubin(MmPadFamily::source(), "pad_rows.cu", queryDevice(0).nvrtcArch(), MmPadFamily::compileOptions(p))
          .cubin;
  return kernels::mmPadDescriptorOf(v).makePlan(kernels::mmPadKeyOf(v, 0), p.toJson(), cubin, 0);
}

// |got - eager| within two units of the dtype's relative spacing of eager, plus an absolute floor for values
// near 0 (the sum of K products of both signs): the family's check holds the plan to a float64 GEMM instead.
void expectNearEager(const at::Tensor& got, const at::Tensor& eager, const char* what, double spacing = 2.0 / 1024) {
  ASSERT_EQ(got.sizes(), eager.sizes()) << what;
  ASSERT_EQ(got.strides(), eager.strides()) << what;
  ASSERT_EQ(got.scalar_type(), eager.scalar_type()) << what;
  const at::Tensor g = got.to(at::kFloat), e = eager.to(at::kFloat);
  const double worst = ((g - e).abs() - e.abs().mul(spacing)).max().item<double>();
  EXPECT_LE(worst, 1e-2) << what;
  EXPECT_FALSE(g.isnan().any().item<bool>()) << what;
}

TEST(MmPadGpuTest, GivenEveryPointWhenItsPlanIsCheckedOnOddShapesThenTheChecksPass) {
  REQUIRE_CUDA_AND_NVRTC();
  c10::cuda::CUDAGuard guard(0);
  for (const MmPadVariant& v : {MmPadVariant{DType::Float16, 300, 1001, 64}, MmPadVariant{DType::BFloat16, 7, 13, 16},
                                MmPadVariant{DType::BFloat16, 1, 50257, 8},
                                MmPadVariant{DType::BFloat16, 300, 1001, 64, /*bias=*/true}}) {
    for (const MmPadParams& p : MmPadFamily::allParameterPoints()) {
      EXPECT_EQ(checkMmPadPlan(compiledPlan(v, p), v, 0), "")
          << p.describe() << " on " << kernels::variantString(kernels::mmPadKeyOf(v, 0));
    }
  }
}

TEST(MmPadGpuTest, GivenASmallVariantWhenTunedThenEveryCandidatePassedItsChecksAndWasTimed) {
  REQUIRE_CUDA_AND_NVRTC();
  const MmPadVariant v{DType::Float16, 512, 1001, 256};
  const TuneOutcome out = tuneMmPad(v, 0);
  EXPECT_EQ(out.family, "mm_pad_n");
  ASSERT_EQ(out.metrics.candidates.size(), MmPadFamily::parameterSpace(v).size());
  for (const CandidateRecord& c : out.metrics.candidates) {
    EXPECT_EQ(c.error, "") << c.toJson().dump();
    EXPECT_TRUE(c.speedup.has_value()) << c.toJson().dump();
  }
  std::cout << "mm_pad_n [512, 256] x [256, 1001] fp16: " << (out.accepted ? "accepted" : "kept ATen") << std::endl;
}

TEST(MmPadRuntimeGpuTest, GivenGpt2sLmHeadWhenOptimizedThenLinearHitsThePaddedPlanWithEagersValues) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  installServedOp(servedOp("aten::mm"), c10::DispatchKey::CUDA, nullptr);
  const MmPadVariant v{DType::Float16, 8192, 50257, 768};
  const VariantKey key = kernels::mmPadKeyOf(v, 0);
  const std::string op = "aten::mm", variant = kernels::variantString(key);
  const nlohmann::json summary =
      Engine::instance().optimizeVariant(op, key, [] { return true; }, budgetOf(op, key, 120.0));
  std::cout << "mm_pad_n GPT-2 head: " << summary.value("decision", "?") << " speed-up "
            << summary.value("speedup", 0.0) << std::endl;
  ASSERT_TRUE(summary["decision"] == "kernel" || summary["decision"] == "keep_aten") << summary.dump();
  const std::string fingerprint = Engine::instance().status()["fingerprint"];
  std::unique_ptr<cache::CacheStore> store = cache::CacheStore::open(cacheDir());
  const std::optional<cache::Entry> entry = store->get(fingerprint, op, variant);
  ASSERT_TRUE(entry.has_value());
  if (summary["decision"] == "kernel") {
    EXPECT_EQ(entry->family, "mm_pad_n");
  } else {
    std::cout << "mm_pad_n: the tuner kept ATen; publishing the family's first point, checked" << std::endl;
    const Plan plan = compiledPlan(v, MmPadFamily::parameterSpace(v).front());
    ASSERT_EQ(checkMmPadPlan(plan, v, 0), "");
    plansOf(servedOp(op)).publish(plan);
  }
  ASSERT_NE(plansOf(servedOp(op)).load()->find(key), nullptr);

  const auto opts = at::TensorOptions().device(at::kCUDA, 0).dtype(at::kHalf);
  const at::Tensor x = at::randn({16, 512, 768}, opts);
  const at::Tensor w = at::randn({50257, 768}, opts).mul_(1.0 / std::sqrt(768.0));
  const at::Tensor eager = at::cuda::mm(x.reshape({8192, 768}), w.t()).reshape({16, 512, 50257});
  const uint64_t hits = hitsOf(servedOp(op));
  {
    at::InferenceMode inference;
    expectNearEager(at::linear(x, w), eager, "inference_mode");
  }
  EXPECT_EQ(hitsOf(servedOp(op)), hits + 1);

  // Autograd on, the weight requiring grad: the CUDA kernel below autograd is the plan; the gradient is ATen's.
  const at::Tensor wg = w.clone().requires_grad_(true);
  const at::Tensor y = at::linear(x, wg);
  EXPECT_EQ(hitsOf(servedOp(op)), hits + 2);
  ASSERT_TRUE(y.requires_grad());
  expectNearEager(y.detach(), eager, "autograd");
  y.sum().backward();
  const at::Tensor refGrad = at::cuda::mm(at::ones({50257, 8192}, opts), x.reshape({8192, 768}));
  EXPECT_TRUE(at::allclose(wg.grad().to(at::kFloat), refGrad.to(at::kFloat), 1e-2, 1e-1));

  // Captured in a CUDA graph on a side stream, replayed: the same values as eager.
  at::cuda::CUDAStream side = at::cuda::getStreamFromPool(false, 0);
  at::cuda::CUDAGraph graph;
  at::Tensor captured;
  {
    at::cuda::CUDAStreamGuard sg(side);
    at::InferenceMode inference;
    graph.capture_begin();
    captured = at::linear(x, w);
    graph.capture_end();
  }
  graph.replay();
  at::cuda::getCurrentCUDAStream(0).synchronize();
  side.synchronize();
  expectNearEager(captured, eager, "graph replay");
}

// BERT's MLM head (F.linear with a bias, vocabulary 30,522) on fewer tokens: a checked addmm_pad_n plan published
// by hand, then at::linear with the bias hits the aten::addmm override (F.linear of a 3-d contiguous input with a
// bias is addmm on the flattened input) within the bound of eager.
TEST(MmPadRuntimeGpuTest, GivenACheckedAddmmPlanWhenLinearWithABiasIsCalledThenTheAddmmOverrideServesIt) {
  REQUIRE_CUDA_AND_NVRTC();
  installServedOp(servedOp("aten::addmm"), c10::DispatchKey::CUDA, nullptr);
  const MmPadVariant v{DType::BFloat16, 4096, 30522, 768, /*bias=*/true};
  const Plan plan = compiledPlan(v, MmPadFamily::parameterSpace(v).front());
  ASSERT_EQ(checkMmPadPlan(plan, v, 0), "");
  plansOf(servedOp("aten::addmm")).publish(plan);
  const auto opts = at::TensorOptions().device(at::kCUDA, 0).dtype(at::kBFloat16);
  const at::Tensor x = at::randn({8, 512, 768}, opts);
  const at::Tensor w = at::randn({30522, 768}, opts).mul_(1.0 / std::sqrt(768.0));
  const at::Tensor b = at::randn({30522}, opts);
  const at::Tensor eager = at::cuda::addmm(b, x.reshape({4096, 768}), w.t()).reshape({8, 512, 30522});
  const uint64_t hits = hitsOf(servedOp("aten::addmm"));
  at::InferenceMode inference;
  expectNearEager(at::linear(x, w, b), eager, "linear with bias", 2.0 / 128);
  EXPECT_EQ(hitsOf(servedOp("aten::addmm")), hits + 1);
}

}  // namespace
}  // namespace hotkernel
