// The family search (optimizer/search/FamilyTuner.cpp) on a real GPU, with the
// softmax family's kernels and a plan factory that makes one CTA size's
// launches fail while timed (a thin fake over the real plan).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>

#include <atomic>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/Check.h"
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

// A softmax family spec for bf16 [4096, 4096] over three register-resident
// points (the 1024-thread one first); with `failing1024`, every launch of the
// 1024-thread point's plan fails while it is timed (counted in `failedLaunches`).
struct SoftmaxSpecFixture {
  kernels::SoftmaxVariant v{DType::BFloat16, 4096, 4096};
  at::Tensor input;
  FamilyTuneSpec fs;
  std::atomic<int> failedLaunches{0};

  explicit SoftmaxSpecFixture(bool failing1024) {
    input = (at::randn({v.rows, v.cols}, at::kCUDA) * 4).to(at::kBFloat16);
    const std::vector<SoftmaxParams> points = {{1024, 8, 1}, {512, 8, 1}, {256, 8, 2}};
    fs.family = SoftmaxFamily::kName;
    fs.kernelName = SoftmaxFamily::kKernelName;
    fs.source = SoftmaxFamily::source();
    fs.program = "softmax_lastdim.cu";
    fs.dtype = v.dtype;
    fs.rows = v.rows;
    fs.cols = v.cols;
    for (const SoftmaxParams& p : points) {
      EXPECT_TRUE(SoftmaxFamily::guardParams(v, p)) << p.describe();
      fs.validPoints.push_back(FamilyPoint{p.threads, p.rowsPerCta, p.vec, p.items});
    }
    fs.seeds = fs.validPoints;  // the 1024-thread point first
    fs.compileOptions = [this](const FamilyPoint& p) { return SoftmaxFamily::compileOptions(v.dtype, toParams(p)); };
    fs.paramsJson = [](const FamilyPoint& p) { return toParams(p).toJson(); };
    fs.candidate = [this](const FamilyPoint& p, const std::string& cubin) {
      return softmaxCandidate(v.dtype, toParams(p), cubin);
    };
    fs.harnessSpec = softmaxSpec();
    const VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
    fs.makePlan = [key, failing1024](const FamilyPoint& p, const std::string& cubin) {
      Plan plan = kernels::softmaxDescriptor(kernels::SoftmaxOp::Softmax).makePlan(key, (toParams(p)).toJson(), cubin, 0);
      if (failing1024 && p.threads == 1024) plan.description = "fails";
      return plan;
    };
    // Two inputs to rotate over (Note [Timed outputs are checked]).
    fs.timedInputs = {TimedInput{input, {}},
                      TimedInput{(at::randn({v.rows, v.cols}, at::kCUDA) * 4).to(at::kBFloat16), {}}};
    fs.atenCall = [](const TimedInput& t) { (void)at::cuda::_softmax(t.in, -1, false); };
    fs.planCall = [this](const Plan& plan, const TimedInput& t, const std::vector<at::Tensor>& outs) {
      if (plan.description == "fails") {
        ++failedLaunches;
        return false;
      }
      return plan.launcher->launch({t.in.const_data_ptr(), outs.at(0).mutable_data_ptr(), v.rows, v.cols},
                                   at::cuda::getCurrentCUDAStream().stream());
    };
  }
};

// Note [Launch failures while timing]: a candidate whose launches fail while
// it is timed is dropped and logged; the search goes on and accepts another.
TEST(FamilyTunerGpuTest, GivenACandidateWhoseLaunchFailsWhileTimedWhenTuningThenItIsDroppedAndAnotherAccepted) {
  REQUIRE_CUDA();
  const DeviceInfo info = queryDevice(0);
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(0));
  SoftmaxSpecFixture f(/*failing1024=*/true);
  TunerOptions options;
  options.minSpeedup = 0.0;  // accept the fastest correct candidate whatever its speed-up
  options.searchEvaluations = 6;
  double bestSpeedup = 0;
  TuneOutcome outcome;
  ASSERT_NO_THROW(outcome = tuneFamily(f.fs, 0, info.nvrtcArch(), options, bestSpeedup));

  EXPECT_EQ(f.failedLaunches.load(), 1) << "a failed launch must stop the candidate's launches";
  ASSERT_TRUE(outcome.accepted);
  EXPECT_NE(outcome.paramsJson.at("threads").get<int>(), 1024) << outcome.paramsJson.dump();
  EXPECT_GT(bestSpeedup, 0.0);
  int launchFailures = 0, timed = 0;
  for (const CandidateRecord& c : outcome.metrics.candidates) {
    if (c.params->at("threads").get<int>() == 1024) {
      EXPECT_EQ(c.stage, "launch") << c.toJson().dump();
      EXPECT_FALSE(c.kernelUs.has_value()) << c.toJson().dump();
      ++launchFailures;
    } else if (c.stage == "benchmark") {
      ++timed;
    }
  }
  EXPECT_GE(launchFailures, 1);
  EXPECT_GE(timed, 1);
}

// Note [Interrupted tuning]: a yield point that says stop ends the search and
// tuneFamily throws "tuning interrupted" instead of returning a "keep ATen"
// outcome the runtime would store; the yield point is not asked again.
TEST(FamilyTunerGpuTest, GivenAYieldPointThatSaysStopWhenTuningThenTuningInterruptedIsThrown) {
  REQUIRE_CUDA();
  const DeviceInfo info = queryDevice(0);
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(0));
  // Stop at the first yield (in the first harness run), in a later harness
  // stage, and while candidates are timed.
  for (int allowed : {0, 3, 40}) {
    SCOPED_TRACE("yields allowed: " + std::to_string(allowed));
    SoftmaxSpecFixture f(/*failing1024=*/false);
    int asked = 0, refusedAt = -1;
    TunerOptions options;
    options.minSpeedup = 0.0;
    options.searchEvaluations = 6;
    options.yieldPoint = [&] {
      ++asked;
      if (asked > allowed) {
        if (refusedAt < 0) refusedAt = asked;
        return false;
      }
      return true;
    };
    double bestSpeedup = 0;
    try {
      (void)tuneFamily(f.fs, 0, info.nvrtcArch(), options, bestSpeedup);
      ADD_FAILURE() << "an interrupted tuning returned an outcome";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tuning interrupted"), std::string::npos) << e.what();
    }
    EXPECT_EQ(asked, refusedAt) << "the yield point was asked again after it said stop";
  }
}

}  // namespace
}  // namespace hotkernel
