#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <tbb/parallel_for.h>

#include "SoftmaxOverride.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxFamily;

#define REQUIRE_CUDA()                                                   \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) {      \
    GTEST_SKIP() << "no CUDA device";                                     \
  }

at::ScalarType scalar(DType d) {
  return d == DType::Float32 ? at::kFloat : d == DType::Float16 ? at::kHalf : at::kBFloat16;
}

double maxErr(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Every parameter point the family offers, for odd and extreme sizes in every
// dtype, against the ATen kernel.
TEST(SoftmaxGpuTest, GivenEveryParameterPointWhenRunOnOddSizesThenMatchesAten) {
  REQUIRE_CUDA();
  const std::string arch = queryDevice(0).nvrtcArch();
  struct Case {
    DType dtype;
    int64_t rows, cols;
    kernels::SoftmaxParams params;
    std::string cubin, error;
  };
  std::vector<Case> cases;
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {7, 13}, {3, 1000003}, {1, 128256}, {33, 4097}, {257, 32000}, {1000, 8}}) {
      kernels::SoftmaxVariant v{d, rows, cols};
      if (!SoftmaxFamily::guardVariant(v)) continue;
      for (const auto& p : SoftmaxFamily::parameterSpace(v)) cases.push_back(Case{d, rows, cols, p, "", ""});
    }
  }
  ASSERT_FALSE(cases.empty());
  tbb::parallel_for(size_t(0), cases.size(), [&](size_t i) {
    try {
      cases[i].cubin = compileToCubin(SoftmaxFamily::source(), "softmax.cu", arch,
                                      SoftmaxFamily::compileOptions(cases[i].dtype, cases[i].params))
                           .cubin;
    } catch (const std::exception& e) {
      cases[i].error = e.what();
    }
  });
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(kernels::dtypeName(c.dtype)) + " " + std::to_string(c.rows) + "x" +
                 std::to_string(c.cols) + " " + c.params.describe());
    ASSERT_TRUE(c.error.empty()) << c.error;
    VariantKey key{static_cast<int32_t>(c.dtype), 0, c.rows, c.cols};
    Plan plan = makeSoftmaxPlan(key, c.params, c.cubin, 0);
    at::Tensor x = (at::randn({c.rows, c.cols}, at::kCUDA) * 5).to(scalar(c.dtype));
    at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(plan.launcher->launch({x.const_data_ptr(), out.mutable_data_ptr(), c.rows, c.cols},
                                      at::cuda::getCurrentCUDAStream().stream()));
    at::Tensor ref = at::cuda::_softmax(x, -1, false);
    ASSERT_FALSE(out.isnan().any().item<bool>());
    EXPECT_LE(maxErr(out, ref), SoftmaxFamily::tolerance(c.dtype, c.cols));
  }
}

class SoftmaxCudaOverrideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    SoftmaxOverride::install(c10::DispatchKey::CUDA);
  }
};

TEST_F(SoftmaxCudaOverrideTest, GivenTunedVariantWhenCalledThroughDispatcherThenSwappedKernelRunsAndMatches) {
  const kernels::SoftmaxVariant v{DType::BFloat16, 4096, 32000};
  TuneOutcome t = tuneSoftmax(v, 0);
  ASSERT_TRUE(t.accepted) << t.metrics.dump(2);
  EXPECT_GT(t.metrics["speedupCi"][0].get<double>(), 1.02);
  VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
  SoftmaxOverride::plans().publish(makeSoftmaxPlan(key, t.params, t.cubin, 0));

  at::Tensor x = at::randn({v.rows, v.cols}, at::kCUDA).to(at::kBFloat16);
  const uint64_t hits = SoftmaxOverride::hits();
  at::Tensor y = at::softmax(x, -1);
  EXPECT_EQ(SoftmaxOverride::hits(), hits + 1);
  EXPECT_LE(maxErr(y, at::cuda::_softmax(x, -1, false)), SoftmaxFamily::tolerance(v.dtype, v.cols));

  // The tuner's claim holds when measured through the dispatcher.
  Comparison viaDispatcher = benchmarkInterleaved([&] { (void)at::cuda::_softmax(x, -1, false); },
                                                  [&] { (void)at::softmax(x, -1); }, 0);
  const double claimed = t.metrics["speedup"].get<double>();
  EXPECT_NEAR(viaDispatcher.speedup.median, claimed, 0.25 * claimed);
  EXPECT_GT(viaDispatcher.speedup.low, 1.0);

  // A miss (other shape) goes to ATen.
  at::Tensor z = at::randn({17, 300}, at::kCUDA).to(at::kBFloat16);
  const uint64_t misses = SoftmaxOverride::misses();
  at::Tensor w = at::softmax(z, -1);
  EXPECT_EQ(SoftmaxOverride::misses(), misses + 1);
  EXPECT_EQ(maxErr(w, at::cuda::_softmax(z, -1, false)), 0.0);
}

TEST_F(SoftmaxCudaOverrideTest, GivenPlanWhenCapturedInCudaGraphThenReplayMatchesAten) {
  const kernels::SoftmaxVariant v{DType::Float16, 512, 2048};
  auto params = SoftmaxFamily::parameterSpace(v).front();
  std::string cubin = compileToCubin(SoftmaxFamily::source(), "softmax.cu", queryDevice(0).nvrtcArch(),
                                     SoftmaxFamily::compileOptions(v.dtype, params))
                          .cubin;
  VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
  SoftmaxOverride::plans().publish(makeSoftmaxPlan(key, params, cubin, 0));

  at::Tensor x = at::randn({v.rows, v.cols}, at::kCUDA).to(at::kHalf);
  at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
  at::Tensor y;
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard g(side);
    (void)at::softmax(x, -1);  // warm-up on the capture stream
    side.synchronize();
    const uint64_t hits = SoftmaxOverride::hits();
    graph.capture_begin();
    y = at::softmax(x, -1);
    graph.capture_end();
    EXPECT_EQ(SoftmaxOverride::hits(), hits + 1);
  }
  x.copy_(at::randn_like(x));
  graph.replay();
  at::cuda::getCurrentCUDAStream().synchronize();
  side.synchronize();
  EXPECT_LE(maxErr(y, at::cuda::_softmax(x, -1, false)), SoftmaxFamily::tolerance(v.dtype, v.cols));
}

}  // namespace
}  // namespace hotkernel
