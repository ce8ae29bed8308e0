// The family search (optimizer/src/FamilyTuner.cpp) on a real GPU, with the
// softmax family's kernels and a plan factory that makes one CTA size's
// launches fail while timed (a thin fake over the real plan).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>

#include <atomic>

#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/CudaDriver.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxFamily;
using kernels::SoftmaxParams;

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

SoftmaxParams toParams(const FamilyPoint& p) {
  SoftmaxParams s;
  s.threads = p.threads;
  s.rowsPerCta = p.rowsPerCta;
  s.vec = p.vec;
  s.items = p.items;
  return s;
}

// Note [Launch failures while timing]: a candidate whose launches fail while
// it is timed is dropped and logged; the search goes on and accepts another.
TEST(FamilyTunerGpuTest, GivenACandidateWhoseLaunchFailsWhileTimedWhenTuningThenItIsDroppedAndAnotherAccepted) {
  REQUIRE_CUDA();
  const DeviceInfo info = queryDevice(0);
  const kernels::SoftmaxVariant v{DType::BFloat16, 4096, 4096};
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(0));
  const at::Tensor input =
      (at::randn({v.rows, v.cols}, at::kCUDA) * 4).to(at::kBFloat16);

  // Three register-resident points; every 1024-thread launch fails while timed.
  const std::vector<SoftmaxParams> points = {{1024, 8, 1}, {512, 8, 1}, {256, 8, 2}};
  FamilyTuneSpec fs;
  fs.family = SoftmaxFamily::kName;
  fs.kernelName = SoftmaxFamily::kKernelName;
  fs.source = SoftmaxFamily::source();
  fs.program = "softmax_lastdim.cu";
  fs.dtype = v.dtype;
  fs.rows = v.rows;
  fs.cols = v.cols;
  for (const SoftmaxParams& p : points) {
    ASSERT_TRUE(SoftmaxFamily::guardParams(v, p)) << p.describe();
    fs.validPoints.push_back(FamilyPoint{p.threads, p.rowsPerCta, p.vec, p.items});
  }
  fs.seeds = fs.validPoints;  // the 1024-thread point first
  fs.compileOptions = [&](const FamilyPoint& p) { return SoftmaxFamily::compileOptions(v.dtype, toParams(p)); };
  fs.paramsJson = [&](const FamilyPoint& p) { return toParams(p).toJson(); };
  fs.candidate = [&](const FamilyPoint& p, const std::string& cubin) {
    return softmaxCandidate(v.dtype, toParams(p), cubin);
  };
  fs.harnessSpec = softmaxSpec();
  const VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
  fs.makePlan = [&](const FamilyPoint& p, const std::string& cubin) {
    Plan plan = makeSoftmaxPlan(key, toParams(p), cubin, 0);
    if (p.threads == 1024) plan.description = "fails";
    return plan;
  };
  fs.atenCall = [&] { (void)at::cuda::_softmax(input, -1, false); };
  std::atomic<int> failedLaunches{0};
  fs.planCall = [&](const Plan& plan) {
    if (plan.description == "fails") {
      ++failedLaunches;
      return false;
    }
    at::Tensor out = at::empty_like(input);
    return plan.launcher->launch({input.const_data_ptr(), out.mutable_data_ptr(), v.rows, v.cols},
                                 at::cuda::getCurrentCUDAStream().stream());
  };
  TunerOptions options;
  options.minSpeedup = 0.0;  // accept the fastest correct candidate whatever its speed-up
  options.searchEvaluations = 6;
  double bestSpeedup = 0;
  TuneOutcome outcome;
  ASSERT_NO_THROW(outcome = tuneFamily(fs, 0, info.nvrtcArch(), options, bestSpeedup));

  EXPECT_EQ(failedLaunches.load(), 1) << "a failed launch must stop the candidate's launches";
  ASSERT_TRUE(outcome.accepted);
  EXPECT_NE(outcome.paramsJson.at("threads").get<int>(), 1024) << outcome.paramsJson.dump();
  EXPECT_GT(bestSpeedup, 0.0);
  int launchFailures = 0, timed = 0;
  for (const nlohmann::json& c : outcome.metrics.at("candidates")) {
    if (c.at("params").at("threads").get<int>() == 1024) {
      EXPECT_EQ(c.at("stage"), "launch") << c.dump();
      EXPECT_FALSE(c.contains("kernelUs")) << c.dump();
      ++launchFailures;
    } else if (c.at("stage") == "benchmark") {
      ++timed;
    }
  }
  EXPECT_GE(launchFailures, 1);
  EXPECT_GE(timed, 1);
}

}  // namespace
}  // namespace hotkernel
